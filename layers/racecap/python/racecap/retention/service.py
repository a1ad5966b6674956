"""Personal data is kept for as long as the race needs it, then deleted.

A director sets ``retentionDays`` per race (default 365). From ``raceDate + retentionDays``
on, the retention job (``functions/retention_purge``, hourly) deletes what is not public:

* from every registration: the email, the date of birth and the payment references (the
  provider's payment, refund and dispute ids, and the refund ids on its ledger's entries);
  the age on race day is kept instead of the date of birth, so results can still place
  runners in age groups;
* every email's claim on the race (its key is the email) and the runners' holds (which
  carry the payment attempt: email, date of birth);
* every entry and every offer of the race's events' waitlists (an address and a name each;
  ``racecap.waitlist``), whatever its state, in transactions of up to
  ``LEDGER_ITEMS_PER_TRANSACTION`` deletes; the lines' counters, figures alone, stay;
* every ballot application and its address's claim (``racecap.ballot``), the same way; the
  draw's published pages (application ids only) and its counters stay;

and keeps what results publish and directors count: name, bib, event, status, amounts,
times, the stats. The answers to the registration questions (emergency contacts, clubs,
everything a runner typed: ``racecap.questions``) go too, all but the division, which places
runners in the results' categories as the age on race day does in age groups; the holds
that carried them are deleted above. Confirmation emails sent, the audit trail and the
webhook log hold no runner's address; unpaid holds and their attempts expire through TTL
30 days after they lapse, so ``MIN_RETENTION_DAYS`` is longer than that with a margin for
TTL's own delay.

Each registration is purged in one transaction (its item, its email claim, its hold), after
its ledger's refund ids (their own transactions: a registration may have many refunds;
emptying an id twice changes nothing), so the job can stop anywhere and resume: a
registration already purged carries ``purgedAt`` and is skipped. A race is marked purged
(with an audit entry) only once every registration of every event is done. The payment
provider keeps its own records under its own retention rules; Racecap only forgets its
references to them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Protocol

from racecap.audit.service import AuditEntries
from racecap.aws.transactions import TransactItem
from racecap.ledger.store import LedgerStore
from racecap.models import Director
from racecap.observability import logger, metrics
from racecap.races.models import Race
from racecap.races.rules import MIN_RETENTION_DAYS, purge_due
from racecap.races.store import RaceStore
from racecap.registration.models import Registration

# Stop this long before the function's deadline; the next hourly run goes on from there.
TIME_MARGIN_S = 20.0


LEDGER_ITEMS_PER_TRANSACTION = 90  # DynamoDB's limit is 100 items per transaction


# Who the audit trail names for the job's deletion.
RETENTION_JOB = Director(sub="racecap:retention", username="Racecap retention job")


def age_on_race_day(reg: Registration, race_date: date) -> int | None:
    try:
        born = date.fromisoformat(reg.dateOfBirth)
    except ValueError:
        return reg.ageOnRaceDay
    return race_date.year - born.year - ((race_date.month, race_date.day) < (born.month, born.day))


class RetentionStore(Protocol):
    def unpurged_races(self, raced_on_or_before: str) -> Iterator[Race]:
        """Races not yet purged whose raceDate is on or before the given YYYY-MM-DD."""
        ...

    def unpurged_registrations(self, race_id: str, event_id: str) -> Iterator[Registration]: ...

    def purge_items(self, reg: Registration, age: int | None, at: str) -> list[TransactItem]:
        """One registration's deletion, as one transaction's items."""
        ...

    def waitlist_items(self, race_id: str, event_id: str) -> list[TransactItem]:
        """Every entry and offer of the event's waitlist, deleted."""
        ...

    def ballot_items(self, race_id: str, event_id: str) -> Iterator[TransactItem]:
        """Every application of the event's ballot and its address's claim, deleted (streamed)."""
        ...

    def mark_purged_item(self, race: Race, at: datetime) -> TransactItem: ...


class RetentionPurge:
    def __init__(
        self,
        store: RetentionStore,
        races: RaceStore,
        transact: Callable[[list[TransactItem]], None],
        audit: AuditEntries,
        ledger: LedgerStore,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._ledger = ledger
        self._store = store
        self._races = races
        self._transact = transact
        self._audit = audit
        self._clock = clock

    def run(self, time_left_s: Callable[[], float]) -> dict[str, int]:
        """Purge every race that is due, as far as time allows; counts of what was done."""
        now = self._clock()
        today = now.date()
        counts: Counter[str] = Counter(races=0, registrations=0, unfinished=0)
        oldest_due = (today - timedelta(days=MIN_RETENTION_DAYS)).isoformat()
        for race in self._store.unpurged_races(oldest_due):
            if purge_due(race) > today:
                continue
            if not self._purge(race, now, time_left_s, counts):
                counts["unfinished"] += 1
                break
            counts["races"] += 1
        return dict(counts)

    def _forget_ledger_ids(self, reg: Registration, at: str) -> None:
        if not reg.ledgerRefundedCents:
            return  # no refund made: no entry carries a provider id (a refused or pending one has none)
        items = self._ledger.forget_provider_ids_items(reg.registrationId, at)
        for start in range(0, len(items), LEDGER_ITEMS_PER_TRANSACTION):
            self._transact(items[start : start + LEDGER_ITEMS_PER_TRANSACTION])

    def _purge(self, race: Race, now: datetime, time_left_s: Callable[[], float], counts: Counter[str]) -> bool:
        found = self._races.get_race(race.raceId)
        if found is None:
            return True
        race, events = found
        race_day = date.fromisoformat(race.raceDate)
        at = now.isoformat()
        done = 0
        for event in events:
            for reg in self._store.unpurged_registrations(race.raceId, event.eventId):
                if time_left_s() < TIME_MARGIN_S:
                    logger.info("retention purge paused", extra={"raceId": race.raceId, "purged": done})
                    counts["registrations"] += done
                    return False
                self._forget_ledger_ids(reg, at)
                self._transact(self._store.purge_items(reg, age_on_race_day(reg, race_day), at))
                done += 1
            # The waitlist's entries after the event's registrations: deleting one twice (a resumed
            # run) changes nothing, so a run stopped anywhere is finished by the next.
            entries = self._store.waitlist_items(race.raceId, event.eventId)
            for start in range(0, len(entries), LEDGER_ITEMS_PER_TRANSACTION):
                self._transact(entries[start : start + LEDGER_ITEMS_PER_TRANSACTION])
            # The ballot's applications (racecap.ballot) the same way, in chunks as they are read.
            chunk: list[TransactItem] = []
            for item in self._store.ballot_items(race.raceId, event.eventId):
                chunk.append(item)
                if len(chunk) == LEDGER_ITEMS_PER_TRANSACTION:
                    if time_left_s() < TIME_MARGIN_S:
                        counts["registrations"] += done
                        return False
                    self._transact(chunk)
                    chunk = []
            if chunk:
                self._transact(chunk)
        counts["registrations"] += done
        self._transact(
            [
                self._store.mark_purged_item(race, now),
                self._audit.item(
                    RETENTION_JOB,
                    race.raceId,
                    "race.personalDataDeleted",
                    race.raceId,
                    retentionDays=race.retentionDays,
                    registrationsPurgedThisRun=done,
                ),
            ]
        )
        metrics.add_metric(name="RacesPurged", unit="Count", value=1)
        logger.info(
            "personal data deleted",
            extra={"raceId": race.raceId, "raceDate": race.raceDate, "retentionDays": race.retentionDays},
        )
        return True
