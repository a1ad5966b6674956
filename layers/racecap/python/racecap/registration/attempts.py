"""A hold's payment attempts in the Inventory table: the payment step's writes on a hold (begin, the
provider's intent, the end of a call, a decline, abandoning, the queued paid hold, the sweeper's
extension), each claiming or freeing the runner's email (a team's emails) and its stocked options in
the same transaction as the hold's phase. On the holds' own writes (``holds.store.DynamoHolds``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, Protocol

from racecap.aws.items import (
    from_item,
    to_item,
    values,
)
from racecap.aws.keys import (
    email_key,
    email_pk,
    stock_key,
)
from racecap.aws.transactions import ConditionFailed, TransactItem, transact, update_item
from racecap.holds.models import (
    Attempt,
    BeginOutcome,
    EmailClaimPhase,
    Hold,
    HoldPhase,
)
from racecap.holds.store import DynamoHolds, HoldStore, live_sort_key
from racecap.places.returns import Freed


class Attempts(HoldStore, Protocol):
    """A hold's payment attempts, beside its own writes (``DynamoAttempts``; a fake in tests)."""

    def begin_payment(
        self, hold: Hold, attempt: Attempt, now: datetime, *, intent_id: str | None = None, take_stock: bool = True
    ) -> BeginOutcome:
        """HELD → PAYING with ``attempt``, its email claimed and its intent (``intent_id``, None
        for a free entry) recorded; the same attempt again. A hold that names another intent
        already is HOLD_GONE. With ``take_stock``, the attempt's stocked options are taken too,
        from HELD only (``OptionShardFull`` when one's shard is full)."""
        ...

    def payment_declined(self, hold: Hold, attempt: Attempt) -> None: ...

    def abandon_payment(self, hold: Hold, attempt: Attempt, *, waitlist: bool = False) -> Freed | None:
        """An attempt that never charged, its hold expired: all of it released (the place to the
        waitlist's pool first when ``waitlist``). None: moved already."""
        ...

    def mark_queued(self, hold: Hold, attempt: Attempt, payment_id: str, now: datetime, requeue_at: datetime) -> bool:
        """PAYING → QUEUED (paid, on the queue); unless the writer has confirmed it first, the
        sweeper sees it again at its expiry, and re-sends it from ``requeue_at`` on
        (``await_requeue``). False: the hold had moved on (this call changed nothing)."""
        ...

    def await_requeue(self, hold: Hold) -> None:
        """A QUEUED hold the sweeper found at its expiry before its re-send time: seen again at
        ``requeueAt`` (nothing when it has moved on meanwhile)."""
        ...

    def extend(self, hold: Hold, until: datetime) -> bool:
        """Push a PAYING hold's expiry to ``until``, once; False: moved on or extended already."""
        ...

    def postpone_requeue(self, hold: Hold, until: datetime) -> bool:
        """Claim a QUEUED hold's due re-send (the next one at ``until``); False: another
        sweeper did, or the writer confirmed it."""
        ...


class OptionShardFull(Exception):
    """One stocked option's shard (``entry``: ``aws.keys.stock_entry``) had no unit left:
    nothing was written; the caller tries its other shards, or says the option is sold out."""

    def __init__(self, entry: str) -> None:
        super().__init__(f"stock shard full: {entry}")
        self.entry = entry


class MemberEmailTaken(Exception):
    """A team member's email (``index`` in the team, the captain 0) is registered for the race
    already, or claimed by a payment under way: nothing was written."""

    def __init__(self, index: int) -> None:
        super().__init__(f"member {index}'s email is taken")
        self.index = index


def _stock_entries(attempt: Attempt) -> list[tuple[str, int]]:
    """The attempt's stocked units by shard item: (entry, units), in the order first taken."""
    return list(Counter(attempt.stock or ()).items())


def email_claims(hold: Hold, attempt: Attempt) -> list[tuple[str, str]]:
    """The (email, registration id) pairs an attempt claims: its runner's, or every member's."""
    if hold.is_team:
        return [(m.email, m.registrationId) for m in attempt.team()]
    return [(attempt.email, hold.registrationId)]


class DynamoAttempts(DynamoHolds):
    # -- paying -------------------------------------------------------------------------------
    def _stock_items(self, hold: Hold, attempt: Attempt, delta: int) -> list[TransactItem]:
        """Take (+1 a unit, only below the shard's cap) or give back (-1) the attempt's stocked
        options, one write per shard item (``_stock_entries`` order).

        A transaction may name an item once, and a team's members may choose the same option on
        the same shard: their units are one write of ``n``. ``taken < cap`` guards one unit only
        and a condition cannot add, so for ``n`` > 1 the shard's cap is read (consistently) and
        the write holds to ``taken <= cap - n`` with the cap unchanged (a cap the director moved
        meanwhile fails it, as a full shard does, and the caller tries again)."""
        items = []
        for entry, n in _stock_entries(attempt):
            condition, vals = None, {":d": delta * n}
            if delta > 0 and n == 1:
                condition = "taken < cap"
            elif delta > 0:
                cap = self._stock_cap(hold, entry)
                condition, vals = "cap = :cap AND taken <= :most", {**vals, ":cap": cap, ":most": cap - n}
            items.append(
                update_item(
                    self._table,
                    stock_key(hold.raceId, hold.eventId, entry),
                    "SET taken = taken + :d",
                    condition=condition,
                    vals=vals,
                )
            )
        return items

    def _stock_cap(self, hold: Hold, entry: str) -> int:
        got = self._db.get_item(
            TableName=self._table,
            Key=stock_key(hold.raceId, hold.eventId, entry),
            ConsistentRead=True,
            ProjectionExpression="cap",
        ).get("Item")
        return int(from_item(got)["cap"]) if got else 0

    def begin_payment(
        self, hold: Hold, attempt: Attempt, now: datetime, *, intent_id: str | None = None, take_stock: bool = True
    ) -> BeginOutcome:
        """Claim the email for the race and move the hold to PAYING with its intent, atomically.

        The same attempt may begin again (a retry after a crash or a lost response, a second
        tab); a different attempt cannot while one is paying. The intent was created first
        (``PaymentStep._intent_for``: its idempotency key derives from the hold and the
        request, so a repeat replays it), and is recorded here: a hold that names another one
        is HOLD_GONE, so a hold has one intent, and its client secret is handed out only once
        this has recorded it. One write where there were two (issue 38: the intent was recorded
        by its own update, after a turn marked on the hold kept a duplicate call from racing to
        the provider; a duplicate now replays the same intent and the same answer).

        The attempt's stocked options (``attempt.stock``) are taken in the same transaction,
        each ``taken < cap`` on its shard (OPTION_GONE when one is full). Taking them, the hold
        must still be HELD: a retry of an attempt already paying has its stock (the caller
        passes ``take_stock=False``), so no interleaving takes one unit twice.
        """
        expression = "SET #s = :paying, attempt = :attempt"
        again = "#s = :paying AND attempt.#k = :key"
        vals: dict[str, Any] = {
            ":paying": HoldPhase.PAYING,
            ":held": HoldPhase.HELD,
            ":now": now.isoformat(),
            # Fields an attempt leaves empty (no answers) are left out: not a byte more written.
            ":attempt": {k: v for k, v in asdict(attempt).items() if v is not None},
            ":key": attempt.key,
        }
        # From HELD only with the discount code the caller read (its price is the attempt's):
        # a code applied or removed meanwhile from another tab fails this, never charging the
        # price from before it.
        same_code = "code = :code" if hold.code else "attribute_not_exists(code)"
        held = "#s = :held AND expiresAt > :now AND " + same_code
        if hold.code:
            vals[":code"] = hold.code
        # Again, too, only with that code and no code change under way (``begin_reprice``):
        # the attempt written again carries the price read, which must stay the intent's.
        again += f" AND {same_code} AND attribute_not_exists(reprice)"
        if intent_id is not None:
            expression += ", intentId = :intent"
            one_intent = " AND (attribute_not_exists(intentId) OR intentId = :intent)"
            held, again = held + one_intent, again + one_intent
            vals[":intent"] = intent_id
        stock = self._stock_items(hold, attempt, +1) if take_stock else []
        claims = email_claims(hold, attempt)
        condition = held if stock else f"({held}) OR ({again})"
        if stock:
            del vals[":key"]  # only the again branch names it (DynamoDB refuses unused values)
        try:
            transact(
                self._db,
                [
                    self._update_hold(hold, expression, condition, vals),
                    *(
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": to_item(
                                    {
                                        "pk": email_pk(hold.raceId, email),
                                        "sk": "EMAIL",
                                        "registrationId": rid,
                                        "holdId": hold.holdId,
                                        "eventId": hold.eventId,
                                        "status": EmailClaimPhase.CLAIMED,
                                    }
                                ),
                                "ConditionExpression": "attribute_not_exists(pk) OR registrationId = :rid",
                                "ExpressionAttributeValues": values({":rid": rid}),
                            }
                        }
                        for email, rid in claims
                    ),
                    *stock,
                ],
            )
        except ConditionFailed as exc:
            if exc.first > len(claims):
                raise OptionShardFull(_stock_entries(attempt)[exc.first - 1 - len(claims)][0]) from exc
            if exc.first == 0:
                return BeginOutcome.HOLD_GONE
            if hold.is_team:
                raise MemberEmailTaken(exc.first - 1) from exc
            return BeginOutcome.EMAIL_TAKEN
        return BeginOutcome.STARTED

    def payment_declined(self, hold: Hold, attempt: Attempt) -> None:
        """Back to HELD, email released: the runner keeps the place and may try another card."""
        transact(
            self._db,
            [
                self._update_hold(
                    hold,
                    "SET #s = :held, lastDecline = :now REMOVE attempt",
                    "#s = :paying AND attempt.#k = :key",
                    {
                        ":held": HoldPhase.HELD,
                        ":paying": HoldPhase.PAYING,
                        ":key": attempt.key,
                        ":now": datetime.now(UTC).isoformat(),
                    },
                ),
                *self._release_emails(hold, attempt),
                *self._stock_items(hold, attempt, -1),
            ],
        )

    def abandon_payment(self, hold: Hold, attempt: Attempt, *, waitlist: bool = False) -> Freed | None:
        """An attempt that never charged, found after the hold expired: release all of it."""
        vals = {":paying": HoldPhase.PAYING, ":key": attempt.key, ":new": HoldPhase.EXPIRED}
        return self._transition_and_return_place(
            hold,
            "#s = :paying AND attempt.#k = :key",
            vals,
            extra=[*self._release_emails(hold, attempt), *self._stock_items(hold, attempt, -1)],
            waitlist=waitlist,
        )

    def extend(self, hold: Hold, until: datetime) -> bool:
        """Push a PAYING hold's expiry back once (3-D Secure under way): bounded by the caller,
        and only once (``extended``), so a hold can never be kept forever."""
        vals = {":paying": HoldPhase.PAYING, ":until": until.isoformat(), ":due": live_sort_key(hold, until),
                ":was": hold.expiresAt.isoformat(), ":yes": True}  # fmt: skip
        return self._changed(
            hold,
            "SET expiresAt = :until, gsi1sk = :due, extended = :yes",
            "#s = :paying AND expiresAt = :was AND attribute_not_exists(extended)",
            vals,
        )

    def await_requeue(self, hold: Hold) -> None:
        """Found at its expiry, not due yet: keyed by ``requeueAt`` in the index from now on.
        Only a hold its writer is slow to confirm gets here, so the key's move is rare."""
        if hold.requeueAt is not None:
            due = {":queued": HoldPhase.QUEUED, ":due": hold.requeueAt.isoformat()}
            self._changed(hold, "SET gsi1sk = :due", "#s = :queued AND requeueAt = :due", due)

    def postpone_requeue(self, hold: Hold, until: datetime) -> bool:
        """Claim a QUEUED hold's due re-send and set the next one: True for exactly one of any
        number of concurrent sweepers (the condition is the due time they all read)."""
        if hold.requeueAt is None:
            return False
        vals = {":queued": HoldPhase.QUEUED, ":until": until.isoformat(), ":was": hold.requeueAt.isoformat(), ":one": 1}
        return self._changed(
            hold, "SET requeueAt = :until, gsi1sk = :until ADD requeues :one", "#s = :queued AND requeueAt = :was", vals
        )

    def _release_emails(self, hold: Hold, attempt: Attempt) -> list[TransactItem]:
        return [
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": email_key(hold.raceId, email),
                    "ConditionExpression": "registrationId = :rid AND #s = :claimed",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": values({":rid": rid, ":claimed": EmailClaimPhase.CLAIMED}),
                }
            }
            for email, rid in email_claims(hold, attempt)
        ]

    def mark_queued(self, hold: Hold, attempt: Attempt, payment_id: str, now: datetime, requeue_at: datetime) -> bool:
        """Paid and on the queue: the hold can no longer expire. It keeps its place in the
        sweeper's sparse index (its expiry) until the writer confirms it (the writer's
        transaction removes it): if the message is lost, the sweeper finds the hold there at
        its expiry and sends it again from ``requeue_at`` on. The index's keys are left as they
        are (issue 38): moving them here cost two index units per registration, for a hold the
        writer takes out of the index seconds later in a normal opening."""
        update = self._update_hold(
            hold,
            "SET #s = :queued, chargeId = :charge, queuedAt = :now, requeueAt = :due",
            "#s = :paying AND attempt.#k = :key",
            {
                ":queued": HoldPhase.QUEUED,
                ":paying": HoldPhase.PAYING,
                ":key": attempt.key,
                ":charge": payment_id,
                ":now": now.isoformat(),
                ":due": requeue_at.isoformat(),
            },
        )
        # A paid place no longer counts against its client's hold limit: freed in the same
        # transaction as the move, so a retry (condition fails) never frees it twice. A free
        # entry keeps counting (racecap.fairness.limits): nothing to pay bounds how many one
        # client takes in turn, so its slots stay taken (one write fewer, none more for the paid).
        freed = self._free_client_slots(hold) if attempt.amountCents else []
        try:
            transact(self._db, [update, *freed])
        except ConditionFailed as exc:
            if exc.first != 0:
                raise
            return self._queued_after_confirm(hold, attempt, now, freed)
        return True

    def _queued_after_confirm(self, hold: Hold, attempt: Attempt, now: datetime, freed: list[TransactItem]) -> bool:
        """The writer confirmed the hold before this mark could (the message goes first, and the
        writer's transaction says so): this call's send queued it all the same. Stamped once,
        whichever path (the API, the webhook, the sweeper) gets here first, with the client's slots
        freed as the mark would have; True then, so the caller counts the queueing once (the
        opening's per-second counts: ``racecap.pulse``). False: not confirmed, or stamped already."""
        stamp = self._update_hold(
            hold,
            "SET queuedAt = :now",
            "#s = :confirmed AND attempt.#k = :key AND attribute_not_exists(queuedAt)",
            {":confirmed": HoldPhase.CONFIRMED, ":key": attempt.key, ":now": now.isoformat()},
        )
        try:
            transact(self._db, [stamp, *freed])
        except ConditionFailed:
            return False
        return True
