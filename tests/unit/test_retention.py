"""The retention job on fakes: what it deletes, what it keeps, when, and how it resumes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest
from racecap.errors import Conflict
from racecap.races.rules import purge_due
from racecap.retention.service import RETENTION_JOB, RetentionPurge

from tests.fakes.catalog import FakeAudit
from tests.fakes.retention import FakeRetention
from tests.unit.core_world import DIRECTOR, World, request

RACE_DAY = date(2025, 5, 1)


def _world(retention_days: int = 60, runners: int = 3) -> World:
    w = World()
    w.race(caps=(5,), raceDate=RACE_DAY.isoformat(), retentionDays=retention_days)
    for i in range(runners):
        hold_id = w.hold_service.hold("race-1", "ev0").holdId
        w.registration.register(hold_id, request(email=f"runner{i}@example.com"))
    assert w.write_queued() == []
    return w


def _job(w: World, on: date) -> tuple[RetentionPurge, FakeRetention]:
    store = FakeRetention(w.tables, w.catalog)
    at = datetime(on.year, on.month, on.day, 3, 0, tzinfo=UTC)
    audit, ledger = FakeAudit(w.tables), w.ledger_store
    job = RetentionPurge(store, store, w.tables.transact, audit, ledger, clock=lambda: at)  # type: ignore[arg-type]
    return job, store


def _race(w: World):  # type: ignore[no-untyped-def]
    return w.catalog.races["race-1"][0]


def test_the_day_is_the_race_date_plus_the_directors_retention_days_and_not_a_day_earlier():
    w = _world(retention_days=60)
    assert purge_due(_race(w)) == RACE_DAY + timedelta(days=60)
    job, _ = _job(w, RACE_DAY + timedelta(days=59))
    assert job.run(lambda: 900) == {"races": 0, "registrations": 0, "unfinished": 0}
    assert all(r.email and r.purgedAt is None for r in w.tables.regs.values())
    job, _ = _job(w, RACE_DAY + timedelta(days=60))
    assert job.run(lambda: 900) == {"races": 1, "registrations": 3, "unfinished": 0}


def test_the_default_keeps_personal_data_a_year():
    w = World()
    w.race(raceDate=RACE_DAY.isoformat())
    assert _race(w).retentionDays == 365 and purge_due(_race(w)) == date(2026, 5, 1)


def test_a_purge_deletes_emails_dates_of_birth_payment_ids_claims_and_holds_and_keeps_what_results_publish():
    w = _world()
    before = {r.registrationId: r for r in w.tables.regs.values()}
    job, _ = _job(w, RACE_DAY + timedelta(days=61))
    job.run(lambda: 900)
    for rid, after in w.tables.regs.items():
        was = before[rid]
        assert (after.email, after.dateOfBirth, after.chargeId, after.refundId, after.disputeId) == (
            "",
            "",
            "",
            None,
            None,
        )
        assert after.purgedAt and after.ageOnRaceDay == 35  # born 1990-01-01, raced 2025-05-01
        kept = ("firstName", "lastName", "bib", "eventId", "status", "amountCents", "confirmedAt", "raceName")
        assert [after[k] for k in kept] == [was[k] for k in kept]
    assert not w.tables.emails and not w.tables.holds
    assert w.tables.stats[("race-1", "ev0")]["confirmed"] == 3  # the stats stay
    assert _race(w).purgedAt is not None
    entry = w.tables.audit[-1]
    assert entry["actor"] == RETENTION_JOB.sub and entry["action"] == "race.personalDataDeleted"


def test_a_second_run_changes_nothing_and_a_purged_registration_cannot_be_cancelled():
    w = _world()
    job, _ = _job(w, RACE_DAY + timedelta(days=61))
    job.run(lambda: 900)
    snapshot = dict(w.tables.regs)
    assert job.run(lambda: 900) == {"races": 0, "registrations": 0, "unfinished": 0}
    assert w.tables.regs == snapshot
    rid = next(iter(w.tables.regs))
    with pytest.raises(Conflict, match="retention period is over"):
        w.cancellations.cancel(DIRECTOR, _race(w), rid)


def test_a_run_that_dies_mid_race_or_runs_out_of_time_leaves_it_unmarked_and_the_next_run_finishes():
    w = _world(runners=4)
    job, store = _job(w, RACE_DAY + timedelta(days=61))
    store.fail_after = 2
    with pytest.raises(RuntimeError):
        job.run(lambda: 900)
    assert sum(1 for r in w.tables.regs.values() if r.purgedAt) == 2 and _race(w).purgedAt is None
    store.fail_after = None
    clock = iter([900, 5])  # time for one more, then under the margin
    assert job.run(lambda: next(clock)) == {"races": 0, "registrations": 1, "unfinished": 1}
    assert _race(w).purgedAt is None
    assert job.run(lambda: 900) == {"races": 1, "registrations": 1, "unfinished": 0}
    assert all(r.purgedAt for r in w.tables.regs.values()) and _race(w).purgedAt is not None


def test_a_purged_registrations_payment_seen_again_is_not_refunded_as_an_orphan():
    """Reconciliation reaches back over its overlap and Stripe redelivers webhooks: a payment
    whose hold the purge (or TTL) deleted must not look like money with no place."""
    w = _world(runners=1)
    (reg,) = w.tables.regs.values()
    intent = w.payments.retrieve_intent(reg.chargeId)
    job, _ = _job(w, RACE_DAY + timedelta(days=61))
    job.run(lambda: 900)
    assert w.holds.get(reg.holdId) is None
    assert w.registration.payment_succeeded(intent) == "already"
    # A second payment for a registration that exists and was not purged is still an orphan.
    w2 = _world(runners=1)
    (reg2,) = w2.tables.regs.values()
    w2.tables.holds.pop(reg2.holdId)
    other = replace(w2.payments.retrieve_intent(reg2.chargeId), id="pi_second")
    assert w2.registration.payment_succeeded(other) == "orphan"
    assert w2.registration.payment_succeeded(w2.payments.retrieve_intent(reg2.chargeId)) == "already"


def test_a_purge_empties_the_provider_ids_on_the_ledgers_refunds_too():
    w = _world()
    first, second, _ = sorted(w.tables.regs)
    w.ledger.refund(DIRECTOR, _race(w), first, 500, "late start")
    w.ledger.refund(DIRECTOR, _race(w), first, 700)
    w.cancellations.cancel(DIRECTOR, _race(w), second, refund="AMOUNT", amount_cents=1000)
    assert sum(1 for e in w.ledger_store.entries.values() if e.providerId.startswith("re_")) == 3
    job, _ = _job(w, RACE_DAY + timedelta(days=61))
    job.run(lambda: 900)
    entries = list(w.ledger_store.entries.values())
    assert len(entries) == 3 and {e.providerId for e in entries} == {""}
    assert [e.amountCents for e in w.ledger_store.refunds(first)] == [500, 700]  # the amounts stay


def test_a_purge_deletes_every_waitlist_entry_and_offer_of_the_race_whatever_its_state_and_keeps_other_races():
    from racecap.waitlist.models import Offer, WaitlistEntry

    w = _world()
    job, store = _job(w, RACE_DAY + timedelta(days=61))

    def entry(race: str, n: int, state: str) -> WaitlistEntry:
        return WaitlistEntry(entryId=f"e{n}", raceId=race, eventId="ev0", state=state, email=f"w{n}@x.io",  # type: ignore[arg-type]
                             firstName="W", lastName="L", joinedAt="2025-04-01T00:00:00+00:00")  # fmt: skip

    for n, state in enumerate(("PENDING", "WAITING", "LEFT", "REMOVED")):
        store.waitlist.items[("race-1", "ev0", f"e{n}")] = entry("race-1", n, state)
    store.waitlist.items[("race-2", "ev0", "e9")] = entry("race-2", 9, "WAITING")
    store.waitlist.offer_items[("race-1", "ev0", "e1")] = Offer(
        entryId="e1", raceId="race-1", eventId="ev0", state="CLAIMED", seq=1, shard="SHARD#000", email="w1@x.io",
        offeredAt="2025-04-02T00:00:00+00:00", expiresAt="2025-04-04T00:00:00+00:00", priceCents=2500,
    )  # fmt: skip
    job.run(lambda: 900)
    assert list(store.waitlist.items) == [("race-2", "ev0", "e9")]
    assert store.waitlist.offer_items == {}  # an offer carries the address it was made to
