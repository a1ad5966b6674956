"""The waitlist's entries and counters, in the Inventory table (keys: ``aws/keys.py``).

One partition per event: the ``LINE`` item (``seq``: join numbers given; ``head``: how far offers
have got; ``waiting``: confirmed entries in line) beside its ``ENTRY#`` items, so the director's
list is one query and a confirmation is one transaction of two items in one partition.

* **One entry per address per event** by the key itself (the entry id is a digest of race, event
  and address): joining again finds the same item, and a conditional put leaves it as it is.
* **The join number is given in the transaction that confirms**: the line's ``seq`` moves from
  the value read to the next only if nobody moved it since (else the service reads again), and
  ``waiting`` grows only while under the director's cap. Numbers therefore have no gaps and the
  length is exact: no crash can count an entry that is not in line.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Protocol

from racecap.aws.items import from_item, get_all, query_all, query_raw, to_item, values
from racecap.aws.keys import (
    WAITLIST_ENTRY_PREFIX,
    WAITLIST_OFFER_PREFIX,
    WAITLIST_OFFERS_PARTITION,
    WAITLIST_WORK_PARTITION,
    email_key,
    shard_key,
    waitlist_entry_key,
    waitlist_line_key,
    waitlist_offer_key,
    waitlist_pk,
    waitlist_queue_partition,
    waitlist_queue_sk,
)
from racecap.aws.transactions import ConditionFailed, TransactItem, transact, update_item
from racecap.places.returns import CLOSED, OFFERED, POOL, line_counts, pool_attr
from racecap.waitlist.models import Line, Offer, OfferState, WaitlistEntry

_NAMES = {"#state": "state", "#ttl": "ttl"}
_LINE_NAMES = {"#seq": "seq", "#head": "head", "#waiting": "waiting"}


class WaitlistStore(Protocol):
    def line(self, race_id: str, event_id: str) -> Line: ...

    def get(self, race_id: str, event_id: str, entry_id: str) -> WaitlistEntry | None: ...

    def entries(self, race_id: str, event_id: str) -> list[WaitlistEntry]: ...

    def put_pending(self, entry: WaitlistEntry, now: int) -> bool:
        """Write a new PENDING entry, over none, a LEFT one or an expired PENDING one; False
        (nothing written) if the address has a live entry already."""
        ...

    def confirm(self, entry: WaitlistEntry, seen: Line, max_length: int | None, at: str) -> None:
        """The entry joins the line as number ``seen.seq + 1``; ``ConditionFailed`` naming item 0
        (the line moved since ``seen``, or the cap is reached) or 1 (the entry is no longer PENDING)."""
        ...

    def leave(self, entry: WaitlistEntry, at: str) -> None:
        """LEFT, its personal data dropped, out of the length; ``ConditionFailed`` if its state moved."""
        ...

    def remove(self, entry: WaitlistEntry, at: str, also: list[TransactItem]) -> None:
        """REMOVED by the director, out of the length, with ``also`` (the audit entry) in the same write."""
        ...

    # -- offers (the batch and the claim link) ------------------------------------------------------
    def with_work(self) -> list[tuple[str, str]]:
        """(raceId, eventId) of every line with pooled places or offers out (a sparse index)."""
        ...

    def next_waiting(self, race_id: str, event_id: str, limit: int) -> list[WaitlistEntry]:
        """The first WAITING entries by join number (read again, consistently, from the index's keys)."""
        ...

    def offer(self, seen: Line, ticket: list[tuple[WaitlistEntry, Offer]]) -> None:
        """One transaction for one ticket: a runner, or the waiting runners of a group a ballot
        drew together (``groupId``), all offered or none. Each runner's pooled place on its
        ``offer.shard`` becomes an offer out, the entry is OFFERED, the offer is written. A ticket
        past the head as read (``seen``) moves the head to its last number (if the head is still
        behind it); a group passed over earlier (behind the head) leaves it where it is.
        ``ConditionFailed``: 0 the line moved (closed, too few pooled places there, the head on the
        other side), then per runner two indexes: the entry left the line, it had an offer already."""
        ...

    def get_offer(self, race_id: str, event_id: str, entry_id: str) -> Offer | None: ...

    def offers(self, race_id: str, event_id: str) -> list[Offer]: ...

    def expired_offers(self, now: str) -> list[Offer]:
        """Offers still OFFERED whose window ended by ``now``."""
        ...

    def offers_out(self, now: str) -> list[Offer]:
        """Offers still OFFERED whose window runs past ``now``, of every event."""
        ...

    def end_offer(self, offer: Offer, state: OfferState, at: str) -> None:
        """OFFERED → ``state``; its place back to the pool (or, the list closed, to its shard).
        ``ConditionFailed``: it was no longer OFFERED."""
        ...

    def claim_offer(self, offer: Offer, at: str, now: str, hold_item: TransactItem) -> None:
        """OFFERED → CLAIMED with the runner's hold (``hold_item``) in the same transaction; the
        offer is no longer out (the place is a live hold). ``ConditionFailed``: 0 the offer moved
        or its window ended."""
        ...

    def give_back(self, race_id: str, event_id: str, line: Line, takes: dict[str, int]) -> None:
        """Pooled places nobody waits for back to their shards (the line as read, else ``ConditionFailed``)."""
        ...

    def rest(self, race_id: str, event_id: str) -> None:
        """Out of the batch's to-do list, while it has nothing pooled and no offer out."""
        ...

    def registered(self, race_id: str, email: str) -> bool:
        """The address holds the race's email claim (paying, or registered another way)."""
        ...

    def close_line(self, race_id: str, event_id: str, at: str, also: list[TransactItem] | None = None) -> None:
        """No more places to the pool and no more offers (``closed``); a line that never existed too."""
        ...


class DynamoWaitlist:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def line(self, race_id: str, event_id: str) -> Line:
        resp = self._db.get_item(TableName=self._table, Key=waitlist_line_key(race_id, event_id), ConsistentRead=True)
        if "Item" not in resp:
            return Line()
        return line_from(from_item(resp["Item"]))

    def get(self, race_id: str, event_id: str, entry_id: str) -> WaitlistEntry | None:
        resp = self._db.get_item(
            TableName=self._table, Key=waitlist_entry_key(race_id, event_id, entry_id), ConsistentRead=True
        )
        return WaitlistEntry.model_validate(from_item(resp["Item"])) if "Item" in resp else None

    def entries(self, race_id: str, event_id: str) -> list[WaitlistEntry]:
        items = query_all(
            self._db,
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :entry)",
            ExpressionAttributeValues=values({":pk": waitlist_pk(race_id, event_id), ":entry": WAITLIST_ENTRY_PREFIX}),
            ConsistentRead=True,
        )
        return [WaitlistEntry.model_validate(i) for i in items]

    def put_pending(self, entry: WaitlistEntry, now: int) -> bool:
        key = waitlist_entry_key(entry.raceId, entry.eventId, entry.entryId)
        try:
            self._db.put_item(
                TableName=self._table,
                Item={**key, **to_item(entry.model_dump())},
                # A live entry (pending, waiting, removed) stays as it is: one per address.
                ConditionExpression="attribute_not_exists(pk) OR #state = :left OR (#state = :pending AND #ttl < :now)",
                ExpressionAttributeNames=_NAMES,
                ExpressionAttributeValues=values({":left": "LEFT", ":pending": "PENDING", ":now": now}),
            )
            return True
        except self._db.exceptions.ConditionalCheckFailedException:
            return False

    def confirm(self, entry: WaitlistEntry, seen: Line, max_length: int | None, at: str) -> None:
        number = seen.seq + 1
        line_cond = "#seq = :seen" if seen.exists else "attribute_not_exists(pk)"
        vals: dict[str, Any] = {":next": number, ":zero": 0, ":one": 1, ":race": entry.raceId, ":event": entry.eventId}
        if seen.exists:
            vals[":seen"] = seen.seq
        if max_length is not None:
            # The cap counts confirmed entries in line, read in the write itself: two last
            # places confirmed at once cannot both pass it.
            line_cond += " AND (attribute_not_exists(#waiting) OR #waiting < :max)"
            vals[":max"] = max_length
        transact(
            self._db,
            [
                update_item(
                    self._table,
                    waitlist_line_key(entry.raceId, entry.eventId),
                    "SET #seq = :next, #waiting = if_not_exists(#waiting, :zero) + :one, "
                    "#head = if_not_exists(#head, :zero), raceId = :race, eventId = :event",
                    condition=line_cond,
                    names=_LINE_NAMES,
                    vals=vals,
                ),
                update_item(
                    self._table,
                    waitlist_entry_key(entry.raceId, entry.eventId, entry.entryId),
                    # In the line's index by number: the offer batch takes the next one from it.
                    "SET #state = :waiting, #seq = :next, confirmedAt = :at, gsi1pk = :queue, gsi1sk = :place "
                    "REMOVE #ttl",
                    condition="#state = :pending",
                    names={**_NAMES, "#seq": "seq"},
                    vals={
                        ":waiting": "WAITING",
                        ":next": number,
                        ":at": at,
                        ":pending": "PENDING",
                        ":queue": waitlist_queue_partition(entry.raceId, entry.eventId),
                        ":place": waitlist_queue_sk(number),
                    },
                ),
            ],
        )

    def leave(self, entry: WaitlistEntry, at: str) -> None:
        transact(
            self._db,
            [
                update_item(
                    self._table,
                    waitlist_entry_key(entry.raceId, entry.eventId, entry.entryId),
                    # Nothing to keep a runner's address for once they left: only the number stays.
                    "SET #state = :left, leftAt = :at, email = :empty, firstName = :empty, lastName = :empty "
                    "REMOVE #ttl, gsi1pk, gsi1sk",
                    condition="#state = :was",
                    names=_NAMES,
                    vals={":left": "LEFT", ":at": at, ":empty": "", ":was": entry.state},
                ),
                *self._out_of_line(entry),
            ],
        )

    def remove(self, entry: WaitlistEntry, at: str, also: list[TransactItem]) -> None:
        transact(
            self._db,
            [
                update_item(
                    self._table,
                    waitlist_entry_key(entry.raceId, entry.eventId, entry.entryId),
                    "SET #state = :removed, removedAt = :at REMOVE #ttl, gsi1pk, gsi1sk",
                    condition="#state = :was",
                    names=_NAMES,
                    vals={":removed": "REMOVED", ":at": at, ":was": entry.state},
                ),
                *self._out_of_line(entry),
                *also,
            ],
        )

    # -- offers ----------------------------------------------------------------------------------
    def with_work(self) -> list[tuple[str, str]]:
        items = query_raw(
            self._db,
            TableName=self._table,
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :p",
            ExpressionAttributeValues=values({":p": WAITLIST_WORK_PARTITION}),
        )
        # The index carries raceId and eventId (a LINE always has them: confirm and close set them).
        return [(str(i["raceId"]["S"]), str(i["eventId"]["S"])) for i in items if "raceId" in i and "eventId" in i]

    def next_waiting(self, race_id: str, event_id: str, limit: int) -> list[WaitlistEntry]:
        keys = self._db.query(
            TableName=self._table,
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :p",
            ExpressionAttributeValues=values({":p": waitlist_queue_partition(race_id, event_id)}),
            Limit=limit,
        )["Items"]
        found = []
        for k in keys:  # the index lags: the entry itself, read now, decides
            resp = self._db.get_item(TableName=self._table, Key={"pk": k["pk"], "sk": k["sk"]}, ConsistentRead=True)
            if "Item" in resp:
                entry = WaitlistEntry.model_validate(from_item(resp["Item"]))
                if entry.state == "WAITING":
                    found.append(entry)
        return found

    def offer(self, seen: Line, ticket: list[tuple[WaitlistEntry, Offer]]) -> None:
        first = ticket[0][0]
        race_id, event_id = first.raceId, first.eventId
        last = max(e.seq or 0 for e, _ in ticket)
        by_shard = Counter(o.shard for _, o in ticket)
        names = {"#head": "head", "#pool": POOL, "#offered": OFFERED, "#waiting": "waiting", "#closed": CLOSED,
                 "#made": "made"}  # fmt: skip
        vals: dict[str, Any] = {":k": len(ticket), ":minus": -len(ticket), ":last": last}
        adds = ["#pool :minus", "#offered :k", "#waiting :minus", "#made :k"]
        conds = ["attribute_not_exists(#closed)", "#pool >= :k"]
        for n, (shard, k) in enumerate(sorted(by_shard.items())):
            names[f"#ps{n}"], vals[f":ps{n}"], vals[f":psm{n}"] = pool_attr(shard), k, -k
            adds.append(f"#ps{n} :psm{n}")
            conds.append(f"#ps{n} >= :ps{n}")
        if last > seen.head:  # the ticket is the line's front: the head moves to it
            update = "SET #head = :last ADD " + ", ".join(adds)
            conds.append("#head < :last")
        else:  # a group passed over while it did not fit, offered now: those after it were offered first
            update = "ADD " + ", ".join(adds)
            conds.append("#head >= :last")
        items = [
            update_item(
                self._table,
                waitlist_line_key(race_id, event_id),
                update,
                condition=" AND ".join(conds),
                names=names,
                vals=vals,
            )
        ]
        for entry, offer in ticket:
            items.append(
                update_item(
                    self._table,
                    waitlist_entry_key(race_id, event_id, entry.entryId),
                    "SET #state = :offered, #at = :at REMOVE gsi1pk, gsi1sk",
                    condition="#state = :waiting",
                    names={"#state": "state", "#at": "offeredAt"},
                    vals={":offered": "OFFERED", ":at": offer.offeredAt, ":waiting": "WAITING"},
                )
            )
            items.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": {
                            **waitlist_offer_key(race_id, event_id, entry.entryId),
                            **to_item(self._offer_item(offer)),
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
        transact(self._db, items)

    @staticmethod
    def _offer_item(offer: Offer) -> dict[str, Any]:
        live = {"gsi1pk": WAITLIST_OFFERS_PARTITION, "gsi1sk": f"{offer.expiresAt}#{offer.raceId}#{offer.eventId}"}
        return offer.model_dump() | (live if offer.state == "OFFERED" else {})

    def get_offer(self, race_id: str, event_id: str, entry_id: str) -> Offer | None:
        resp = self._db.get_item(
            TableName=self._table, Key=waitlist_offer_key(race_id, event_id, entry_id), ConsistentRead=True
        )
        return Offer.model_validate(from_item(resp["Item"])) if "Item" in resp else None

    def offers(self, race_id: str, event_id: str) -> list[Offer]:
        items = query_all(
            self._db,
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :offer)",
            ExpressionAttributeValues=values({":pk": waitlist_pk(race_id, event_id), ":offer": WAITLIST_OFFER_PREFIX}),
            ConsistentRead=True,
        )
        return [Offer.model_validate(i) for i in items]

    def expired_offers(self, now: str) -> list[Offer]:
        return [o for o in self._indexed_offers("gsi1sk <= :now", now) if o.expiresAt <= now]

    def offers_out(self, now: str) -> list[Offer]:
        return self._indexed_offers("gsi1sk > :now", now)

    def _indexed_offers(self, window: str, now: str) -> list[Offer]:
        # The sparse index holds the offers out only (an ended offer leaves it), sorted by the
        # end of their window; the item itself is read for its current state.
        keys = query_raw(
            self._db,
            TableName=self._table,
            IndexName="gsi1",
            KeyConditionExpression=f"gsi1pk = :p AND {window}",
            ExpressionAttributeValues=values({":p": WAITLIST_OFFERS_PARTITION, ":now": now}),
        )
        found = []
        for k in keys:
            resp = self._db.get_item(TableName=self._table, Key={"pk": k["pk"], "sk": k["sk"]}, ConsistentRead=True)
            if "Item" in resp:
                offer = Offer.model_validate(from_item(resp["Item"]))
                if offer.state == "OFFERED":
                    found.append(offer)
        return found

    def end_offer(self, offer: Offer, state: OfferState, at: str) -> None:
        tally = {"EXPIRED": "expired", "DECLINED": "declined"}.get(state)
        closed = state == "CLOSED"
        line_names = {"#offered": OFFERED, **({"#tally": tally} if tally else {})}
        adds = ["#offered :minus", *(["#tally :one"] if tally else [])]
        if not closed:  # back to the pool, on the shard that counts it
            line_names |= {"#pool": POOL, "#ps": pool_attr(offer.shard)}
            adds += ["#pool :one", "#ps :one"]
        items: list[TransactItem] = [
            update_item(
                self._table,
                waitlist_offer_key(offer.raceId, offer.eventId, offer.entryId),
                "SET #state = :ended, #at = :at REMOVE gsi1pk, gsi1sk",
                condition="#state = :offered",
                names={"#state": "state", "#at": "endedAt"},
                vals={":ended": state, ":at": at, ":offered": "OFFERED"},
            ),
            update_item(
                self._table,
                waitlist_line_key(offer.raceId, offer.eventId),
                "ADD " + ", ".join(adds),
                condition="#offered >= :one",
                names=line_names,
                vals={":minus": -1, ":one": 1},
            ),
        ]
        if closed:  # the list is closed: the place goes back to its shard, for the public
            items.append(
                update_item(
                    self._table,
                    shard_key(offer.raceId, offer.eventId, offer.shard),
                    "SET taken = taken - :one",
                    condition="taken >= :one",
                    vals={":one": 1},
                )
            )
        transact(self._db, items)

    def claim_offer(self, offer: Offer, at: str, now: str, hold_item: TransactItem) -> None:
        transact(
            self._db,
            [
                update_item(
                    self._table,
                    waitlist_offer_key(offer.raceId, offer.eventId, offer.entryId),
                    "SET #state = :claimed, #hold = :hold, #at = :at REMOVE gsi1pk, gsi1sk",
                    condition="#state = :offered AND #expires > :now",
                    names={"#state": "state", "#hold": "holdId", "#at": "endedAt", "#expires": "expiresAt"},
                    vals={
                        ":claimed": "CLAIMED",
                        ":hold": hold_item["Put"]["Item"]["holdId"]["S"],
                        ":at": at,
                        ":offered": "OFFERED",
                        ":now": now,
                    },
                ),
                update_item(
                    self._table,
                    waitlist_line_key(offer.raceId, offer.eventId),
                    "ADD #offered :minus, #claimed :one",
                    condition="#offered >= :one",
                    names={"#offered": OFFERED, "#claimed": "claimed"},
                    vals={":minus": -1, ":one": 1},
                ),
                hold_item,
            ],
        )

    def give_back(self, race_id: str, event_id: str, line: Line, takes: dict[str, int]) -> None:
        names = {"#pool": POOL, "#waiting": "waiting"}
        vals: dict[str, Any] = {":total": -sum(takes.values()), ":pool": line.pool, ":waiting": line.waiting}
        adds = ["#pool :total"]
        shards: list[TransactItem] = []
        for n, (shard, k) in enumerate(sorted(takes.items())):
            names[f"#p{n}"] = pool_attr(shard)
            vals[f":k{n}"] = -k
            adds.append(f"#p{n} :k{n}")
            shards.append(
                update_item(
                    self._table,
                    shard_key(race_id, event_id, shard),
                    "SET taken = taken - :k",
                    condition="taken >= :k",
                    vals={":k": k},
                )
            )
        transact(
            self._db,
            [
                update_item(
                    self._table,
                    waitlist_line_key(race_id, event_id),
                    "ADD " + ", ".join(adds),
                    condition="#pool = :pool AND #waiting = :waiting",
                    names=names,
                    vals=vals,
                ),
                *shards,
            ],
        )

    def registered(self, race_id: str, email: str) -> bool:
        """The address holds the race's email claim (paying or registered another way)."""
        resp = self._db.get_item(TableName=self._table, Key=email_key(race_id, email), ConsistentRead=True)
        return "Item" in resp

    def close_line(self, race_id: str, event_id: str, at: str, also: list[TransactItem] | None = None) -> None:
        transact(
            self._db,
            [
                update_item(
                    self._table,
                    waitlist_line_key(race_id, event_id),
                    "SET #closed = if_not_exists(#closed, :at), raceId = :race, eventId = :event",
                    names={"#closed": CLOSED},
                    vals={":at": at, ":race": race_id, ":event": event_id},
                ),
                *(also or []),
            ],
        )

    def rest(self, race_id: str, event_id: str) -> None:
        try:
            self._db.update_item(
                TableName=self._table,
                Key=waitlist_line_key(race_id, event_id),
                UpdateExpression="REMOVE gsi1pk, gsi1sk",
                ConditionExpression="(attribute_not_exists(#pool) OR #pool <= :zero) AND "
                "(attribute_not_exists(#offered) OR #offered <= :zero)",
                ExpressionAttributeNames={"#pool": POOL, "#offered": OFFERED},
                ExpressionAttributeValues=values({":zero": 0}),
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            pass  # a place was pooled meanwhile: it stays on the list for the next run

    def _out_of_line(self, entry: WaitlistEntry) -> list[TransactItem]:
        """A waiting entry leaving the line shortens it (the number it had is not given again)."""
        if entry.state != "WAITING":
            return []
        return [
            update_item(
                self._table,
                waitlist_line_key(entry.raceId, entry.eventId),
                "SET #waiting = #waiting - :one",
                condition="attribute_exists(pk)",
                names={"#waiting": "waiting"},
                vals={":one": 1},
            )
        ]


class DynamoBallotLine:
    """A ballot's drawn order as the event's waitlist (``racecap.ballot.job``): the entries written
    page by page (a re-run writes the same items again), then the LINE in one transaction with the
    winners' places moved from the shards to its pool, so the offer batch offers them in order."""

    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def put_entries(self, entries: list[WaitlistEntry]) -> None:
        """WAITING entries with their numbers, in the line's index (25 to a batch write). One that
        exists is left as it is: a re-run over a page whose runners were offered places already
        must not put them back in line (a batch write has no condition, so they are read first)."""
        keys = [waitlist_entry_key(e.raceId, e.eventId, e.entryId) for e in entries]
        there = {str(i["sk"]) for i in get_all(self._db, self._table, keys)}
        requests = []
        for e in entries:
            if f"{WAITLIST_ENTRY_PREFIX}{e.entryId}" in there:
                continue
            assert e.seq is not None
            item = {
                **waitlist_entry_key(e.raceId, e.eventId, e.entryId),
                **to_item(e.model_dump(exclude_none=True)),
                **to_item(
                    {"gsi1pk": waitlist_queue_partition(e.raceId, e.eventId), "gsi1sk": waitlist_queue_sk(e.seq)}
                ),
            }
            requests.append({"PutRequest": {"Item": item}})
        for start in range(0, len(requests), 25):
            batch_write(self._db, self._table, requests[start : start + 25])

    def open_line(
        self, race_id: str, event_id: str, waiting: int, takes: dict[str, int], caps: dict[str, int], at: str
    ) -> bool:
        """The LINE with ``waiting`` runners in it and ``takes`` (shard -> places) pooled for the
        first of them, each shard's cap as read (``caps``); False if the LINE exists already (a
        re-run: nothing written twice)."""
        names = {"#seq": "seq", "#head": "head", "#waiting": "waiting", "#pool": POOL}
        vals: dict[str, Any] = {
            ":n": waiting,
            ":zero": 0,
            ":pool": sum(takes.values()),
            ":race": race_id,
            ":event": event_id,
            ":at": at,
            ":work": WAITLIST_WORK_PARTITION,
            ":ev": f"{race_id}#{event_id}",
        }
        sets = ["#seq = :n", "#head = :zero", "#waiting = :n", "#pool = :pool", "raceId = :race",
                "eventId = :event", "ballotDrawnAt = :at", "gsi1pk = :work", "gsi1sk = :ev"]  # fmt: skip
        for n, (shard, k) in enumerate(sorted(takes.items())):
            names[f"#p{n}"] = pool_attr(shard)
            vals[f":k{n}"] = k
            sets.append(f"#p{n} = :k{n}")
        shards = [
            update_item(
                self._table,
                shard_key(race_id, event_id, shard),
                "SET taken = taken + :k",
                condition="cap = :cap AND taken <= :most",
                vals={":k": k, ":cap": caps[shard], ":most": caps[shard] - k},
            )
            for shard, k in sorted(takes.items())
            if k
        ]
        line = update_item(
            self._table,
            waitlist_line_key(race_id, event_id),
            "SET " + ", ".join(sets),
            condition="attribute_not_exists(pk)",
            names=names,
            vals=vals,
        )
        try:
            transact(self._db, [line, *shards])
        except ConditionFailed as exc:
            if exc.first == 0:
                return False
            raise
        return True


def batch_write(client: Any, table: str, requests: list[dict[str, Any]]) -> None:
    """One BatchWriteItem, its unprocessed items sent again (with a short back-off) until none are left."""
    pending = {table: requests}
    for attempt in range(10):
        resp = client.batch_write_item(RequestItems=pending)
        pending = resp.get("UnprocessedItems") or {}
        if not pending:
            return
        time.sleep(min(1.0, 0.05 * 2**attempt))
    raise RuntimeError(f"{sum(len(v) for v in pending.values())} items left unwritten after 10 tries")


def line_from(item: dict[str, Any]) -> Line:
    """The LINE item (plain values) as ``Line``; its pool's fields are ``places.returns``' names."""
    counts = line_counts(item)
    return Line(
        int(item.get("seq", 0)),
        int(item.get("head", 0)),
        counts.waiting,
        exists=True,
        pool=counts.pool,
        offered=counts.offered,
        closed=counts.closed,
        pool_by_shard=counts.pool_by_shard,
        made=int(item.get("made", 0)),
        claimed=int(item.get("claimed", 0)),
        expired=int(item.get("expired", 0)),
        declined=int(item.get("declined", 0)),
    )
