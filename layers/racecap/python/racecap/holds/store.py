"""Holds, payment attempts and email claims in the Inventory table (keys: ``aws/keys.py``).

Every state change that moves a place or an email is one DynamoDB transaction (through
``aws/transactions.transact``), so a crash between two writes can never leak a place or
strand an email claim. The phases are ``holds.models.HoldPhase``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn, Protocol

from racecap.aws.items import (
    from_item,
    get_all,
    is_conditional_failure,
    query_all,
    to_item,
    values,
)
from racecap.aws.keys import (
    code_shard_key,
    email_key,
    email_pk,
    hold_key,
    hold_pk,
    live_partition,
    live_partitions,
    requeue_partition,
    requeue_partitions,
    shard_key,
    stock_key,
)
from racecap.aws.transactions import ConditionFailed, TransactItem, transact, update_item
from racecap.errors import Busy, TooManyHolds
from racecap.holds.models import (
    Attempt,
    BeginOutcome,
    EmailClaimPhase,
    Hold,
    HoldPhase,
    Reprice,
)
from racecap.places.store import read_shards


class HoldStore(Protocol):
    def claim(self, hold: Hold, shards: list[str], avoid: set[str] | None = None) -> Hold | None:
        """Take one place on a shard with room (``hold`` comes back with its shard); None: all full."""
        ...

    def claim_team(self, hold: Hold, plan: Callable[[dict[str, int], int], dict[str, int]]) -> Hold | int:
        """Take ``hold.places`` places together across the shards, all or none, spread by
        ``plan`` (shard room -> places per shard); the hold with its ``shardTakes``, or the
        number of places left when fewer than the team's (nothing taken)."""
        ...

    def get(self, hold_id: str) -> Hold | None: ...

    def get_many(self, hold_ids: Sequence[str]) -> list[Hold]:
        """The holds that exist among ``hold_ids`` (consistent reads, in any order)."""
        ...

    def release(self, hold: Hold, new_phase: HoldPhase, *, now: datetime | None = None) -> bool:
        """HELD → RELEASED, or → EXPIRED once past ``expiresAt``; the place goes back. False: moved already."""
        ...

    def begin_payment(
        self, hold: Hold, attempt: Attempt, now: datetime, *, turn: bool = False, take_stock: bool = True
    ) -> BeginOutcome:
        """HELD → PAYING with ``attempt`` and its email claimed; the same attempt again. With
        ``turn``, not while another call of it is still creating the intent (then HOLD_GONE).
        With ``take_stock``, the attempt's stocked options are taken too, from HELD only
        (``holds.store.OptionShardFull`` when one's shard is full)."""
        ...

    def finish_reprice(self, hold: Hold, reprice: Reprice) -> bool:
        """A code change under way (racecap.codes) made final: the hold's price is its amount."""
        ...

    def undo_reprice(self, hold: Hold, reprice: Reprice) -> bool:
        """A code change under way dropped, its code's use given back."""
        ...

    def end_call(self, hold: Hold, attempt: Attempt) -> None:
        """The call that began ``attempt`` failed before recording the intent: the next may begin."""
        ...

    def payment_declined(self, hold: Hold, attempt: Attempt) -> None: ...

    def abandon_payment(self, hold: Hold, attempt: Attempt) -> bool: ...

    def mark_queued(self, hold: Hold, attempt: Attempt, payment_id: str, now: datetime, requeue_at: datetime) -> None:
        """PAYING → QUEUED (paid, on the queue); the sweeper sees it again at ``requeue_at``
        unless the writer has confirmed it by then."""
        ...

    def set_intent(self, hold: Hold, attempt: Attempt, intent_id: str) -> bool:
        """Record the hold's one PaymentIntent while ``attempt`` pays (ending its call's turn);
        False: the hold moved on."""
        ...

    def extend(self, hold: Hold, until: datetime) -> bool:
        """Push a PAYING hold's expiry to ``until``, once; False: moved on or extended already."""
        ...

    def expired(self, now: datetime, limit_per_partition: int = 500) -> list[Hold]:
        """HELD or PAYING holds whose ``expiresAt`` has passed, and QUEUED ones whose
        ``requeueAt`` has (the sweeper's index)."""
        ...

    def postpone_requeue(self, hold: Hold, until: datetime) -> bool:
        """Claim a QUEUED hold's due re-send (the next one at ``until``); False: another
        sweeper did, or the writer confirmed it."""
        ...

    def live_counts(self, race_id: str) -> dict[str, int]: ...


TTL_AFTER_EXPIRY = timedelta(days=30)  # backstop clean-up of old hold records only


# How long one registration call has the hold to itself until its intent is recorded: longer
# than the provider's bounded create call (2 + 5 s per try, 2 retries), so a duplicate cannot
# race it; ended at once when the call fails, so only a crashed call makes a retry wait.
BUSY_FOR = timedelta(seconds=25)


class OptionShardFull(Exception):
    """One stocked option's shard (``entry``: ``aws.keys.stock_entry``) had no unit left:
    nothing was written; the caller tries its other shards, or says the option is sold out."""

    def __init__(self, entry: str) -> None:
        super().__init__(f"stock shard full: {entry}")
        self.entry = entry


# How a team's places spread over the shards with room (``places.rules.plan_team``).
TeamPlan = Callable[[dict[str, int], int], dict[str, int]]


class MemberEmailTaken(Exception):
    """A team member's email (``index`` in the team, the captain 0) is registered for the race
    already, or claimed by a payment under way: nothing was written."""

    def __init__(self, index: int) -> None:
        super().__init__(f"member {index}'s email is taken")
        self.index = index


def email_claims(hold: Hold, attempt: Attempt) -> list[tuple[str, str]]:
    """The (email, registration id) pairs an attempt claims: its runner's, or every member's."""
    if hold.is_team:
        return [(m.email, m.registrationId) for m in attempt.team()]
    return [(attempt.email, hold.registrationId)]


def live_sort_key(hold: Hold, expires: datetime) -> str:
    """A live hold's sort key in the sweeper's index: its expiry (the sweeper's range), and for
    a team's hold its places after it (``#T<n>``). The index carries only keys, race and event
    (no payment step writes it), so this is how the directors' count of places held reads a
    team's places without reading the hold; a suffix sorts right after its own instant, so
    ``gsi1sk <= now`` still finds the hold once it has expired."""
    return expires.isoformat() + (f"#T{hold.places}" if hold.is_team else "")


def places_of(sort_key: str) -> int:
    """The places a live index entry holds (``live_sort_key``): one, or a team's."""
    _, _, team = sort_key.partition("#T")
    return int(team) if team.isdigit() else 1


def hold_from_item(item: dict[str, Any]) -> Hold:
    return Hold.model_validate(item)


class DynamoHolds:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    # -- places -------------------------------------------------------------------------
    def claim(self, hold: Hold, shards: list[str], avoid: set[str] | None = None) -> Hold | None:
        """Take one place for ``hold`` on some shard with room; None when every shard is full."""
        order = random.sample(shards, len(shards))
        if avoid:  # shards seen full recently go last, not never: places come back
            order.sort(key=lambda s: s in avoid)
        item = self._hold_item(hold)
        for shard in order:
            item["shard"] = shard
            if self._claim_on(hold, shard, item):
                return hold.model_copy(update={"shard": shard})
            if avoid is not None:
                avoid.add(shard)
        return None

    def _hold_item(self, hold: Hold) -> dict[str, Any]:
        return {
            "holdId": hold.holdId,
            "registrationId": hold.registrationId,
            "raceId": hold.raceId,
            "eventId": hold.eventId,
            "status": str(hold.status),
            "createdAt": hold.createdAt.isoformat(),
            "expiresAt": hold.expiresAt.isoformat(),
            "pk": hold_pk(hold.holdId),
            "sk": "HOLD",
            "gsi1pk": live_partition(hold.holdId),
            "gsi1sk": live_sort_key(hold, hold.expiresAt),
            "ttl": int(hold.expiresAt.timestamp() + TTL_AFTER_EXPIRY.total_seconds()),
            "clientLimits": dict(hold.clientLimits) or None,
            # The price rides on the write that takes the place: no write of its own.
            "amountCents": hold.amountCents,
            "currency": hold.currency,
        }

    def _claim_on(self, hold: Hold, shard: str, item: dict[str, Any]) -> bool:
        try:
            transact(
                self._db,
                [
                    update_item(
                        self._table,
                        shard_key(hold.raceId, hold.eventId, shard),
                        "SET taken = taken + :one",
                        condition="taken < cap",
                        vals={":one": 1},
                    ),
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": to_item(item),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    *self._client_take_items(hold),
                ],
            )
        except ConditionFailed as exc:
            if exc.first == 0:
                return False  # this shard is full
            if exc.first >= 2:
                self._too_many(hold, exc.first - 2, exc)
            raise
        return True

    def _client_take_items(self, hold: Hold) -> list[TransactItem]:
        """One slot per client limit, in the hold's own transaction: N concurrent holds from one
        client can never take more than its limit (a team's places all count at its address)."""
        items = []
        for i, (key, limit) in enumerate(hold.clientLimits.items()):
            room = limit - hold.client_takes(key)
            if room < 0:
                self._too_many(hold, i, None)
            items.append(
                update_item(
                    self._table,
                    to_item({"pk": key, "sk": "HOLDS"}),
                    "ADD n :take",
                    condition="attribute_not_exists(n) OR n <= :room",
                    vals={":take": hold.client_takes(key), ":room": room},
                )
            )
        return items

    @staticmethod
    def _too_many(hold: Hold, index: int, cause: Exception | None) -> NoReturn:
        key, limit = list(hold.clientLimits.items())[index]
        who = "this address" if "#A#" in key else "this device"
        window = int((hold.expiresAt - hold.createdAt).total_seconds())
        raise TooManyHolds(
            f"{who.capitalize()} already holds {limit} places of this race: register or release one first."
            if hold.places == 1 or "#A#" not in key
            else f"{who.capitalize()} may hold at most {limit} places of this race at once; "
            f"a team of {hold.places} would pass that.",
            retry_after=max(1, window),
        ) from cause

    def claim_team(self, hold: Hold, plan: TeamPlan, tries: int = 6) -> Hold | int:
        """Take ``hold.places`` places together, across the cap's shards, all or none: the
        shards as read now, each taking ``k`` only while it still has the room it was read
        with (``taken <= cap - k``; singles landing meanwhile on other places are fine), then
        read again when one moved. The hold with its ``shardTakes``, or the number of places
        left when fewer than the team's are (nothing written: the event is not sold out)."""
        for _ in range(tries):
            read = read_shards(self._db, self._table, hold.raceId, hold.eventId, consistent=True)
            caps = {s.sk: s.cap for s in read}
            rooms = {s.sk: s.cap - s.taken for s in read if s.cap > s.taken}
            left = sum(rooms.values())
            if left < hold.places:
                return left
            takes = plan(rooms, hold.places)
            team = hold.model_copy(update={"shardTakes": takes, "shard": min(takes)})
            item = self._hold_item(team) | {
                "shard": team.shard,
                "places": team.places,
                "shardTakes": takes,
                "memberIds": list(team.memberIds),
            }
            # No arithmetic in a condition: "still has room for k" is "taken <= cap - k" with
            # the cap as read, and the cap unchanged (a director's edit re-reads).
            shard_items = [
                update_item(
                    self._table,
                    shard_key(hold.raceId, hold.eventId, sk),
                    "SET taken = taken + :k",
                    condition="taken <= :most AND cap = :cap",
                    vals={":k": k, ":most": caps[sk] - k, ":cap": caps[sk]},
                )
                for sk, k in sorted(takes.items())
            ]
            try:
                transact(
                    self._db,
                    [
                        *shard_items,
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": to_item(item),
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                        *self._client_take_items(team),
                    ],
                )
            except ConditionFailed as exc:
                if exc.first < len(shard_items):
                    continue  # a shard filled (or its cap moved) since it was read: read again
                if exc.first > len(shard_items):
                    self._too_many(team, exc.first - len(shard_items) - 1, exc)
                raise
            return team
        raise Busy("Places are being taken fast right now; please try again in a moment.", retry_after=1)

    def _free_client_slots(self, hold: Hold) -> list[TransactItem]:
        return [
            update_item(
                self._table,
                to_item({"pk": key, "sk": "HOLDS"}),
                "ADD n :minus",
                vals={":minus": -hold.client_takes(key)},
            )
            for key in hold.clientLimits
        ]

    def _update_hold(self, hold: Hold, expression: str, condition: str, vals: dict[str, Any]) -> TransactItem:
        """An Update of the hold's own item; ``#s`` names its status, ``#k`` its attempt's key."""
        names = {"#s": "status", **({"#k": "key"} if "#k" in condition else {})}
        return update_item(self._table, hold_key(hold.holdId), expression, condition=condition, names=names, vals=vals)

    def get(self, hold_id: str) -> Hold | None:
        resp = self._db.get_item(TableName=self._table, Key=hold_key(hold_id), ConsistentRead=True)
        return hold_from_item(from_item(resp["Item"])) if "Item" in resp else None

    def get_many(self, hold_ids: Sequence[str]) -> list[Hold]:
        return self._get_many([hold_key(h) for h in set(hold_ids)])

    def release(self, hold: Hold, new_phase: HoldPhase, *, now: datetime | None = None) -> bool:
        """Give a HELD hold's place back (runner cancelled: RELEASED, or it ran out: EXPIRED)."""
        condition = "#s = :held"
        vals: dict[str, Any] = {":held": HoldPhase.HELD, ":new": new_phase}
        if new_phase == HoldPhase.EXPIRED:
            condition += " AND expiresAt <= :now"
            vals[":now"] = (now or datetime.now(UTC)).isoformat()
        return self._transition_and_return_place(hold, condition, vals)

    def _transition_and_return_place(
        self, hold: Hold, condition: str, vals: dict[str, Any], extra: list[TransactItem] | None = None
    ) -> bool:
        # The code's use goes back with the place. The hold must still carry the code it was
        # read with: one applied or removed meanwhile fails this, and the caller reads again.
        if hold.code:
            condition += " AND code = :code"
            vals = {**vals, ":code": hold.code}
        else:
            condition += " AND attribute_not_exists(code)"
        # A code change under way on a paying hold (``reprice``) took a use too: it goes back
        # with the place, and the change can no longer finish (its condition names it).
        condition += " AND " + self._reprice_is(hold.reprice)
        if hold.reprice:
            vals = {**vals, ":change": hold.reprice.changeId}
        try:
            transact(
                self._db,
                [
                    self._update_hold(hold, "SET #s = :new REMOVE gsi1pk, gsi1sk, reprice", condition, vals),
                    *(
                        [self.code_give_back(hold.raceId, hold.code, hold.codeShard)]
                        if hold.code and hold.codeShard
                        else []
                    ),
                    *(
                        [self.code_give_back(hold.raceId, hold.reprice.code, hold.reprice.shard)]
                        if hold.reprice and hold.reprice.code and hold.reprice.shard
                        else []
                    ),
                    *(
                        update_item(
                            self._table,
                            shard_key(hold.raceId, hold.eventId, shard),
                            "SET taken = taken + :minus",
                            vals={":minus": -k},
                        )
                        for shard, k in sorted(hold.taken_by_shard().items())
                    ),
                    *(extra or []),
                    *self._free_client_slots(hold),
                ],
            )
        except ConditionFailed as exc:
            if exc.first == 0:
                return False  # someone else moved the hold first
            raise
        return True

    # -- discount codes ---------------------------------------------------------------------
    def code_take(self, race_id: str, code: str, shard: str) -> TransactItem:
        """One use of ``code`` on ``shard``, only while that shard has one left."""
        return update_item(
            self._table,
            code_shard_key(race_id, code, shard),
            "SET taken = taken + :one",
            condition="taken < cap",
            vals={":one": 1},
        )

    def code_give_back(self, race_id: str, code: str, shard: str) -> TransactItem:
        return update_item(
            self._table,
            code_shard_key(race_id, code, shard),
            "SET taken = taken - :one",
            condition="taken >= :one",
            vals={":one": 1},
        )

    def change_code(
        self, hold: Hold, code: str | None, shard: str | None, amount: int, list_cents: int, now: datetime
    ) -> None:
        """Put ``code`` (None: no code) on a HELD hold at ``amount``, taking its use on
        ``shard`` and giving back the use of the code the hold was read with, in one
        transaction. ``ConditionFailed``: index 0, the hold moved on (paying, expired, or its
        code changed meanwhile); index 1 with a new code, that shard has no use left."""
        condition = "#s = :held AND expiresAt > :now AND " + (
            "code = :old" if hold.code else "attribute_not_exists(code)"
        )
        vals: dict[str, Any] = {":held": HoldPhase.HELD, ":now": now.isoformat(), ":amount": amount}
        if hold.code:
            vals[":old"] = hold.code
        if code is None:
            expression = "SET amountCents = :amount REMOVE code, codeShard, listCents"
        else:
            expression = "SET amountCents = :amount, code = :code, codeShard = :shard, listCents = :list"
            vals.update({":code": code, ":shard": shard, ":list": list_cents})
        items = [self._update_hold(hold, expression, condition, vals)]
        if code is not None and shard is not None:
            items.append(self.code_take(hold.raceId, code, shard))
        if hold.code and hold.codeShard:
            items.append(self.code_give_back(hold.raceId, hold.code, hold.codeShard))
        transact(self._db, items)

    # -- a code changed after the card step started ----------------------------------------------
    @staticmethod
    def _reprice_is(reprice: Reprice | None) -> str:
        return "reprice.changeId = :change" if reprice else "attribute_not_exists(reprice)"

    def begin_reprice(self, hold: Hold, reprice: Reprice) -> None:
        """Record a code change on a PAYING hold whose intent is ``hold.intentId``, taking the
        new code's use on ``reprice.shard``: only while no other change is under way and the
        hold still carries the code it was read with. ``ConditionFailed``: index 0, the hold
        moved on (paid, expired, another change); index 1, that shard has no use left."""
        condition = (
            "#s = :paying AND intentId = :intent AND attempt.#k = :key AND attribute_not_exists(reprice) AND "
            + ("code = :old" if hold.code else "attribute_not_exists(code)")
        )
        assert hold.attempt is not None
        vals: dict[str, Any] = {
            ":paying": HoldPhase.PAYING,
            ":intent": str(hold.intentId),
            ":key": hold.attempt.key,
            ":r": reprice.model_dump(exclude_none=True),
        }
        if hold.code:
            vals[":old"] = hold.code
        items = [self._update_hold(hold, "SET reprice = :r", condition, vals)]
        if reprice.code and reprice.shard:
            items.append(self.code_take(hold.raceId, reprice.code, reprice.shard))
        transact(self._db, items)

    def finish_reprice(self, hold: Hold, reprice: Reprice) -> bool:
        """The intent's amount is the change's now: the hold's price and its attempt's (what the
        payment must equal) become it, and the use of the code it replaces goes back. False:
        the change was finished or undone by someone else first (nothing written)."""
        vals: dict[str, Any] = {":change": reprice.changeId, ":amount": reprice.amountCents}
        if reprice.code is None:
            expression = (
                "SET amountCents = :amount, attempt.amountCents = :amount REMOVE reprice, code, codeShard, listCents"
            )
        else:
            expression = (
                "SET amountCents = :amount, attempt.amountCents = :amount, code = :code, codeShard = :shard, "
                "listCents = :list REMOVE reprice"
            )
            vals.update({":code": reprice.code, ":shard": reprice.shard, ":list": reprice.listCents})
        items = [self._update_change(hold, expression, vals)]
        if hold.code and hold.codeShard:
            items.append(self.code_give_back(hold.raceId, hold.code, hold.codeShard))
        return self._reprice_write(items)

    def undo_reprice(self, hold: Hold, reprice: Reprice) -> bool:
        """The provider refused the change (the intent was paid or cancelled meanwhile): forget
        it and give its use back. False: finished or undone by someone else first."""
        items = [self._update_change(hold, "REMOVE reprice", {":change": reprice.changeId})]
        if reprice.code and reprice.shard:
            items.append(self.code_give_back(hold.raceId, reprice.code, reprice.shard))
        return self._reprice_write(items)

    def _update_change(self, hold: Hold, expression: str, vals: dict[str, Any]) -> TransactItem:
        """An Update of the hold only while it names this change (in whatever phase: a hold
        whose payment succeeded meanwhile still has the change to settle)."""
        condition = "reprice.changeId = :change"
        return update_item(self._table, hold_key(hold.holdId), expression, condition=condition, vals=vals)

    def _reprice_write(self, items: list[TransactItem]) -> bool:
        try:
            transact(self._db, items)
        except ConditionFailed as exc:
            if exc.first == 0:
                return False
            raise
        return True

    # -- paying -------------------------------------------------------------------------------
    def _stock_items(self, hold: Hold, attempt: Attempt, delta: int) -> list[TransactItem]:
        """Take (+1, only below the shard's cap) or give back (-1) the attempt's stocked options."""
        return [
            update_item(
                self._table,
                stock_key(hold.raceId, hold.eventId, entry),
                "SET taken = taken + :d",
                condition="taken < cap" if delta > 0 else None,
                vals={":d": delta},
            )
            for entry in attempt.stock or ()
        ]

    def begin_payment(
        self, hold: Hold, attempt: Attempt, now: datetime, *, turn: bool = False, take_stock: bool = True
    ) -> BeginOutcome:
        """Claim the email for the race and move the hold to PAYING, atomically.

        The same attempt may begin again (a retry after a crash or a lost response);
        a different attempt cannot while one is paying. With ``turn`` (the registration call),
        one call at a time until the hold's intent is recorded (``set_intent``): ``busyUntil``
        marks the call creating it, so a duplicate arriving meanwhile is told HOLD_GONE (the
        caller answers "already being processed") instead of racing it to the provider. That
        is the call's idempotency, kept on the hold itself: no separate record to write.

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
        if turn:
            expression += ", busyUntil = :busy"
            again += " AND (attribute_exists(intentId) OR attribute_not_exists(busyUntil) OR busyUntil <= :now)"
            vals[":busy"] = (now + BUSY_FOR).isoformat()
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
                raise OptionShardFull((attempt.stock or [])[exc.first - 1 - len(claims)]) from exc
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
                    "SET #s = :held, lastDecline = :now REMOVE attempt, busyUntil",
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

    def abandon_payment(self, hold: Hold, attempt: Attempt) -> bool:
        """An attempt that never charged, found after the hold expired: release all of it."""
        vals = {":paying": HoldPhase.PAYING, ":key": attempt.key, ":new": HoldPhase.EXPIRED}
        return self._transition_and_return_place(
            hold,
            "#s = :paying AND attempt.#k = :key",
            vals,
            extra=[*self._release_emails(hold, attempt), *self._stock_items(hold, attempt, -1)],
        )

    def set_intent(self, hold: Hold, attempt: Attempt, intent_id: str) -> bool:
        """Record the hold's one PaymentIntent while this attempt pays. False when the hold
        moved on (expired, or another attempt) or already names another intent."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key=hold_key(hold.holdId),
                UpdateExpression="SET intentId = :intent REMOVE busyUntil",
                ConditionExpression=(
                    "#s = :paying AND attempt.#k = :key AND (attribute_not_exists(intentId) OR intentId = :intent)"
                ),
                ExpressionAttributeNames={"#s": "status", "#k": "key"},
                ExpressionAttributeValues=values(
                    {":paying": HoldPhase.PAYING, ":key": attempt.key, ":intent": intent_id}
                ),
            )
        except Exception as exc:
            if not is_conditional_failure(exc):
                raise
            return False
        return True

    def end_call(self, hold: Hold, attempt: Attempt) -> None:
        """The call that began this attempt failed before recording the intent (the provider
        busy or not answering): let the runner's retry in at once rather than after ``BUSY_FOR``."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key=hold_key(hold.holdId),
                UpdateExpression="REMOVE busyUntil",
                ConditionExpression="attempt.#k = :key",
                ExpressionAttributeNames={"#k": "key"},
                ExpressionAttributeValues=values({":key": attempt.key}),
            )
        except Exception as exc:
            if not is_conditional_failure(exc):
                raise

    def extend(self, hold: Hold, until: datetime) -> bool:
        """Push a PAYING hold's expiry back once (3-D Secure under way): bounded by the caller,
        and only once (``extended``), so a hold can never be kept forever."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key=hold_key(hold.holdId),
                UpdateExpression="SET expiresAt = :until, gsi1sk = :due, extended = :yes",
                ConditionExpression="#s = :paying AND expiresAt = :was AND attribute_not_exists(extended)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=values(
                    {
                        ":paying": HoldPhase.PAYING,
                        ":until": until.isoformat(),
                        ":due": live_sort_key(hold, until),
                        ":was": hold.expiresAt.isoformat(),
                        ":yes": True,
                    }
                ),
            )
        except Exception as exc:
            if not is_conditional_failure(exc):
                raise
            return False
        return True

    def postpone_requeue(self, hold: Hold, until: datetime) -> bool:
        """Claim a QUEUED hold's due re-send and set the next one: True for exactly one of any
        number of concurrent sweepers (the condition is the due time they all read)."""
        if hold.requeueAt is None:
            return False
        try:
            self._db.update_item(
                TableName=self._table,
                Key=hold_key(hold.holdId),
                UpdateExpression="SET requeueAt = :until, gsi1sk = :until ADD requeues :one",
                ConditionExpression="#s = :queued AND requeueAt = :was",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=values(
                    {
                        ":queued": HoldPhase.QUEUED,
                        ":until": until.isoformat(),
                        ":was": hold.requeueAt.isoformat(),
                        ":one": 1,
                    }
                ),
            )
        except Exception as exc:
            if not is_conditional_failure(exc):
                raise
            return False
        return True

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

    def mark_queued(self, hold: Hold, attempt: Attempt, payment_id: str, now: datetime, requeue_at: datetime) -> None:
        """Paid and on the queue: the hold can no longer expire. It stays in the sweeper's
        sparse index, keyed by ``requeue_at`` instead of its expiry, until the writer confirms
        it (the writer's transaction removes it): if the message is lost, the sweeper finds
        the hold there and sends it again. In a normal opening the writer gets there first, so
        the index costs one key change per registration and no read."""
        update = self._update_hold(
            hold,
            "SET #s = :queued, chargeId = :charge, queuedAt = :now, requeueAt = :due, gsi1pk = :part, gsi1sk = :due",
            "#s = :paying AND attempt.#k = :key",
            {
                ":queued": HoldPhase.QUEUED,
                ":paying": HoldPhase.PAYING,
                ":key": attempt.key,
                ":charge": payment_id,
                ":now": now.isoformat(),
                ":due": requeue_at.isoformat(),
                ":part": requeue_partition(hold.holdId),
            },
        )
        # A paid place no longer counts against its client's hold limit: freed in the same
        # transaction as the move, so a retry (condition fails) never frees it twice.
        try:
            transact(self._db, [update, *self._free_client_slots(hold)])
        except ConditionFailed as exc:
            if exc.first != 0:
                raise
            # already QUEUED/CONFIRMED by a concurrent retry or the writer: same outcome

    # -- the sweeper's view ----------------------------------------------------------------------
    def expired(self, now: datetime, limit_per_partition: int = 500) -> list[Hold]:
        """Holds past their expiry (HELD, PAYING) and queued holds past their re-send time:
        their keys from the index, then the holds themselves (the index carries no more)."""
        keys: list[dict[str, Any]] = []
        for partition in (*live_partitions(), *requeue_partitions()):
            keys += query_all(
                self._db,
                TableName=self._table,
                IndexName="gsi1",
                KeyConditionExpression="gsi1pk = :p AND gsi1sk <= :now",
                ExpressionAttributeValues=values({":p": partition, ":now": now.isoformat()}),
                ProjectionExpression="pk, sk",
                Limit=limit_per_partition,
            )
        return self._get_many([to_item({"pk": k["pk"], "sk": k["sk"]}) for k in keys])

    def _get_many(self, wire_keys: list[dict[str, Any]]) -> list[Hold]:
        """The holds at these keys (wire format) that exist: consistent BatchGetItem."""
        return [hold_from_item(item) for item in get_all(self._db, self._table, wire_keys)]

    def live_counts(self, race_id: str) -> dict[str, int]:
        """Places held right now (HELD or PAYING) per event of one race, for directors' stats.

        Reads the sweeper's sparse index (holds that can still expire, and queued ones the
        writer has not confirmed yet), so it costs reads in proportion to the holds live
        across all races at this moment: cheap on a quiet day, a few MB at the peak of a
        burst — the stats are cached briefly.
        """
        counts: dict[str, int] = {}
        for partition in live_partitions():
            for item in query_all(
                self._db,
                TableName=self._table,
                IndexName="gsi1",
                KeyConditionExpression="gsi1pk = :p",
                # Queued holds waiting for the writer are in the index too, under REQUEUE#<n>.
                FilterExpression="raceId = :r",
                ProjectionExpression="eventId, gsi1sk",
                ExpressionAttributeValues=values({":p": partition, ":r": race_id}),
            ):
                counts[item["eventId"]] = counts.get(item["eventId"], 0) + places_of(str(item["gsi1sk"]))
        return counts
