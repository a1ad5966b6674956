"""Holds, payment attempts and email claims in the Inventory table (keys: ``aws/keys.py``).

Every state change that moves a place or an email is one DynamoDB transaction (through
``aws/transactions.transact``), so a crash between two writes can never leak a place or
strand an email claim. The phases are ``holds.models.HoldPhase``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
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
    hold_key,
    hold_pk,
    live_partition,
    live_partitions,
    requeue_partitions,
    shard_key,
    stats_key,
    waitlist_line_key,
)
from racecap.aws.transactions import ConditionFailed, TransactItem, transact, update_item
from racecap.errors import Busy, KeptPlacesNotOpen, TooManyHolds
from racecap.holds.code_tally import CodeTally, Move
from racecap.holds.models import (
    Hold,
    HoldPhase,
    Reprice,
)
from racecap.places.returns import DynamoPlaceReturns, Freed
from racecap.places.store import read_shards


class HoldStore(Protocol):
    """A held place: claimed, read, released, expired, and the code change it carries settled."""

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

    def release(
        self, hold: Hold, new_phase: HoldPhase, *, now: datetime | None = None, waitlist: bool = False
    ) -> Freed | None:
        """HELD → RELEASED, or → EXPIRED once past ``expiresAt``; the place goes back (to the
        waitlist's pool first when ``waitlist``: ``places.returns``). None: moved already."""
        ...

    def finish_reprice(self, hold: Hold, reprice: Reprice) -> bool:
        """A code change under way (racecap.codes) made final: the hold's price is its amount."""
        ...

    def undo_reprice(self, hold: Hold, reprice: Reprice) -> bool:
        """A code change under way dropped, its code's use given back."""
        ...

    def expired(self, now: datetime, limit_per_partition: int = 500) -> list[Hold]:
        """HELD or PAYING holds whose ``expiresAt`` has passed, and QUEUED ones whose
        ``requeueAt`` has (the sweeper's index)."""
        ...

    def mark_sold_out(self, race_id: str, event_id: str, at: datetime) -> bool:
        """When the event first sold out (its first all-shards refusal), kept once on its stats
        item: True when this call wrote it."""
        ...


TTL_AFTER_EXPIRY = timedelta(days=30)
# Reads of the waitlist's line a freeing transaction makes before it gives up (each retry
# follows a runner confirming or leaving between the read and the write: rare).
LINE_TRIES = 4  # backstop clean-up of old hold records only


# How a team's places spread over the shards with room (``places.rules.plan_team``).
TeamPlan = Callable[[dict[str, int], int], dict[str, int]]


def live_sort_key(hold: Hold, expires: datetime) -> str:
    """A live hold's sort key in the sweeper's index: its expiry (the sweeper's range). Team
    holds written before the directors' stats stopped reading the index carry their places after
    it (``#T<n>``): a suffix sorts right after its own instant, so ``gsi1sk <= now`` finds
    both kinds once they have expired."""
    return expires.isoformat()


def hold_from_item(item: dict[str, Any]) -> Hold:
    return Hold.model_validate(item)


class DynamoHolds:
    def __init__(self, client: Any, table: str, tally: CodeTally | None = None) -> None:
        self._db = client
        self._table = table
        self._returns = DynamoPlaceReturns(client, table)
        self._tally = tally

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
            # A switch's hold names the registration switching (no byte more on other holds).
            **({"switchOf": hold.switchOf} if hold.switchOf else {}),
            **({"guaranteed": True} if hold.guaranteed else {}),
        }

    def offered_hold_item(self, hold: Hold) -> TransactItem:
        """The Put of a hold on a place the waitlist offered (racecap.waitlist): its shard already
        counts the place (a pooled place stays taken), so nothing else moves on the shard, and no
        client limit applies (the runner's place in line is the limit)."""
        item = self._hold_item(hold) | {
            "shard": hold.shard,
            "offerEntry": hold.offerEntry,
            "offerEmail": hold.offerEmail,
            "clientLimits": None,
        }
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item({k: v for k, v in item.items() if v is not None}),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _claim_on(self, hold: Hold, shard: str, item: dict[str, Any]) -> bool:
        drawn = self._drawn_check(hold)
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
                    *drawn,
                    *self._client_take_items(hold),
                ],
            )
        except ConditionFailed as exc:
            if exc.first == 0:
                return False  # this shard is full
            if drawn and exc.first == 2:
                raise KeptPlacesNotOpen(
                    "Guaranteed entries take the places kept out of the ballot once it is drawn: until then any "
                    "other place may still be drawn. Come back after the draw."
                ) from exc
            if exc.first >= 2 + len(drawn):
                self._too_many(hold, exc.first - 2 - len(drawn), exc)
            raise
        return True

    def _drawn_check(self, hold: Hold) -> list[TransactItem]:
        """A guaranteed entry's hold on a ballot event is taken only once the draw opened the line
        (``waitlist.store.DynamoBallotLine.open_line``): that moved the winners' places off the
        shards, so what is left on them is the kept places. Checked in the hold's own transaction,
        so a hold and the draw can never both count the same place."""
        if not hold.guaranteed:
            return []
        check = {
            "TableName": self._table,
            "Key": waitlist_line_key(hold.raceId, hold.eventId),
            "ConditionExpression": "attribute_exists(ballotDrawnAt)",
        }
        return [{"ConditionCheck": check}]

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
            f"{who.capitalize()} already holds {limit} places of this race (free entries it registered count "
            "too): pay for or release a held one first."
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

    # -- a switch's hold (ledger.switch) ------------------------------------------------------
    def set_switch_intent(self, hold: Hold, intent_id: str) -> bool:
        """The upgrade's intent on a switch's hold, while it is held (the sweeper asks for it there)."""
        return self._switch_update(hold, "SET intentId = :i", {":i": intent_id})

    def extend_switch(self, hold: Hold, until: datetime) -> bool:
        """A switch's hold pushed back once while the runner's bank asks for 3-D Secure."""
        vals = {":until": until.isoformat(), ":due": live_sort_key(hold, until), ":yes": True,
                ":was": hold.expiresAt.isoformat()}  # fmt: skip
        return self._switch_update(
            hold, "SET expiresAt = :until, gsi1sk = :due, extended = :yes", vals,
            "expiresAt = :was AND attribute_not_exists(extended)",
        )  # fmt: skip

    def _switch_update(self, hold: Hold, expression: str, vals: dict[str, Any], also: str = "") -> bool:
        condition = "#s = :held AND switchOf = :rid" + (f" AND {also}" if also else "")
        return self._changed(hold, expression, condition, {**vals, ":held": HoldPhase.HELD, ":rid": hold.switchOf})

    def _changed(self, hold: Hold, expression: str, condition: str, vals: dict[str, Any]) -> bool:
        """One conditional update of the hold's item (``_update_hold``); False: its condition
        failed (the hold moved on, or another caller got there first)."""
        try:
            transact(self._db, [self._update_hold(hold, expression, condition, vals)])
        except ConditionFailed:
            return False
        return True

    def get(self, hold_id: str) -> Hold | None:
        resp = self._db.get_item(TableName=self._table, Key=hold_key(hold_id), ConsistentRead=True)
        return hold_from_item(from_item(resp["Item"])) if "Item" in resp else None

    def get_many(self, hold_ids: Sequence[str]) -> list[Hold]:
        return self._get_many([hold_key(h) for h in set(hold_ids)])

    def release(
        self, hold: Hold, new_phase: HoldPhase, *, now: datetime | None = None, waitlist: bool = False
    ) -> Freed | None:
        """Give a HELD hold's place back (runner cancelled: RELEASED, or it ran out: EXPIRED)."""
        condition = "#s = :held"
        vals: dict[str, Any] = {":held": HoldPhase.HELD, ":new": new_phase}
        if new_phase == HoldPhase.EXPIRED:
            condition += " AND expiresAt <= :now"
            vals[":now"] = (now or datetime.now(UTC)).isoformat()
        return self._transition_and_return_place(hold, condition, vals, waitlist=waitlist)

    def _transition_and_return_place(
        self,
        hold: Hold,
        condition: str,
        vals: dict[str, Any],
        extra: list[TransactItem] | None = None,
        *,
        waitlist: bool = False,
    ) -> Freed | None:
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
        for _ in range(LINE_TRIES):
            # An offered place's hold (``offerEntry``) was the line's already: it goes back to the pool.
            place = self._returns.give_back(
                hold.raceId, hold.eventId, hold.taken_by_shard(), waitlist=waitlist, to_line=bool(hold.offerEntry)
            )
            items = [
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
                *place.items,
                *(extra or []),
                *self._free_client_slots(hold),
            ]
            try:
                transact(self._db, items)
            except ConditionFailed as exc:
                if exc.first == 0:
                    return None  # someone else moved the hold first
                if place.line_moved(exc, items):
                    continue  # a runner joined (or left) the line meanwhile: the place may go the other way
                raise
            self.tally_codes(
                [(hold.raceId, hold.code, -1)] if hold.code and hold.codeShard else [],
                [(hold.raceId, hold.reprice.code, -1)]
                if hold.reprice and hold.reprice.code and hold.reprice.shard
                else [],
            )
            return place.freed
        raise Busy("The waitlist kept changing while the place was freed; please retry.", retry_after=1)

    # -- discount codes ---------------------------------------------------------------------
    def tally_codes(self, *moves: list[Move]) -> None:
        """After a transaction with ``code_take``/``code_give_back`` items committed: the
        uses it moved, for the copy the director's stats read (``holds.code_tally``)."""
        if self._tally is not None:
            self._tally.moved(m for group in moves for m in group)

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

    # -- a code changed after the card step started ----------------------------------------------
    @staticmethod
    def _reprice_is(reprice: Reprice | None) -> str:
        return "reprice.changeId = :change" if reprice else "attribute_not_exists(reprice)"

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
        moves: list[Move] = []
        if hold.code and hold.codeShard:
            items.append(self.code_give_back(hold.raceId, hold.code, hold.codeShard))
            moves.append((hold.raceId, hold.code, -1))
        return self._reprice_write(items, moves)

    def undo_reprice(self, hold: Hold, reprice: Reprice) -> bool:
        """The provider refused the change (the intent was paid or cancelled meanwhile): forget
        it and give its use back. False: finished or undone by someone else first."""
        items = [self._update_change(hold, "REMOVE reprice", {":change": reprice.changeId})]
        moves: list[Move] = []
        if reprice.code and reprice.shard:
            items.append(self.code_give_back(hold.raceId, reprice.code, reprice.shard))
            moves.append((hold.raceId, reprice.code, -1))
        return self._reprice_write(items, moves)

    def _update_change(self, hold: Hold, expression: str, vals: dict[str, Any]) -> TransactItem:
        """An Update of the hold only while it names this change (in whatever phase: a hold
        whose payment succeeded meanwhile still has the change to settle)."""
        condition = "reprice.changeId = :change"
        return update_item(self._table, hold_key(hold.holdId), expression, condition=condition, vals=vals)

    def _reprice_write(self, items: list[TransactItem], moves: list[Move]) -> bool:
        try:
            transact(self._db, items)
        except ConditionFailed as exc:
            if exc.first == 0:
                return False
            raise
        self.tally_codes(moves)
        return True

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

    def mark_sold_out(self, race_id: str, event_id: str, at: datetime) -> bool:
        # Epoch milliseconds: the stats item's counters are numbers, read as such in one GetItem.
        try:
            self._db.update_item(
                TableName=self._table,
                Key=stats_key(race_id, event_id),
                UpdateExpression="SET soldOutAt = :at",
                ConditionExpression="attribute_not_exists(soldOutAt)",
                ExpressionAttributeValues=values({":at": int(at.timestamp() * 1000)}),
            )
        except Exception as exc:
            if not is_conditional_failure(exc):
                raise
            return False
        return True
