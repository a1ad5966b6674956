"""The ledger's writes on registrations: a cancellation begun (its refund reserved in the same update),
undone or finished (the place back, the counters moved), the refunds counted in an event's figures, a
dispute flagged. On the registrations' own store (``registration.store.DynamoRegistrations``)."""

from __future__ import annotations

from typing import Any, Protocol

from racecap.aws.items import (
    is_conditional_failure,
    query_raw,
    values,
)
from racecap.aws.keys import (
    email_key,
    hold_key,
    reg_key,
    stats_key,
    stock_key,
)
from racecap.aws.transactions import TransactItem, update_item
from racecap.holds.models import (
    Hold,
    HoldPhase,
)
from racecap.places.returns import Giveback, shard_items
from racecap.registration.models import (
    Registration,
    RegistrationPhase,
)
from racecap.registration.store import DynamoRegistrations, RegistrationStore, cancelled_by_field


class CancelStore(RegistrationStore, Protocol):
    """The ledger's writes on registrations, beside their reads (``DynamoCancelStore``; a fake in tests)."""

    def begin_cancel_item(
        self,
        registration_id: str,
        now: str,
        by: str,
        *,
        choice: str | None = None,
        refund_cents: int = 0,
        refund_key: str | None = None,
        charged: int = 0,
        whole: bool = False,
        link_version: int | None = None,
        event_id: str | None = None,
        also: dict[str, Any] | None = None,
    ) -> TransactItem: ...

    def undo_cancel_item(self, registration_id: str, release_cents: int = 0) -> TransactItem: ...

    def finish_cancel_items(
        self,
        reg: Registration,
        hold: Hold,
        refund_id: str,
        now: str,
        refunded_cents: int | None = None,
        *,
        place: Giveback | None = None,
    ) -> list[TransactItem]:
        """``place``: where the freed place goes (``places.returns``); None: back to its shard."""
        ...

    def refunds_counted_item(
        self, race_id: str, event_id: str, cents: int, *, outside: bool = False
    ) -> TransactItem: ...

    def payments_counted_item(self, race_id: str, event_id: str, cents: int) -> TransactItem:
        """The event's counters see a payment beyond the entry (a transfer fee) of ``cents``."""
        ...

    def flag_dispute(self, registration_id: str, dispute_id: str, now: str) -> bool: ...

    def open_cancel_item(self, registration_id: str, now: str) -> TransactItem:
        """Put the mark of a cancellation under way (with the write that begins it): the
        sweeper finds every cancellation left half-way by it (``open_cancels``)."""
        ...

    def close_cancel_item(self, registration_id: str) -> TransactItem:
        """Delete the mark (with the write that finishes or undoes the cancellation)."""
        ...

    def open_cancels(self, before: str) -> list[str]:
        """The registrations whose cancellation began before ``before`` and is still marked."""
        ...


# A cancellation under way, beside its registration (REG#<id> / CANCELLING), in the table's
# index under one sparse partition: cancellations are rare, and the sweeper reads them all.
CANCEL_MARK_SK = "CANCELLING"
OPEN_CANCELS = "CANCEL#OPEN"


# The ledger's sum of a registration's refunds, reserved or made (racecap.ledger.store owns it;
# the cancellation reserves its refund in the same update that begins it).
LEDGER_SUM = "ledgerRefundedCents"


# How many of a registration's refunds are reserved and not answered by the provider yet.
LEDGER_PENDING = "ledgerPending"


class DynamoCancelStore(DynamoRegistrations):
    # -- directors: cancelling -----------------------------------------------------------------
    @staticmethod
    def _update_status(
        table: str, key: dict[str, Any], expression: str, condition: str, vals: dict[str, Any]
    ) -> TransactItem:
        """An Update of a registration's or a hold's item, ``#s`` naming its status."""
        return update_item(table, key, expression, condition=condition, names={"#s": "status"}, vals=vals)

    def begin_cancel_item(
        self,
        registration_id: str,
        now: str,
        by: str,
        *,
        choice: str | None = None,
        refund_cents: int = 0,
        refund_key: str | None = None,
        charged: int = 0,
        whole: bool = False,
        link_version: int | None = None,
        event_id: str | None = None,
        also: dict[str, Any] | None = None,
    ) -> TransactItem:
        """CONFIRMED → CANCELLING: the director's decision, recorded before any money moves.
        With a refund ``choice``, the refund's amount is reserved in the ledger's sum in the
        same update (one write on the item: a transaction may not touch it twice), only while
        the sum stays within ``charged`` — the ledger's reservation (racecap.ledger.store).
        ``whole``: the refund is all that is left (FULL), so only while the sum is exactly
        ``charged - refund_cents``, the sum the caller read: a refund reserved or given back
        since then fails it and the caller reads again (never more, nor less, than is left)."""
        sets = "SET #s = :cancelling, cancelRequestedAt = :now, cancelledBy = :by"
        condition = "#s = :confirmed"
        vals: dict[str, Any] = {
            ":cancelling": RegistrationPhase.CANCELLING,
            ":confirmed": RegistrationPhase.CONFIRMED,
            ":now": now,
            ":by": by,
        }
        if choice is not None:
            sets += ", cancelRefund = :choice, cancelRefundCents = :cents"
            vals |= {":choice": choice, ":cents": refund_cents}
        if refund_key is not None:
            sets += ", cancelRefundKey = :key"
            vals[":key"] = refund_key
        for i, (name, value) in enumerate((also or {}).items()):  # a deferral's record of where it went
            sets += f", {name} = :also{i}"
            vals[f":also{i}"] = value
        if refund_cents:
            sets += f" ADD {LEDGER_SUM} :cents"
            within = "=" if whole else "<="
            condition += (
                f" AND amountCents = :charged AND (attribute_not_exists({LEDGER_SUM}) OR {LEDGER_SUM} {within} :room)"
            )
            vals |= {":charged": charged, ":room": charged - refund_cents}
        if link_version is not None:
            # A runner's own cancellation: only while their link is the registration's current
            # one (a transfer or a change of address since revokes it: the place is someone
            # else's, or at another address, and a request authorised before must not cancel it).
            condition += (
                " AND (attribute_not_exists(linkVersion) OR linkVersion = :lv)"
                if not link_version
                else (" AND linkVersion = :lv")
            )
            vals[":lv"] = link_version
        if event_id is not None:
            # Still in the event it was read in: a switch since moved it, and this cancellation
            # would free the old event's place (read before) instead of the new one's.
            condition += " AND eventId = :ev"
            vals[":ev"] = event_id
        return self._update_status(self._regs, reg_key(registration_id), sets, condition, vals)

    def undo_cancel_item(self, registration_id: str, release_cents: int = 0) -> TransactItem:
        """CANCELLING → CONFIRMED (the provider refused the refund), giving back the amount the
        cancellation had reserved in the ledger's sum."""
        expression = (
            "SET #s = :confirmed "
            "REMOVE cancelRequestedAt, cancelledBy, cancelRefund, cancelRefundCents, cancelRefundKey"
        )
        vals: dict[str, Any] = {":cancelling": RegistrationPhase.CANCELLING, ":confirmed": RegistrationPhase.CONFIRMED}
        if release_cents:
            expression += f" ADD {LEDGER_SUM} :minus"
            vals[":minus"] = -release_cents
        return self._update_status(self._regs, reg_key(registration_id), expression, "#s = :cancelling", vals)

    def refunds_counted_item(self, race_id: str, event_id: str, cents: int, *, outside: bool = False) -> TransactItem:
        """The event's counters see a refund of ``cents`` (negative: one given back) that leaves
        the registration as it is: a partial refund, ours or one made outside Racecap."""
        expression = "ADD refundedCents :amt" + (", outsideRefunds :one" if outside else "")
        return {
            "Update": {
                "TableName": self._inv,
                "Key": stats_key(race_id, event_id),
                "UpdateExpression": expression,
                "ExpressionAttributeValues": values({":amt": cents} | ({":one": 1} if outside else {})),
            }
        }

    def payments_counted_item(self, race_id: str, event_id: str, cents: int) -> TransactItem:
        return {
            "Update": {
                "TableName": self._inv,
                "Key": stats_key(race_id, event_id),
                "UpdateExpression": "ADD otherPaidCents :amt",
                "ExpressionAttributeValues": values({":amt": cents}),
            }
        }

    def finish_cancel_items(
        self,
        reg: Registration,
        hold: Hold,
        refund_id: str,
        now: str,
        refunded_cents: int | None = None,
        *,
        place: Giveback | None = None,
    ) -> list[TransactItem]:
        """Refunded (``refunded_cents`` by this cancellation; None: the whole charge, as a
        cancellation begun before the refund choice did): the registration is CANCELLED, its
        place goes back to its shard, its email may register again, and the counters move —
        all or nothing, exactly once (the registration's CANCELLING state is the condition); the
        event's ``cancelled`` counts it, and so does its counter of who cancelled it (``cancelledBy``).
        ``cancelledCents`` keeps what the cancelled registrations had paid, so the gross stays
        what was taken: revenue (the confirmed ones') + cancelled."""
        rid, race_id, event_id = reg.registrationId, reg.raceId, reg.eventId
        amount = reg.amountCents
        refunded = amount if refunded_cents is None else refunded_cents
        return [
            self._update_status(
                self._regs,
                reg_key(rid),
                "SET #s = :cancelled, cancelledAt = :now, refundId = :refund",
                "#s = :cancelling",
                {
                    ":cancelled": RegistrationPhase.CANCELLED,
                    ":cancelling": RegistrationPhase.CANCELLING,
                    ":now": now,
                    ":refund": refund_id,
                },
            ),
            (
                # A team's hold stays CONFIRMED while any member is: it counts its cancelled ones.
                self._update_status(
                    self._inv,
                    hold_key(hold.holdId),
                    "ADD cancelledPlaces :one",
                    "#s = :confirmed",
                    {":confirmed": HoldPhase.CONFIRMED, ":one": 1},
                )
                if hold.is_team
                else self._update_status(
                    self._inv,
                    hold_key(hold.holdId),
                    "SET #s = :cancelled",
                    "registrationId = :rid AND #s = :confirmed",
                    {":cancelled": HoldPhase.CANCELLED, ":confirmed": HoldPhase.CONFIRMED, ":rid": rid},
                )
            ),
            # The place: back to its shard, or to the waitlist's pool (``places.returns``).
            *(place.items if place else shard_items(self._inv, race_id, event_id, {reg.shard or hold.shard: 1})),
            {
                "Delete": {
                    "TableName": self._inv,
                    "Key": email_key(race_id, reg.email),
                    "ConditionExpression": "attribute_not_exists(pk) OR registrationId = :rid",
                    "ExpressionAttributeValues": values({":rid": rid}),
                }
            },
            {
                "Update": {
                    "TableName": self._inv,
                    "Key": stats_key(race_id, event_id),
                    # ``cancelled`` and, beside it, the count of who cancelled (the runner, the
                    # organiser, the provider, a job): one more ADD on the same item, same WCU.
                    "UpdateExpression": "ADD confirmed :minus, revenueCents :lost, cancelled :one, "
                    f"refundedCents :amt, cancelledCents :paid, {cancelled_by_field(reg.cancelledBy)} :one"
                    + (", #deferred :one" if reg.deferredTo else ""),  # a reserved word: named
                    "ExpressionAttributeValues": values(
                        {
                            ":minus": -1,
                            ":lost": -amount,
                            ":one": 1,
                            ":amt": refunded,
                            ":paid": amount,
                        }
                    ),
                    **({"ExpressionAttributeNames": {"#deferred": "deferred"}} if reg.deferredTo else {}),
                }
            },
            # The options with stock it took (a T-shirt size) go back with the place.
            *(
                update_item(
                    self._inv, stock_key(race_id, event_id, entry), "SET taken = taken - :one", vals={":one": 1}
                )
                for entry in _stock_of(reg, hold)
            ),
        ]

    # -- cancellations left half-way ----------------------------------------------------------------
    def open_cancel_item(self, registration_id: str, now: str) -> TransactItem:
        mark = {"pk": f"REG#{registration_id}", "sk": CANCEL_MARK_SK, "registrationId": registration_id}
        mark |= {"gsi1pk": OPEN_CANCELS, "gsi1sk": f"{now}#{registration_id}", "at": now}
        return {"Put": {"TableName": self._regs, "Item": values(mark)}}

    def close_cancel_item(self, registration_id: str) -> TransactItem:
        return {
            "Delete": {"TableName": self._regs, "Key": values({"pk": f"REG#{registration_id}", "sk": CANCEL_MARK_SK})}
        }

    def open_cancels(self, before: str) -> list[str]:
        items = query_raw(
            self._db,
            TableName=self._regs,
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :p AND gsi1sk < :before",
            ExpressionAttributeValues=values({":p": OPEN_CANCELS, ":before": before}),
        )
        return [str(i["registrationId"]["S"]) for i in items]

    # -- disputes -------------------------------------------------------------------------------
    def flag_dispute(self, registration_id: str, dispute_id: str, now: str) -> bool:
        """Mark a registration as disputed (the director sees it); False when it does not exist."""
        try:
            self._db.update_item(
                TableName=self._regs,
                Key=reg_key(registration_id),
                UpdateExpression="SET disputeId = :d, disputedAt = if_not_exists(disputedAt, :now)",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=values({":d": dispute_id, ":now": now}),
            )
        except Exception as exc:
            if not is_conditional_failure(exc):
                raise
            return False
        return True


def _stock_of(reg: Registration, hold: Hold) -> list[str]:
    """The options with stock this registration took: its hold's, or its own in a team's."""
    if hold.attempt is None:
        return []
    if hold.is_team:
        mine = next((m for m in hold.attempt.team() if m.registrationId == reg.registrationId), None)
        return list(mine.stock or []) if mine else []
    return list(hold.attempt.stock or [])
