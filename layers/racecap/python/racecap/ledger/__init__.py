"""The payments ledger (issue 25): what was charged and refunded per registration.

    models.py    an entry (payment or refund) and a registration's statement
    store.py     DynamoDB: refunds as items beside the registration, the reservation that keeps
                 the sum of refunds within the charge (behind the ``LedgerStore`` Protocol)
    service.py   the use cases: a director's refund of an amount, the cancellation's refund, a
                 registration's statement
    wiring.py    the composition root

The entry payment is not written anywhere new: it is read from the registration item the
writer already writes (its chargeId, amountCents, currency, paidAt), so the ledger adds no
write to the hot registration path. Refunds are written by the director's actions only.
"""
