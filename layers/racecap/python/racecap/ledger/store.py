"""Where the ledger lives: in the Registrations table, beside the registration.

  REG#<registrationId> / REG               the registration (the writer's): its chargeId,
                                           amountCents, currency and paidAt are the entry
                                           payment; ``ledgerRefundedCents`` is the sum of its
                                           refunds, reserved or made (absent: none)
  REG#<registrationId> / PAYMENT#<key>     a payment beyond the entry payment (an upgrade, a
                                           transfer fee: its purpose in the intent's metadata);
                                           ``ledgerExtraCents`` on the registration is their sum
  REG#<registrationId> / REFUND#<key>      one refund, keyed by its idempotency key; while it
                                           waits for the provider's last word (PENDING,
                                           PROCESSING) it is in the table's index under
                                           ``LEDGER#OPEN`` (a sparse partition: refunds are
                                           rare), which the sweeper reads to settle it

A refund is reserved before the provider is asked: one transaction adds its amount to
``ledgerRefundedCents`` only if the sum stays within the charge (the condition compares the
sum before with the room the caller computed from the charge, ``charged - amount``: DynamoDB
conditions cannot add), and puts the refund's item only if its key is new. Two concurrent
clicks cannot both pass: the second one's condition reads the first one's sum.
"""

from __future__ import annotations

from typing import Any, Protocol

from racecap.aws.items import from_item, query_raw, to_item, values
from racecap.aws.keys import key
from racecap.aws.transactions import ConditionFailed, TransactItem, transact, update_item
from racecap.ledger.cancel_store import LEDGER_PENDING, LEDGER_SUM
from racecap.ledger.models import COUNTED_PHASES, OPEN_PHASES, LedgerEntry, RefundPhase
from racecap.registration.models import Registration

_REG_SK = "REG"
_REFUND = "REFUND#"
_PAYMENT = "PAYMENT#"
EXTRA_PAID = "ledgerExtraCents"
OPEN_PARTITION = "LEDGER#OPEN"
_OFF_INDEX = " REMOVE gsi1pk, gsi1sk"


def _pk(registration_id: str) -> str:
    return f"REG#{registration_id}"


class LedgerStore(Protocol):
    def refunded_cents(self, registration_id: str) -> int:
        """The sum of the registration's refunds, reserved or made (strongly consistent)."""
        ...

    def refunds(self, registration_id: str) -> list[LedgerEntry]:
        """Every refund entry of the registration, oldest first."""
        ...

    def refund(self, registration_id: str, refund_key: str) -> LedgerEntry | None: ...

    def reserve_items(
        self, reg: Registration, entry: LedgerEntry, *more: LedgerEntry, confirmed_only: bool = True
    ) -> list[TransactItem]:
        """Add the entries' amounts to the sum only if it stays within what the registration
        paid in all (its entry payment and ``ledgerExtraCents``, both as ``reg`` read them) and
        the registration is confirmed (a cancellation under way refunds the rest itself; not
        ``confirmed_only``: a transfer's fee paid after the cancellation began, which it did not
        count, goes back on its own); put
        each entry only if its key is new (items 0 and 1: a failed 1 means the action was
        recorded before). ``more``: the same refund's parts on the registration's other payments."""
        ...

    def payments(self, registration_id: str) -> list[LedgerEntry]:
        """The registration's payments beyond the entry payment, oldest first."""
        ...

    def payment_items(self, registration_id: str, entry: LedgerEntry) -> list[TransactItem]:
        """A payment beyond the entry payment: put it only if new (item 0: a repeat of its
        webhook or of reconciliation fails it), and add it to ``ledgerExtraCents``."""
        ...

    def entry_item(self, registration_id: str, entry: LedgerEntry) -> TransactItem:
        """Put the entry only if its key is new (the cancellation's refund: its amount is
        reserved by the update that begins the cancellation, ``CancelStore.begin_cancel_item``)."""
        ...

    def release_items(self, registration_id: str, entry: LedgerEntry, at: str) -> list[TransactItem]:
        """The provider refused: take the amount off the sum and mark the entry REFUSED, once."""
        ...

    def refuse_item(self, registration_id: str, entry: LedgerEntry, at: str) -> TransactItem:
        """Mark a PENDING entry REFUSED (the first of ``release_items``)."""
        ...

    def outside_items(self, registration_id: str, entry: LedgerEntry) -> list[TransactItem]:
        """A refund made outside Racecap (the provider's dashboard), already made: add it to the
        sum (no room to check: the money has left) and count it on the registration, flagged,
        and put its entry only if its key is new (item 1: a repeat of the same webhook)."""
        ...

    def settle(self, registration_id: str, refund_key: str, refund_id: str, at: str) -> None:
        """The provider refunded it: record the refund's id."""
        ...

    def settle_reserved(self, registration_id: str, refund_key: str, refund_id: str, at: str) -> None:
        """``settle`` for a refund ``reserve_items`` reserved: no longer pending on the registration."""
        ...

    def forget_provider_ids_items(self, registration_id: str, at: str) -> list[TransactItem]:
        """Retention: empty the provider's refund id on every entry that has one (any number
        of items: the caller splits them into transactions)."""
        ...

    def move_items(
        self, registration_id: str, entry: LedgerEntry, to: RefundPhase, *, refund_id: str, at: str, why: str = ""
    ) -> list[TransactItem]:
        """The provider's word on a refund: the entry from ``entry.status`` (its condition: a
        concurrent move fails it) to ``to``, and the registration's counters with it: a refund
        that FAILED (or was REFUSED) leaves the sum and counts a failure; one that stops waiting
        counts a director's refund's pending down. Off the open index unless still open."""
        ...

    def open_refunds(self, before: str) -> list[tuple[str, LedgerEntry]]:
        """(registration id, entry) of every refund still waiting for the provider's word that
        was recorded before ``before`` (ISO time), oldest first."""
        ...


class DynamoLedger:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self.table = table

    def refunded_cents(self, registration_id: str) -> int:
        resp = self._db.get_item(
            TableName=self.table,
            Key=key(_pk(registration_id), _REG_SK),
            ConsistentRead=True,
            ProjectionExpression=LEDGER_SUM,
        )
        return int(from_item(resp.get("Item", {})).get(LEDGER_SUM, 0))

    def refunds(self, registration_id: str) -> list[LedgerEntry]:
        return self._entries(registration_id, _REFUND)

    def _entries(self, registration_id: str, prefix: str) -> list[LedgerEntry]:
        """The registration's ledger items of one kind (refunds, payments), oldest first."""
        items = query_raw(
            self._db,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues=values({":pk": _pk(registration_id), ":p": prefix}),
            ConsistentRead=True,
        )
        return sorted((LedgerEntry.model_validate(from_item(i)) for i in items), key=lambda e: e.at)

    def refund(self, registration_id: str, refund_key: str) -> LedgerEntry | None:
        resp = self._db.get_item(
            TableName=self.table, Key=key(_pk(registration_id), _REFUND + refund_key), ConsistentRead=True
        )
        return LedgerEntry.model_validate(from_item(resp["Item"])) if "Item" in resp else None

    def reserve_items(
        self, reg: Registration, entry: LedgerEntry, *more: LedgerEntry, confirmed_only: bool = True
    ) -> list[TransactItem]:
        rid = reg.registrationId
        extra = reg.ledgerExtraCents or 0
        amount = entry.amountCents + sum(e.amountCents for e in more)
        paid = f"{EXTRA_PAID} = :extra" if extra else f"attribute_not_exists({EXTRA_PAID})"
        return [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": key(_pk(rid), _REG_SK),
                    # ledgerPending: refunds reserved, the provider's answer not recorded yet (the
                    # export's REFUND_PENDING), counted down when it is (settle_reserved, release).
                    "UpdateExpression": f"ADD {LEDGER_SUM} :amt, {LEDGER_PENDING} :n",
                    "ConditionExpression": f"amountCents = :charged AND {paid} AND "
                    + ("#s = :confirmed AND " if confirmed_only else "attribute_exists(#s) AND ")
                    + f"(attribute_not_exists({LEDGER_SUM}) OR {LEDGER_SUM} <= :room)",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": values(
                        {":amt": amount, ":charged": reg.amountCents, ":n": 1 + len(more)}
                        | ({":extra": extra} if extra else {})
                        | {":room": reg.amountCents + extra - amount}
                        | ({":confirmed": "CONFIRMED"} if confirmed_only else {})
                    ),
                }
            },
            self._put_new(rid, entry),
            *(self._put_new(rid, e) for e in more),
        ]

    def payments(self, registration_id: str) -> list[LedgerEntry]:
        return self._entries(registration_id, _PAYMENT)

    def payment_items(self, registration_id: str, entry: LedgerEntry) -> list[TransactItem]:
        doc = entry.model_dump(mode="json") | {
            "pk": _pk(registration_id),
            "sk": _PAYMENT + entry.key,  # not the provider's id: retention empties that
            "registrationId": registration_id,
        }
        return [
            {"Put": {"TableName": self.table, "Item": to_item(doc), "ConditionExpression": "attribute_not_exists(pk)"}},
            update_item(
                self.table,
                key(_pk(registration_id), _REG_SK),
                f"ADD {EXTRA_PAID} :amt",
                condition="attribute_exists(pk)",
                vals={":amt": entry.amountCents},
            ),
        ]

    def _put_new(self, registration_id: str, entry: LedgerEntry) -> TransactItem:
        doc = entry.model_dump(mode="json") | {
            "pk": _pk(registration_id),
            "sk": _REFUND + entry.key,
            "registrationId": registration_id,
        }
        if entry.status in OPEN_PHASES:
            doc |= {"gsi1pk": OPEN_PARTITION, "gsi1sk": f"{entry.at}#{registration_id}#{entry.key}"}
        return {
            "Put": {"TableName": self.table, "Item": to_item(doc), "ConditionExpression": "attribute_not_exists(pk)"}
        }

    def entry_item(self, registration_id: str, entry: LedgerEntry) -> TransactItem:
        return self._put_new(registration_id, entry)

    def outside_items(self, registration_id: str, entry: LedgerEntry) -> list[TransactItem]:
        return [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": key(_pk(registration_id), _REG_SK),
                    "UpdateExpression": f"ADD {LEDGER_SUM} :amt, outsideRefunds :one",
                    "ConditionExpression": "attribute_exists(pk)",
                    "ExpressionAttributeValues": values({":amt": entry.amountCents, ":one": 1}),
                }
            },
            self._put_new(registration_id, entry),
        ]

    def refuse_item(self, registration_id: str, entry: LedgerEntry, at: str) -> TransactItem:
        return {
            "Update": {
                "TableName": self.table,
                "Key": key(_pk(registration_id), _REFUND + entry.key),
                "UpdateExpression": "SET #s = :refused, settledAt = :at" + _OFF_INDEX,
                "ConditionExpression": "#s = :pending",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": values(
                    {":refused": RefundPhase.REFUSED.value, ":pending": RefundPhase.PENDING.value, ":at": at}
                ),
            }
        }

    def release_items(self, registration_id: str, entry: LedgerEntry, at: str) -> list[TransactItem]:
        return [
            self.refuse_item(registration_id, entry, at),
            {
                "Update": {
                    "TableName": self.table,
                    "Key": key(_pk(registration_id), _REG_SK),
                    "UpdateExpression": f"ADD {LEDGER_SUM} :minus, {LEDGER_PENDING} :less",
                    "ConditionExpression": "attribute_exists(pk)",
                    "ExpressionAttributeValues": values({":minus": -entry.amountCents, ":less": -1}),
                }
            },
        ]

    def settle(self, registration_id: str, refund_key: str, refund_id: str, at: str) -> None:
        self._db.update_item(
            TableName=self.table,
            Key=key(_pk(registration_id), _REFUND + refund_key),
            UpdateExpression="SET #s = :ok, providerId = :id, settledAt = :at" + _OFF_INDEX,
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=values({":ok": RefundPhase.SUCCEEDED.value, ":id": refund_id, ":at": at}),
        )

    def settle_reserved(self, registration_id: str, refund_key: str, refund_id: str, at: str) -> None:
        """``settle`` for a refund ``reserve_items`` reserved: counts its pending down in the same
        transaction, once (a repeat finds it settled and changes nothing)."""
        try:
            transact(
                self._db,
                [
                    update_item(
                        self.table,
                        key(_pk(registration_id), _REFUND + refund_key),
                        "SET #s = :ok, providerId = :id, settledAt = :at" + _OFF_INDEX,
                        condition="#s = :pending",
                        names={"#s": "status"},
                        vals={":ok": RefundPhase.SUCCEEDED.value, ":pending": RefundPhase.PENDING.value}
                        | {":id": refund_id, ":at": at},
                    ),
                    update_item(
                        self.table,
                        key(_pk(registration_id), _REG_SK),
                        f"ADD {LEDGER_PENDING} :less",
                        condition="attribute_exists(pk)",
                        vals={":less": -1},
                    ),
                ],
            )
        except ConditionFailed:
            pass  # settled before (a repeat of the same action)

    def forget_provider_ids_items(self, registration_id: str, at: str) -> list[TransactItem]:
        return [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": key(_pk(registration_id), _REFUND + entry.key),
                    # The refund's id and the payment it went back to: both the provider's ids.
                    "UpdateExpression": "SET providerId = :empty, intentId = :empty, purgedAt = :at",
                    "ConditionExpression": "attribute_exists(pk)",
                    "ExpressionAttributeValues": values({":empty": "", ":at": at}),
                }
            }
            for entry in self.refunds(registration_id)
            if entry.providerId or entry.intentId
        ] + [
            update_item(
                self.table,
                key(_pk(registration_id), _PAYMENT + entry.key),
                "SET providerId = :empty, purgedAt = :at",
                condition="attribute_exists(pk)",
                vals={":empty": "", ":at": at},
            )
            for entry in self.payments(registration_id)
            if entry.providerId
        ]

    def move_items(
        self, registration_id: str, entry: LedgerEntry, to: RefundPhase, *, refund_id: str, at: str, why: str = ""
    ) -> list[TransactItem]:
        frm = RefundPhase(entry.status)
        sets = "SET #s = :to, settledAt = :at" + (", providerId = :id" if refund_id else "")
        sets += ", failureReason = :why" if why else ""
        vals: dict[str, Any] = {":to": to.value, ":from": frm.value, ":at": at}
        vals |= ({":id": refund_id} if refund_id else {}) | ({":why": why} if why else {})
        items = [
            update_item(
                self.table,
                key(_pk(registration_id), _REFUND + entry.key),
                sets + ("" if to in OPEN_PHASES else _OFF_INDEX),
                condition="#s = :from",
                names={"#s": "status"},
                vals=vals,
            )
        ]
        adds = counter_moves(entry, frm, to)
        if adds:
            items.append(
                update_item(
                    self.table,
                    key(_pk(registration_id), _REG_SK),
                    "ADD " + ", ".join(f"{name} :{name}" for name in adds),
                    condition="attribute_exists(pk)",
                    vals={f":{name}": v for name, v in adds.items()},
                )
            )
        return items

    def open_refunds(self, before: str) -> list[tuple[str, LedgerEntry]]:
        items = query_raw(
            self._db,
            TableName=self.table,
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :p AND gsi1sk < :before",
            ExpressionAttributeValues=values({":p": OPEN_PARTITION, ":before": before}),
        )
        found = [(str(i["registrationId"]["S"]), LedgerEntry.model_validate(from_item(i))) for i in items]
        return [(rid, e) for rid, e in found if e.status in OPEN_PHASES]  # the index lags the table


def counter_moves(entry: LedgerEntry, frm: RefundPhase, to: RefundPhase) -> dict[str, int]:
    """What a refund's move does to its registration's counters (one rule for every store)."""
    adds: dict[str, int] = {}
    if frm in COUNTED_PHASES and to not in COUNTED_PHASES:
        adds[LEDGER_SUM] = -entry.amountCents  # refundable again
    if entry.origin == "refund" and frm in OPEN_PHASES and to not in OPEN_PHASES:
        adds[LEDGER_PENDING] = -1  # only a director's refund counts itself pending (reserve_items)
    if to == RefundPhase.FAILED:
        adds["refundFailures"] = 1  # the director's list and export flag it
    return adds
