"""``WaitlistStore`` in memory (``waitlist.store``): the LINE counters and the entries of each
event, each change checked whole and applied whole under one lock, refusing with the same
``ConditionFailed`` item positions as the DynamoDB adapter."""

from __future__ import annotations

import threading
from dataclasses import replace

from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.waitlist.models import Line, Offer, OfferState, WaitlistEntry

from tests.fakes.stores import FakeTables


class FakeWaitlist:
    def __init__(self, tables: FakeTables | None = None) -> None:
        self.lock = threading.RLock()
        self.lines: dict[tuple[str, str], Line] = {}
        self.items: dict[tuple[str, str, str], WaitlistEntry] = {}
        self.offer_items: dict[tuple[str, str, str], Offer] = {}
        self.working: set[tuple[str, str]] = set()  # the sparse index of lines with work
        self.claims: set[tuple[str, str]] = set()  # (raceId, email): the race's email claims
        self.tables = tables  # the shards and holds offers and closings move (FakeTables)

    def line(self, race_id: str, event_id: str) -> Line:
        with self.lock:
            return self.lines.get((race_id, event_id), Line())

    def get(self, race_id: str, event_id: str, entry_id: str) -> WaitlistEntry | None:
        with self.lock:
            return self.items.get((race_id, event_id, entry_id))

    def entries(self, race_id: str, event_id: str) -> list[WaitlistEntry]:
        with self.lock:
            return [e for (r, ev, _), e in self.items.items() if (r, ev) == (race_id, event_id)]

    def put_pending(self, entry: WaitlistEntry, now: int) -> bool:
        key = (entry.raceId, entry.eventId, entry.entryId)
        with self.lock:
            old = self.items.get(key)
            if old is not None and not (old.state == "LEFT" or (old.state == "PENDING" and (old.ttl or 0) < now)):
                return False
            self.items[key] = entry
            return True

    def confirm(self, entry: WaitlistEntry, seen: Line, max_length: int | None, at: str) -> None:
        key = (entry.raceId, entry.eventId, entry.entryId)
        with self.lock:
            line = self.lines.get((entry.raceId, entry.eventId), Line())
            failed = []
            if (
                line.exists != seen.exists
                or line.seq != seen.seq
                or (max_length is not None and line.waiting >= max_length)
            ):
                failed.append(0)
            current = self.items.get(key)
            if current is None or current.state != "PENDING":
                failed.append(1)
            if failed:
                raise ConditionFailed(failed)
            assert current is not None
            number = seen.seq + 1
            self.lines[(entry.raceId, entry.eventId)] = replace(line, seq=number, waiting=line.waiting + 1, exists=True)
            self.items[key] = current.model_copy(
                update={"state": "WAITING", "seq": number, "confirmedAt": at, "ttl": None}
            )

    def leave(self, entry: WaitlistEntry, at: str) -> None:
        update = {"state": "LEFT", "leftAt": at, "email": "", "firstName": "", "lastName": "", "ttl": None}
        self._move(entry, update, [])

    def remove(self, entry: WaitlistEntry, at: str, also: list[TransactItem]) -> None:
        self._move(entry, {"state": "REMOVED", "removedAt": at, "ttl": None}, also)

    def _move(self, entry: WaitlistEntry, update: dict[str, object], also: list[TransactItem]) -> None:
        key = (entry.raceId, entry.eventId, entry.entryId)
        with self.lock:
            current = self.items.get(key)
            if current is None or current.state != entry.state:
                raise ConditionFailed([0])
            checks = [item["Fake"] for item in also]  # the audit's items (tests/fakes/catalog.FakeAudit)
            if not all(check() for check, _ in checks):
                raise ConditionFailed([1 + i for i, (check, _) in enumerate(checks) if not check()])
            self.items[key] = current.model_copy(update=update)
            if entry.state == "WAITING":
                line = self.lines[(entry.raceId, entry.eventId)]
                self.lines[(entry.raceId, entry.eventId)] = replace(line, waiting=line.waiting - 1)
            for _, apply in checks:
                apply()

    def set_head(self, race_id: str, event_id: str, head: int) -> None:
        """What the offers (issue 40's next slice) will do: move how far the line has got."""
        with self.lock:
            self.lines[(race_id, event_id)] = replace(self.lines[(race_id, event_id)], head=head)

    # -- pooled places and offers (``DynamoWaitlist``'s, in memory) -------------------------------
    def pool(self, race_id: str, event_id: str, shard: str, k: int) -> None:
        """What ``places.returns`` does when a freed place goes to the line (the shard keeps it)."""
        with self.lock:
            line = self.lines[(race_id, event_id)]
            by = dict(line.pool_by_shard)
            by[shard] = by.get(shard, 0) + k
            self.lines[(race_id, event_id)] = replace(line, pool=line.pool + k, pool_by_shard=by)
            self.working.add((race_id, event_id))

    def with_work(self) -> list[tuple[str, str]]:
        with self.lock:
            return sorted(self.working)

    def next_waiting(self, race_id: str, event_id: str, limit: int) -> list[WaitlistEntry]:
        with self.lock:
            waiting = [e for e in self.entries(race_id, event_id) if e.state == "WAITING"]
            return sorted(waiting, key=lambda e: e.seq or 0)[:limit]

    def offer(self, seen: Line, ticket: list[tuple[WaitlistEntry, Offer]]) -> None:
        ev = (ticket[0][0].raceId, ticket[0][0].eventId)
        last = max(e.seq or 0 for e, _ in ticket)
        with self.lock:
            line = self.lines[ev]
            need: dict[str, int] = {}
            for _, o in ticket:
                need[o.shard] = need.get(o.shard, 0) + 1
            failed = []
            forward = last > seen.head
            if (
                line.closed
                or line.pool < len(ticket)
                or any(line.pool_by_shard.get(s, 0) < k for s, k in need.items())
                or (line.head >= last if forward else line.head < last)
            ):
                failed.append(0)
            for n, (entry, _) in enumerate(ticket):
                current = self.items.get((*ev, entry.entryId))
                if current is None or current.state != "WAITING":
                    failed.append(1 + 2 * n)
                if (*ev, entry.entryId) in self.offer_items:
                    failed.append(2 + 2 * n)
            if failed:
                raise ConditionFailed(failed)
            by = dict(line.pool_by_shard)
            for s, k in need.items():
                by[s] -= k
            k = len(ticket)
            self.lines[ev] = replace(
                line, head=last if forward else line.head, pool=line.pool - k, pool_by_shard=by,
                offered=line.offered + k, waiting=line.waiting - k, made=line.made + k,
            )  # fmt: skip
            for entry, offer in ticket:
                current = self.items[(*ev, entry.entryId)]
                self.items[(*ev, entry.entryId)] = current.model_copy(update={"state": "OFFERED"})
                self.offer_items[(*ev, entry.entryId)] = offer

    def get_offer(self, race_id: str, event_id: str, entry_id: str) -> Offer | None:
        with self.lock:
            return self.offer_items.get((race_id, event_id, entry_id))

    def offers(self, race_id: str, event_id: str) -> list[Offer]:
        with self.lock:
            return [o for (r, ev, _), o in self.offer_items.items() if (r, ev) == (race_id, event_id)]

    def expired_offers(self, now: str) -> list[Offer]:
        with self.lock:
            return [o for o in self.offer_items.values() if o.state == "OFFERED" and o.expiresAt <= now]

    def offers_out(self, now: str) -> list[Offer]:
        with self.lock:
            return [o for o in self.offer_items.values() if o.state == "OFFERED" and o.expiresAt > now]

    def end_offer(self, offer: Offer, state: OfferState, at: str) -> None:
        ev, key = (offer.raceId, offer.eventId), (offer.raceId, offer.eventId, offer.entryId)
        with self.lock:
            current = self.offer_items.get(key)
            if current is None or current.state != "OFFERED":
                raise ConditionFailed([0])
            self.offer_items[key] = current.model_copy(update={"state": state, "endedAt": at})
            line = self.lines[ev]
            tally = {"expired": line.expired + (state == "EXPIRED"), "declined": line.declined + (state == "DECLINED")}
            if state == "CLOSED":
                self.lines[ev] = replace(line, offered=line.offered - 1, **tally)
                if self.tables is not None:
                    self.tables.shards[ev][offer.shard][1] -= 1
                return
            by = dict(line.pool_by_shard)
            by[offer.shard] = by.get(offer.shard, 0) + 1
            self.lines[ev] = replace(line, offered=line.offered - 1, pool=line.pool + 1, pool_by_shard=by, **tally)

    def claim_offer(self, offer: Offer, at: str, now: str, hold_item: TransactItem) -> None:
        ev, key = (offer.raceId, offer.eventId), (offer.raceId, offer.eventId, offer.entryId)
        with self.lock:
            current = self.offer_items.get(key)
            if current is None or current.state != "OFFERED" or current.expiresAt <= now:
                raise ConditionFailed([0])
            check, apply = hold_item["Fake"]
            hold_id = check()  # the fake hold item's check answers its hold id (FakeHolds.offered_hold_item)
            apply()
            self.offer_items[key] = current.model_copy(update={"state": "CLAIMED", "holdId": hold_id, "endedAt": at})
            line = self.lines[ev]
            self.lines[ev] = replace(line, offered=line.offered - 1, claimed=line.claimed + 1)

    def give_back(self, race_id: str, event_id: str, line: Line, takes: dict[str, int]) -> None:
        ev = (race_id, event_id)
        with self.lock:
            now = self.lines[ev]
            if (now.pool, now.waiting) != (line.pool, line.waiting):
                raise ConditionFailed([0])
            by = {s: k - takes.get(s, 0) for s, k in now.pool_by_shard.items()}
            self.lines[ev] = replace(now, pool=now.pool - sum(takes.values()), pool_by_shard=by)
            if self.tables is not None:
                for shard, k in takes.items():
                    self.tables.shards[ev][shard][1] -= k

    def rest(self, race_id: str, event_id: str) -> None:
        with self.lock:
            line = self.lines.get((race_id, event_id), Line())
            if line.pool <= 0 and line.offered <= 0:
                self.working.discard((race_id, event_id))

    def registered(self, race_id: str, email: str) -> bool:
        return (race_id, email) in self.claims

    def close_line(self, race_id: str, event_id: str, at: str, also: list[TransactItem] | None = None) -> None:
        with self.lock:
            self.lines[(race_id, event_id)] = replace(self.lines.get((race_id, event_id), Line()), closed=True)
            for item in also or []:
                item["Fake"][1]()
