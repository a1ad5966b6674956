"""Confirmed registrations (Registrations table) and the counters the writer keeps (keys:
``aws/keys.py``).

The writer confirms a whole batch for one event in ONE transaction: the bib counter
moves from n to n+k only together with the k registrations that take bibs n+1..n+k, so
bibs have no gaps and no duplicates whatever crashes or redeliveries happen.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol, cast

from racecap.aws.items import (
    from_item,
    get_all,
    query_all,
    query_raw,
    to_item,
    values,
)
from racecap.aws.keys import (
    bib_counter_key,
    bib_sk,
    email_key,
    email_pk,
    event_bib_pk,
    hold_key,
    key,
    minute_sk,
    reg_key,
    reg_pk,
    stats_key,
    stats_pk,
    stock_key,
)
from racecap.aws.transactions import ConditionFailed, TransactItem, transact, update_item
from racecap.holds.models import EmailClaimPhase, HoldPhase
from racecap.models import ActorKind, director_kind
from racecap.registration.models import (
    ROW_FIELDS,
    PaidRegistration,
    Registration,
    RegistrationPhase,
    RegistrationRowData,
)


class RegistrationStore(Protocol):
    def get(self, registration_id: str, consistent: bool = True) -> Registration | None: ...

    def existing(self, registration_ids: list[str]) -> dict[str, Registration]: ...

    def next_bib(self, race_id: str, event_id: str) -> int: ...

    def confirm_batch(
        self, race_id: str, event_id: str, first_bib: int, paid: list[PaidRegistration], confirmed_at: str
    ) -> list[Registration]:
        """All of ``paid`` with bibs ``first_bib``.., or none: ``CounterMoved`` / ``DuplicateRegistration``."""
        ...

    def event_page(
        self, race_id: str, event_id: str, after_bib: int, limit: int
    ) -> tuple[list[RegistrationRowData], bool]: ...

    def event_rows(self, race_id: str, event_id: str, after_bib: int = 0) -> Iterator[RegistrationRowData]: ...

    def by_bib(self, race_id: str, event_id: str, bib: int) -> RegistrationRowData | None: ...

    def by_email(self, race_id: str, email: str) -> Registration | None: ...

    def stats(self, race_id: str, event_id: str) -> dict[str, int]: ...

    def per_minute(self, race_id: str, event_id: str, since: str) -> dict[str, int]: ...


# An event's money and counts (``STATS#`` item): revenue is what the confirmed registrations
# paid, cancelledCents what the cancelled ones had paid, refundedCents every refund.
# ``cancelled`` is split by who cancelled (``cancelled_by_field``): the split counters move with it,
# in the same update, so they always add up to it (items from before the split read 0 each, and
# the total stays the one kept since).
CANCELLED_BY_FIELDS: dict[ActorKind, str] = {
    "runner": "cancelledByRunners",
    "director": "cancelledByOrganiser",
    "provider": "cancelledByProvider",
    "system": "cancelledBySystem",
}
STATS_FIELDS = (
    *("confirmed", "revenueCents", "cancelled", "refundedCents", "cancelledCents", "outsideRefunds"),
    *("transfers", "otherPaidCents"),  # places handed over; payments beyond the entry (transfer fees)
    *("switchedIn", "switchedOut"),  # runners who switched into and out of the event (ledger.switch)
    "deferred",  # of the cancelled, the places deferred to the next edition (ledger.deferral)
    *CANCELLED_BY_FIELDS.values(),
    "soldOutAt",  # when the event first sold out, epoch ms (holds.service): 0 until then
)


def cancelled_by_field(cancelled_by: str | None) -> str:
    """The event's counter a cancellation by ``cancelled_by`` (a registration's ``cancelledBy``)
    adds to beside ``cancelled``; a cancellation that names no one (none since ``cancelledBy``
    is written when one begins) counts as the organiser's, who alone could cancel then."""
    return CANCELLED_BY_FIELDS[director_kind(cancelled_by or "")]


# 2 items per registration (a team's members: 1 each, and 1 for their hold) + counter + stats +
# minute stays under 100.
MAX_PER_TRANSACTION = 48


def bib_counter_item(table: str, race_id: str, event_id: str, first_bib: int, k: int) -> TransactItem:
    """An event's bib counter moved past ``k`` bibs from ``first_bib``, only if no one took them
    first (the writer's batches, a switch's new bib): what keeps bibs 1..N per event."""
    condition = "attribute_not_exists(pk)" if first_bib == 1 else "#n = :cur"
    vals = {":next": first_bib + k} | ({} if first_bib == 1 else {":cur": first_bib})
    return update_item(table, bib_counter_key(race_id, event_id), "SET #n = :next", condition=condition,
                       names={"#n": "next"}, vals=vals)  # fmt: skip


@dataclass(frozen=True)
class SwitchMove:
    """What a switch writes (``switch_items``): the target event, its new bib and shard, the
    runner's answers for it (None: removed), the refund reserved, the record of the old entry."""

    eventId: str
    eventName: str
    bib: int
    shard: str
    holdId: str
    recordId: str
    person: dict[str, Any]
    refundCents: int
    now: str


class CounterMoved(Exception):
    """Another writer took bibs first; read the counter again."""


class DuplicateRegistration(Exception):
    """A registration in the batch was confirmed meanwhile; drop it and retry."""


class DynamoRegistrations:
    def __init__(self, client: Any, registrations_table: str, inventory_table: str) -> None:
        self._db = client
        self._regs = registrations_table
        self._inv = inventory_table

    def get(self, registration_id: str, consistent: bool = True) -> Registration | None:
        resp = self._db.get_item(TableName=self._regs, Key=reg_key(registration_id), ConsistentRead=consistent)
        return Registration.model_validate(from_item(resp["Item"])) if "Item" in resp else None

    def existing(self, registration_ids: list[str]) -> dict[str, Registration]:
        found = (
            Registration.model_validate(item)
            for item in get_all(self._db, self._regs, [reg_key(r) for r in registration_ids])
        )
        return {reg.registrationId: reg for reg in found}

    def next_bib(self, race_id: str, event_id: str) -> int:
        resp = self._db.get_item(TableName=self._inv, Key=bib_counter_key(race_id, event_id), ConsistentRead=True)
        return int(from_item(resp["Item"])["next"]) if "Item" in resp else 1

    def confirm_batch(
        self, race_id: str, event_id: str, first_bib: int, paid: list[PaidRegistration], confirmed_at: str
    ) -> list[Registration]:
        """Write ``paid`` with bibs first_bib.. in one transaction (see module doc).

        Raises ``CounterMoved`` when another writer took those bibs first, and
        ``DuplicateRegistration`` when one of them was confirmed meanwhile."""
        k = len(paid)
        regs = [
            Registration(
                **p.model_dump(), bib=first_bib + i, status=RegistrationPhase.CONFIRMED, confirmedAt=confirmed_at
            )
            for i, p in enumerate(paid)
        ]
        items: list[TransactItem] = [
            bib_counter_item(self._inv, race_id, event_id, first_bib, k),
            # Registrations per minute for directors' live stats: one counter per minute,
            # written as often as the STATS item (once per batch), never per runner.
            {
                "Update": {
                    "TableName": self._inv,
                    "Key": key(stats_pk(race_id, event_id), minute_sk(confirmed_at)),
                    "UpdateExpression": "ADD confirmed :k",
                    "ExpressionAttributeValues": values({":k": k}),
                }
            },
            {
                "Update": {
                    "TableName": self._inv,
                    "Key": stats_key(race_id, event_id),
                    "UpdateExpression": "ADD confirmed :k, revenueCents :r",
                    "ExpressionAttributeValues": values({":k": k, ":r": sum(r.amountCents for r in regs)}),
                }
            },
        ]
        holds_seen: set[str] = set()
        for reg in regs:
            rid = reg.registrationId
            items.append(
                {
                    "Put": {
                        "TableName": self._regs,
                        "Item": to_item(
                            {
                                **reg.model_dump(mode="json"),
                                "pk": reg_pk(rid),
                                "sk": "REG",
                                "gsi1pk": event_bib_pk(race_id, event_id),
                                "gsi1sk": bib_sk(reg.bib),
                            }
                        ),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
            if reg.holdId in holds_seen:
                continue  # a team's hold: moved once, with its captain (the first member)
            holds_seen.add(reg.holdId)
            items.append(
                {
                    "Update": {
                        "TableName": self._inv,
                        "Key": hold_key(reg.holdId),
                        # chargeId too: the writer may get here before the API's mark_queued
                        # does, and a late webhook must find the hold's payment on it.
                        "UpdateExpression": "SET #s = :confirmed, bib = :bib, chargeId = :charge REMOVE gsi1pk, gsi1sk",
                        "ConditionExpression": "registrationId = :rid",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": values(
                            {":confirmed": HoldPhase.CONFIRMED, ":bib": reg.bib, ":rid": rid, ":charge": reg.chargeId}
                        ),
                    }
                }
            )
        try:
            transact(self._db, items)
        except ConditionFailed as exc:
            if exc.first == 0:
                raise CounterMoved() from exc
            raise DuplicateRegistration() from exc
        return regs

    # -- directors: reading -------------------------------------------------------------------
    def event_page(
        self, race_id: str, event_id: str, after_bib: int, limit: int
    ) -> tuple[list[RegistrationRowData], bool]:
        """Up to ``limit`` registrations of one event in bib order after ``after_bib``
        (flat dicts of ``ROW_FIELDS``); and whether the event has more."""
        resp = self._db.query(**self._after_bib(race_id, event_id, after_bib), Limit=limit)
        return [flat(i) for i in resp.get("Items", [])], bool(resp.get("LastEvaluatedKey"))

    def event_rows(self, race_id: str, event_id: str, after_bib: int = 0) -> Iterator[RegistrationRowData]:
        """Every registration of one event after ``after_bib``, in bib order, page by page."""
        yield from (flat(i) for i in query_raw(self._db, **self._after_bib(race_id, event_id, after_bib)))

    def _after_bib(self, race_id: str, event_id: str, after_bib: int) -> dict[str, Any]:
        """One event's registrations in bib order, after ``after_bib`` (the gsi1 query)."""
        return {
            "TableName": self._regs,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :pk AND gsi1sk > :after",
            "ExpressionAttributeValues": values({":pk": event_bib_pk(race_id, event_id), ":after": bib_sk(after_bib)}),
            "ProjectionExpression": _PROJECTION,
            "ExpressionAttributeNames": _PROJECTION_NAMES,
        }

    def by_bib(self, race_id: str, event_id: str, bib: int) -> RegistrationRowData | None:
        resp = self._db.query(
            TableName=self._regs,
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :pk AND gsi1sk = :bib",
            ExpressionAttributeValues=values({":pk": event_bib_pk(race_id, event_id), ":bib": bib_sk(bib)}),
            ProjectionExpression=_PROJECTION,
            ExpressionAttributeNames=_PROJECTION_NAMES,
        )
        items = resp.get("Items", [])
        return flat(items[0]) if items else None

    def by_email(self, race_id: str, email: str) -> Registration | None:
        """The race's registration for an email, through the email's claim (one read each;
        a claim still paying has no registration)."""
        resp = self._db.get_item(TableName=self._inv, Key=email_key(race_id, email), ConsistentRead=True)
        claim = from_item(resp["Item"]) if "Item" in resp else None
        return self.get(claim["registrationId"]) if claim is not None else None

    def move_email_items(self, reg: Registration, new_email: str, now: str) -> list[TransactItem]:
        """The registration's email changes (issue 39), with its race-wide claim: the new
        address claimed only if no one holds it, the old claim deleted only if it is this
        registration's, the registration's address and link version moved only if they are
        still the ones the change was asked on. One transaction: at every moment the race has
        one registration per email."""
        rid, version = reg.registrationId, reg.linkVersion or 0
        return [
            *self.claim_move_items(reg, new_email),
            update_item(
                self._regs,
                reg_key(rid),
                "SET email = :new, linkVersion = :next, emailChangedAt = :now",
                condition="email = :old AND #s = :confirmed AND "
                "(attribute_not_exists(linkVersion) OR linkVersion = :version)",
                names={"#s": "status"},
                vals={
                    ":new": new_email,
                    ":old": reg.email,
                    ":next": version + 1,
                    ":version": version,
                    ":now": now,
                    ":confirmed": RegistrationPhase.CONFIRMED,
                },
            ),
        ]

    def claim_move_items(self, reg: Registration, new_email: str) -> list[TransactItem]:
        """The race-wide email claim moving from the registration's address to ``new_email``
        (an email change, a transfer): [0] the new claim, only if no one holds it; [1] the old
        one deleted, only if it is this registration's."""
        return [
            {
                "Put": {
                    "TableName": self._inv,
                    "Item": to_item(
                        {
                            "pk": email_pk(reg.raceId, new_email),
                            "sk": "EMAIL",
                            "registrationId": reg.registrationId,
                            "holdId": reg.holdId,
                            "eventId": reg.eventId,
                            "status": EmailClaimPhase.CLAIMED,
                        }
                    ),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Delete": {
                    "TableName": self._inv,
                    "Key": email_key(reg.raceId, reg.email),
                    "ConditionExpression": "registrationId = :rid",
                    "ExpressionAttributeValues": values({":rid": reg.registrationId}),
                }
            },
        ]

    def set_transfer_offer(
        self, reg: Registration, offer: dict[str, Any] | None, *, made: int | None = None, expect: int | None = None
    ) -> None:
        """The runner's pending transfer (``registration.transfer``): set (numbered ``made``),
        replaced, or removed (None), only while the registration is confirmed, and either under
        the link it was asked with, or (``expect``) while offer ``expect`` is the pending one."""
        vals: dict[str, Any] = {":confirmed": RegistrationPhase.CONFIRMED}
        if expect is not None:
            condition, vals[":n"] = "#s = :confirmed AND transferOffer.n = :n", expect
        elif reg.linkVersion:
            condition, vals[":version"] = "#s = :confirmed AND linkVersion = :version", reg.linkVersion
        else:
            condition = "#s = :confirmed AND attribute_not_exists(linkVersion)"
        if offer is None:
            expression = "REMOVE transferOffer"
        else:
            expression, vals[":offer"] = "SET transferOffer = :offer", offer
            if made is not None:
                expression += ", offersMade = :made"
                vals[":made"] = made
                condition += " AND attribute_not_exists(pendingSwitch)"  # a switch under way goes first
        transact(
            self._db,
            [update_item(self._regs, reg_key(reg.registrationId), expression, condition=condition,
                         names={"#s": "status"}, vals=vals)],
        )  # fmt: skip

    def transfer_items(self, reg: Registration, n: int, person: dict[str, Any], now: str) -> list[TransactItem]:
        """The place handed to another runner (``registration.transfer``): [0] the new address's
        claim, [1] the old one's deleted, [2] the registration's runner replaced (not kept: the
        old runner's data goes), its links revoked, the offer ``n`` consumed — only while the
        registration is confirmed and offer ``n`` is the pending one."""
        rid, version = reg.registrationId, reg.linkVersion or 0
        sets = {**person, "linkVersion": version + 1, "transferredAt": now, "lastTransfer": n}
        names = {f"#f{i}": k for i, k in enumerate(sets)}
        vals: dict[str, Any] = {f":v{i}": v for i, v in enumerate(sets.values())}
        removed = [k for k in ("answers", "questionsVersion", "waiver") if k not in person]
        update = update_item(
            self._regs,
            reg_key(rid),
            "SET " + ", ".join(f"#f{i} = :v{i}" for i in range(len(sets)))
            + ", transfers = if_not_exists(transfers, :zero) + :one REMOVE transferOffer"
            + "".join(f", {k}" for k in removed),
            # No switch under way: a transfer and a switch of one entry never both happen.
            condition="#s = :confirmed AND email = :old AND transferOffer.n = :n "
            "AND attribute_not_exists(pendingSwitch)",
            names={**names, "#s": "status"},
            vals={**vals, ":confirmed": RegistrationPhase.CONFIRMED, ":old": reg.email, ":n": n,
                  ":zero": 0, ":one": 1},
        )  # fmt: skip
        counted = {
            "Update": {
                "TableName": self._inv,
                "Key": stats_key(reg.raceId, reg.eventId),
                "UpdateExpression": "ADD transfers :one",
                "ExpressionAttributeValues": values({":one": 1}),
            }
        }
        return [*self.claim_move_items(reg, str(person["email"])), update, counted]

    def set_pending_switch(self, reg: Registration, pending: dict[str, Any] | None, *, hold: str | None = None) -> None:
        """The runner's switch under way (``ledger.switch``): set or removed (None) only while the
        registration is confirmed, in the event it was read in, and either under the link it was
        asked with, or (``hold``) while the switch holding ``hold`` is the pending one."""
        vals: dict[str, Any] = {":confirmed": RegistrationPhase.CONFIRMED, ":event": reg.eventId}
        condition = "#s = :confirmed AND eventId = :event"
        if hold is not None:
            condition, vals[":hold"] = condition + " AND pendingSwitch.holdId = :hold", hold
        elif reg.linkVersion:
            condition, vals[":version"] = condition + " AND linkVersion = :version", reg.linkVersion
        else:
            condition += " AND attribute_not_exists(linkVersion)"
        if pending is not None and hold is None:
            condition += " AND attribute_not_exists(transferOffer)"  # an offer out goes first
        expression = "REMOVE pendingSwitch" if pending is None else "SET pendingSwitch = :p"
        if pending is not None:
            vals[":p"] = pending
        transact(
            self._db,
            [update_item(self._regs, reg_key(reg.registrationId), expression, condition=condition,
                         names={"#s": "status"}, vals=vals)],
        )  # fmt: skip

    def switch_items(self, reg: Registration, move: SwitchMove) -> list[TransactItem]:
        """The runner's registration moved to another event (``ledger.switch``), all or nothing:
        [0] the target's bib counter (its condition: no other writer took the bib), [1] the
        registration now in the target event with its new bib, shard, answers (and a reserved
        refund of a cheaper event's difference), only while it is confirmed in its old event with
        this switch pending, [2] the record of the entry it left (SWITCHED, its bib kept in its
        event: bibs are never given twice), [3] the switch's hold done, [4] the email's claim
        naming the new event, [5] [6] both events' counters."""
        return [
            bib_counter_item(self._inv, reg.raceId, move.eventId, move.bib, 1),
            self._switched_registration(reg, move, pending=True),
            self._entry_left(reg, move),
            self._switch_hold_done(move.holdId, reg.registrationId, move.bib),
            self._claim_moved(reg, move.eventId),
            *self._switch_counters(reg.raceId, reg.eventId, move.eventId, [reg], move.refundCents),
        ]

    def team_switch_items(self, members: list[Registration], moves: list[SwitchMove]) -> list[TransactItem]:
        """A whole team moved (``ledger.team_switch``), all or nothing: [0] the target's bib
        counter past the team's bibs, then per member (the captain first, whose switch is the
        pending one) its registration moved, the record of the entry it left and its email's
        claim, then the switch's hold done and both events' counters (by the team's size)."""
        captain, first = members[0], moves[0]
        items = [bib_counter_item(self._inv, captain.raceId, first.eventId, first.bib, len(members))]
        for i, (reg, move) in enumerate(zip(members, moves, strict=True)):
            items += [
                self._switched_registration(reg, move, pending=i == 0),
                self._entry_left(reg, move),
                self._claim_moved(reg, move.eventId),
            ]
        refunds = sum(m.refundCents for m in moves)
        return [
            *items,
            self._switch_hold_done(first.holdId, captain.registrationId, first.bib),
            *self._switch_counters(captain.raceId, captain.eventId, first.eventId, members, refunds),
        ]

    def _switched_registration(self, reg: Registration, move: SwitchMove, *, pending: bool) -> TransactItem:
        """The registration now in the target event, only while it is confirmed in its old one,
        not being handed over, and (``pending``) with this switch pending — or, a team member's
        moved by its captain's switch, with no switch of its own under way."""
        sets: dict[str, Any] = {
            "eventId": move.eventId,
            "eventName": move.eventName,
            "bib": move.bib,
            "shard": move.shard,
            "gsi1pk": event_bib_pk(reg.raceId, move.eventId),
            "gsi1sk": bib_sk(move.bib),
            "switchedAt": move.now,
            **{k: v for k, v in move.person.items() if v is not None},
        }
        removed = [*(["pendingSwitch"] if pending else []), *(k for k, v in move.person.items() if v is None)]
        names = {f"#f{i}": k for i, k in enumerate(sets)} | {f"#r{i}": k for i, k in enumerate(removed)}
        vals: dict[str, Any] = {f":v{i}": v for i, v in enumerate(sets.values())}
        adds = "switches :one"
        if move.refundCents:
            adds += ", ledgerRefundedCents :refund, ledgerPending :one"
            vals[":refund"] = move.refundCents
        condition = "#s = :confirmed AND eventId = :old AND attribute_not_exists(transferOffer) AND "
        if pending:
            condition += "pendingSwitch.holdId = :hold"
            vals[":hold"] = move.holdId
        else:
            condition += "attribute_not_exists(pendingSwitch)"
        expression = "SET " + ", ".join(f"#f{i} = :v{i}" for i in range(len(sets))) + f" ADD {adds}"
        if removed:
            expression += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(removed)))
        return update_item(
            self._regs,
            reg_key(reg.registrationId),
            expression,
            condition=condition,
            names={**names, "#s": "status"},
            vals={**vals, ":confirmed": RegistrationPhase.CONFIRMED, ":old": reg.eventId, ":one": 1},
        )

    def _entry_left(self, reg: Registration, move: SwitchMove) -> TransactItem:
        """The record of the entry a switch left: SWITCHED, its bib kept counted in its event."""
        record = {
            **reg.model_dump(mode="json", exclude_none=True, exclude={"pendingSwitch", "linkVersion"}),
            "registrationId": move.recordId,
            "status": RegistrationPhase.SWITCHED,
            "switchedTo": reg.registrationId,
            "switchedAt": move.now,
            "pk": reg_pk(move.recordId),
            "sk": "REG",
            "gsi1pk": event_bib_pk(reg.raceId, reg.eventId),
            "gsi1sk": bib_sk(reg.bib),
        }
        return {
            "Put": {"TableName": self._regs, "Item": to_item(record), "ConditionExpression": "attribute_not_exists(pk)"}
        }

    def _switch_hold_done(self, hold_id: str, registration_id: str, bib: int) -> TransactItem:
        return update_item(
            self._inv,
            hold_key(hold_id),
            "SET #s = :confirmed, bib = :bib REMOVE gsi1pk, gsi1sk",
            condition="#s = :held AND switchOf = :rid",
            names={"#s": "status"},
            vals={":confirmed": HoldPhase.CONFIRMED, ":held": HoldPhase.HELD, ":bib": bib, ":rid": registration_id},
        )

    def _claim_moved(self, reg: Registration, event_id: str) -> TransactItem:
        return update_item(
            self._inv,
            email_key(reg.raceId, reg.email),
            "SET eventId = :event",
            condition="registrationId = :rid",
            vals={":event": event_id, ":rid": reg.registrationId},
        )

    def _switch_counters(
        self, race_id: str, old_event: str, new_event: str, moved: list[Registration], refund_cents: int
    ) -> list[TransactItem]:
        n, paid = len(moved), sum(r.amountCents for r in moved)
        return [
            update_item(
                self._inv,
                stats_key(race_id, old_event),
                "ADD confirmed :minus, revenueCents :lost, switchedOut :n",
                vals={":minus": -n, ":lost": -paid, ":n": n},
            ),
            update_item(
                self._inv,
                stats_key(race_id, new_event),
                "ADD confirmed :n, revenueCents :paid, switchedIn :n, refundedCents :refund",
                vals={":n": n, ":paid": paid, ":refund": refund_cents},
            ),
        ]

    def stock_cap(self, race_id: str, event_id: str, entry: str) -> int:
        """An option's stock shard's cap, read consistently (a team's units of one option on one
        shard are one write of ``n``, held to ``taken <= cap - n``: a condition cannot add)."""
        got = self._db.get_item(
            TableName=self._inv,
            Key=stock_key(race_id, event_id, entry),
            ConsistentRead=True,
            ProjectionExpression="cap",
        ).get("Item")
        return int(from_item(got)["cap"]) if got else 0

    def stats(self, race_id: str, event_id: str) -> dict[str, int]:
        resp = self._db.get_item(TableName=self._inv, Key=stats_key(race_id, event_id), ConsistentRead=True)
        item = from_item(resp["Item"]) if "Item" in resp else {}
        return {k: int(item.get(k, 0)) for k in STATS_FIELDS}

    def per_minute(self, race_id: str, event_id: str, since: str) -> dict[str, int]:
        """Confirmations per minute from ``since`` (``YYYY-MM-DDTHH:MM``) on."""
        items = query_all(
            self._db,
            TableName=self._inv,
            KeyConditionExpression="pk = :pk AND sk >= :since",
            ExpressionAttributeValues=values({":pk": stats_pk(race_id, event_id), ":since": f"MIN#{since}"}),
        )
        return {i["sk"].removeprefix("MIN#"): int(i["confirmed"]) for i in items if i["sk"].startswith("MIN#")}


# A projection keeps 50,000 rows to a few MB of reads and skips the slow generic deserializer.
_PROJECTION_NAMES = {f"#f{i}": name for i, name in enumerate(ROW_FIELDS)}


_PROJECTION = ", ".join(_PROJECTION_NAMES)


def flat(item: dict[str, Any]) -> RegistrationRowData:
    """A DynamoDB item as plain values: strings and numbers directly, the rest generically."""
    out: dict[str, Any] = {}
    for name, typed in item.items():
        if "S" in typed:
            out[name] = typed["S"]
        elif "N" in typed:
            number = typed["N"]
            out[name] = int(number) if number.lstrip("-").isdigit() else float(number)
        else:
            out[name] = from_item({name: typed})[name]
    return cast(RegistrationRowData, out)
