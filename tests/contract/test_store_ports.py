"""The hold and registration stores' contract: the same cases against the in-memory fakes
and the DynamoDB adapters on DynamoDB Local, so the fakes the unit tests use cannot drift."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from racecap.aws.transactions import ConditionFailed
from racecap.holds.models import (
    Attempt,
    BeginOutcome,
    Hold,
    HoldPhase,
    Reprice,
)
from racecap.registration.models import PaidRegistration, RegistrationPhase
from racecap.registration.store import CounterMoved, DuplicateRegistration

from tests.contract.stores_under_test import StoresUnderTest

SHARDS = ["SHARD#000", "SHARD#001"]
NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def race() -> str:
    return f"race-{uuid.uuid4().hex[:10]}"


def _hold(race: str, *, minutes: int = 10, event: str = "ev") -> Hold:
    token = uuid.uuid4().hex
    return Hold(
        holdId=f"hold_{token}",
        registrationId=f"reg_{token}",
        raceId=race,
        eventId=event,
        status=HoldPhase.HELD,
        createdAt=NOW,
        expiresAt=NOW + timedelta(minutes=minutes),
    )


def _attempt(email: str, key: str | None = None) -> Attempt:
    return Attempt(key or uuid.uuid4().hex, email, "Ann", "Lee", "1990-01-01", 2500, "USD", NOW.isoformat())


_EVENTS: set[tuple[str, str]] = set()


def _held(s: StoresUnderTest, race: str, **kw) -> Hold:
    if (s.name, race) not in _EVENTS:  # each test's race gets its event once
        _EVENTS.add((s.name, race))
        s.add_event(race, "ev", [5, 5])
    got = s.holds.claim(_hold(race, **kw), SHARDS)
    assert got is not None
    return got


def _paid(hold: Hold, attempt: Attempt) -> PaidRegistration:
    return PaidRegistration(
        registrationId=hold.registrationId,
        holdId=hold.holdId,
        raceId=hold.raceId,
        eventId=hold.eventId,
        email=attempt.email,
        firstName=attempt.firstName,
        lastName=attempt.lastName,
        dateOfBirth=attempt.dateOfBirth,
        amountCents=attempt.amountCents,
        currency=attempt.currency,
        chargeId="pi_1",
        raceName="Race",
        raceDate="2027-01-01",
        eventName="10K",
        paidAt=NOW.isoformat(),
    )


def _paying(s: StoresUnderTest, race: str, email: str, intent: str | None = None) -> tuple[Hold, Attempt]:
    hold = _held(s, race)
    attempt = _attempt(email)
    assert s.attempts.begin_payment(hold, attempt, NOW, intent_id=intent) == BeginOutcome.STARTED
    return hold, attempt


def _reprice(code: str | None, amount: int, shard: str | None = "SHARD#000") -> Reprice:
    return Reprice(
        changeId=uuid.uuid4().hex[:16], code=code, shard=shard if code else None, amountCents=amount, listCents=2500
    )


# -- holds ----------------------------------------------------------------------------------------
def test_claims_fill_the_shards_exactly_then_refuse(stores, race):
    stores.add_event(race, "ev", [2, 1])
    held = [stores.holds.claim(_hold(race), SHARDS) for _ in range(3)]
    assert all(h is not None and h.shard in SHARDS for h in held)
    assert stores.holds.claim(_hold(race), SHARDS) is None
    assert stores.taken(race, "ev") == 3
    first = held[0]
    assert first is not None
    assert stores.holds.get(first.holdId) == first


def test_the_price_taken_with_the_place_reads_back_with_the_hold(stores, race):
    stores.add_event(race, "ev", [1])
    priced = _hold(race).model_copy(update={"amountCents": 50, "currency": "JPY"})
    assert stores.holds.claim(priced, SHARDS) is not None
    found = stores.holds.get(priced.holdId)
    assert found is not None and (found.amountCents, found.currency) == (50, "JPY")


def test_a_full_shard_is_remembered_in_avoid(stores, race):
    stores.add_event(race, "ev", [0, 1])
    avoid: set[str] = set()
    got = stores.holds.claim(_hold(race), SHARDS, avoid=avoid)
    assert got is not None and got.shard == "SHARD#001"
    assert stores.holds.claim(_hold(race), SHARDS, avoid=avoid) is None
    assert avoid == set(SHARDS)


def test_a_release_gives_the_place_back_once(stores, race):
    hold = _held(stores, race)
    assert stores.holds.release(hold, HoldPhase.RELEASED)
    assert not stores.holds.release(hold, HoldPhase.RELEASED)
    found = stores.holds.get(hold.holdId)
    assert found is not None and found.status == HoldPhase.RELEASED
    assert stores.taken(race, "ev") == 0


def test_a_hold_expires_only_once_its_time_is_up(stores, race):
    hold = _held(stores, race)
    assert not stores.holds.release(hold, HoldPhase.EXPIRED, now=NOW)
    assert stores.holds.release(hold, HoldPhase.EXPIRED, now=NOW + timedelta(minutes=11))
    assert stores.taken(race, "ev") == 0


def test_begin_payment_claims_the_email_once_per_race(stores, race):
    hold, attempt = _paying(stores, race, "ann@example.com")
    assert stores.attempts.begin_payment(hold, attempt, NOW) == BeginOutcome.STARTED  # the same attempt again
    assert stores.attempts.begin_payment(hold, _attempt("ann@example.com"), NOW) == BeginOutcome.HOLD_GONE
    other = _held(stores, race)
    assert stores.attempts.begin_payment(other, _attempt("ann@example.com"), NOW) == BeginOutcome.EMAIL_TAKEN
    found = stores.holds.get(hold.holdId)
    assert found is not None and found.status == HoldPhase.PAYING and found.attempt == attempt


def test_a_payment_begins_with_its_intent_recorded_and_a_hold_records_one(stores, race):
    """The intent is created before the begin and recorded by it (issue 38: one write, no turn):
    the same attempt with the same intent begins again (a replay), another intent never."""
    hold = _held(stores, race)
    attempt = _attempt("tu@example.com")
    assert stores.attempts.begin_payment(hold, attempt, NOW, intent_id="pi_one") == BeginOutcome.STARTED
    found = stores.holds.get(hold.holdId)
    assert found is not None and (found.status, found.intentId) == (HoldPhase.PAYING, "pi_one")
    assert stores.attempts.begin_payment(hold, attempt, NOW, intent_id="pi_one") == BeginOutcome.STARTED
    assert stores.attempts.begin_payment(hold, attempt, NOW, intent_id="pi_two") == BeginOutcome.HOLD_GONE
    # A declined card puts it back to HELD with its intent: a later attempt begins only with that one.
    stores.attempts.payment_declined(found, attempt)
    other = _attempt("tv@example.com")
    assert stores.attempts.begin_payment(hold, other, NOW, intent_id="pi_two") == BeginOutcome.HOLD_GONE
    assert stores.attempts.begin_payment(_held(stores, race), other, NOW) == BeginOutcome.STARTED  # no claim left
    found = stores.holds.get(hold.holdId)
    assert found is not None and (found.status, found.intentId, found.attempt) == (HoldPhase.HELD, "pi_one", None)


def test_an_expired_hold_cannot_begin_paying(stores, race):
    hold = _held(stores, race)
    late = NOW + timedelta(minutes=11)
    assert stores.attempts.begin_payment(hold, _attempt("late@example.com"), late) == BeginOutcome.HOLD_GONE


def test_a_decline_keeps_the_place_and_frees_the_email(stores, race):
    hold, attempt = _paying(stores, race, "bo@example.com")
    stores.attempts.payment_declined(hold, attempt)
    found = stores.holds.get(hold.holdId)
    assert found is not None and (found.status, found.attempt) == (HoldPhase.HELD, None)
    assert stores.taken(race, "ev") == 1
    other = _held(stores, race)
    assert stores.attempts.begin_payment(other, _attempt("bo@example.com"), NOW) == BeginOutcome.STARTED
    with pytest.raises(ConditionFailed):
        stores.attempts.payment_declined(hold, attempt)  # no longer paying


def test_an_abandoned_payment_frees_place_and_email(stores, race):
    hold, attempt = _paying(stores, race, "cy@example.com")
    assert stores.attempts.abandon_payment(hold, attempt)
    assert not stores.attempts.abandon_payment(hold, attempt)
    found = stores.holds.get(hold.holdId)
    assert found is not None and found.status == HoldPhase.EXPIRED
    assert stores.taken(race, "ev") == 0
    assert stores.attempts.begin_payment(_held(stores, race), _attempt("cy@example.com"), NOW) == BeginOutcome.STARTED


def test_a_queued_hold_keeps_its_expiry_in_the_sweepers_view_and_waits_there_for_its_resend_time(stores, race):
    """Queued, a hold's index keys are not moved (issue 38: two index units per registration):
    the sweeper finds it at its expiry, as when it was paying; not due for a re-send yet, it is
    keyed by its re-send time from then on."""
    hold, attempt = _paying(stores, race, "di@example.com")  # expires at NOW + 10 min
    held = _held(stores, race, minutes=1)
    expiry = hold.expiresAt
    due = NOW + timedelta(hours=1)
    stores.attempts.mark_queued(hold, attempt, "pi_9", NOW, due)
    stores.attempts.mark_queued(hold, attempt, "pi_9", NOW, due)  # a repeat is harmless
    found = stores.holds.get(hold.holdId)
    assert found is not None
    assert (found.status, found.chargeId, found.queuedAt, found.requeueAt) == (HoldPhase.QUEUED, "pi_9", NOW, due)
    before = {h.holdId for h in stores.holds.expired(expiry - timedelta(seconds=1))}
    assert hold.holdId not in before and held.holdId in before
    assert hold.holdId in {h.holdId for h in stores.holds.expired(expiry)}  # at its expiry, as before
    # A stale view (another re-send time) moves nothing.
    stores.attempts.await_requeue(found.model_copy(update={"requeueAt": due + timedelta(hours=1)}))
    assert hold.holdId in {h.holdId for h in stores.holds.expired(expiry)}
    stores.attempts.await_requeue(found)
    stores.attempts.await_requeue(found)  # two sweepers that looked: the same key
    assert hold.holdId not in {h.holdId for h in stores.holds.expired(due - timedelta(seconds=1))}
    # Still unconfirmed at its re-send time: the sweeper sees it again.
    assert hold.holdId in {h.holdId for h in stores.holds.expired(due)}


def test_one_of_many_sweepers_claims_a_due_resend_and_a_confirmed_hold_is_never_resent(stores, race):
    hold, attempt = _paying(stores, race, "dj@example.com")
    due = NOW + timedelta(minutes=5)
    stores.attempts.mark_queued(hold, attempt, "pi_10", NOW, due)
    seen = stores.holds.get(hold.holdId)
    assert seen is not None
    later = due + timedelta(minutes=10)
    assert stores.attempts.postpone_requeue(seen, later)
    assert not stores.attempts.postpone_requeue(seen, later)  # a second sweeper read the same due time
    found = stores.holds.get(hold.holdId)
    assert found is not None and (found.requeueAt, found.requeues) == (later, 1)
    assert hold.holdId not in {h.holdId for h in stores.holds.expired(due)}  # past its expiry too
    assert hold.holdId in {h.holdId for h in stores.holds.expired(later)}
    # Confirmed by the writer: out of the index, and a stale view cannot claim it.
    stores.regs.confirm_batch(race, "ev", stores.regs.next_bib(race, "ev"), [_paid(found, attempt)], NOW.isoformat())
    assert hold.holdId not in {h.holdId for h in stores.holds.expired(later + timedelta(days=1))}
    assert not stores.attempts.postpone_requeue(found, later + timedelta(hours=1))


# -- registrations ----------------------------------------------------------------------------------
def _confirm(stores: StoresUnderTest, race: str, n: int) -> list:
    paid = [_paid(*_paying(stores, race, f"r{uuid.uuid4().hex[:8]}@example.com")) for _ in range(n)]
    first = stores.regs.next_bib(race, "ev")
    return stores.regs.confirm_batch(race, "ev", first, paid, NOW.isoformat())


def test_a_batch_takes_consecutive_bibs_and_confirms_holds_and_emails(stores, race):
    regs = _confirm(stores, race, 3)
    assert [r.bib for r in regs] == [1, 2, 3]
    assert stores.regs.next_bib(race, "ev") == 4
    assert [r.bib for r in _confirm(stores, race, 2)] == [4, 5]
    assert stores.regs.existing([r.registrationId for r in regs] + ["reg_none"]) == {r.registrationId: r for r in regs}
    assert stores.regs.get(regs[0].registrationId) == regs[0]
    hold = stores.holds.get(regs[0].holdId)
    assert hold is not None and (hold.status, hold.bib) == (HoldPhase.CONFIRMED, 1)
    assert stores.regs.by_email(race, regs[1].email) == regs[1]
    assert stores.regs.stats(race, "ev") == {
        "confirmed": 5, "revenueCents": 12500, "cancelled": 0, "refundedCents": 0, "cancelledCents": 0,
        "outsideRefunds": 0, "cancelledByRunners": 0, "cancelledByOrganiser": 0, "cancelledByProvider": 0,
        "cancelledBySystem": 0, "transfers": 0, "otherPaidCents": 0, "switchedIn": 0, "switchedOut": 0, "deferred": 0,
        "soldOutAt": 0,
    }  # fmt: skip
    assert sum(stores.regs.per_minute(race, "ev", NOW.strftime("%Y-%m-%dT%H:%M")).values()) == 5


def test_the_moment_an_event_first_sold_out_is_kept_once(stores, race):
    first, later = NOW, NOW + timedelta(minutes=3)
    assert stores.holds.mark_sold_out(race, "ev", first) is True
    assert stores.holds.mark_sold_out(race, "ev", later) is False
    assert stores.regs.stats(race, "ev")["soldOutAt"] == int(first.timestamp() * 1000)


def test_a_stale_counter_or_a_duplicate_writes_nothing(stores, race):
    (done,) = _confirm(stores, race, 1)
    fresh = _paid(*_paying(stores, race, f"new-{race}@example.com"))
    with pytest.raises(CounterMoved):
        stores.regs.confirm_batch(race, "ev", 1, [fresh], NOW.isoformat())
    again = PaidRegistration.model_validate(done.model_dump())
    with pytest.raises(DuplicateRegistration):
        stores.regs.confirm_batch(race, "ev", 2, [fresh, again], NOW.isoformat())
    assert stores.regs.get(fresh.registrationId) is None
    assert stores.regs.next_bib(race, "ev") == 2


def test_directors_read_an_event_in_bib_order(stores, race):
    regs = _confirm(stores, race, 5)
    page, more = stores.regs.event_page(race, "ev", 0, 2)
    assert ([r["bib"] for r in page], more) == ([1, 2], True)
    page, more = stores.regs.event_page(race, "ev", 3, 5)
    assert ([r["bib"] for r in page], more) == ([4, 5], False)
    assert [r["registrationId"] for r in stores.regs.event_rows(race, "ev", 1)] == [r.registrationId for r in regs[1:]]
    row = stores.regs.by_bib(race, "ev", 3)
    assert row is not None and (row["email"], row["status"], row["amountCents"]) == (regs[2].email, "CONFIRMED", 2500)
    assert stores.regs.by_bib(race, "ev", 9) is None


def test_a_cancellation_moves_place_email_and_counters_once(stores, race):
    (reg,) = _confirm(stores, race, 1)
    stores.transact([stores.cancel_store.begin_cancel_item(reg.registrationId, NOW.isoformat(), "dir")])
    with pytest.raises(ConditionFailed):
        stores.transact([stores.cancel_store.begin_cancel_item(reg.registrationId, NOW.isoformat(), "dir")])
    cancelling = stores.regs.get(reg.registrationId)
    assert cancelling is not None and cancelling.status == RegistrationPhase.CANCELLING
    hold = stores.holds.get(reg.holdId)
    assert hold is not None
    stores.transact(stores.cancel_store.finish_cancel_items(cancelling, hold, "re_1", NOW.isoformat()))
    with pytest.raises(ConditionFailed):
        stores.transact(stores.cancel_store.finish_cancel_items(cancelling, hold, "re_1", NOW.isoformat()))
    done = stores.regs.get(reg.registrationId)
    assert done is not None and (done.status, done.refundId) == (RegistrationPhase.CANCELLED, "re_1")
    assert stores.taken(race, "ev") == 0
    assert stores.regs.by_email(race, reg.email) is None
    # The cancelled registration's payment stays in the gross (cancelledCents), refunded in full.
    assert stores.regs.stats(race, "ev") == {
        "confirmed": 0, "revenueCents": 0, "cancelled": 1, "refundedCents": 2500, "cancelledCents": 2500,
        "outsideRefunds": 0, "cancelledByRunners": 0, "cancelledByOrganiser": 1, "cancelledByProvider": 0,
        "cancelledBySystem": 0, "transfers": 0, "otherPaidCents": 0, "switchedIn": 0, "switchedOut": 0, "deferred": 0,
        "soldOutAt": 0,
    }  # fmt: skip
    again = _held(stores, race)
    assert stores.attempts.begin_payment(again, _attempt(reg.email), NOW) == BeginOutcome.STARTED


@pytest.mark.parametrize(
    ("by", "counter"),
    [
        ("runner", "cancelledByRunners"),
        ("payment-provider", "cancelledByProvider"),
        ("system-sweeper", "cancelledBySystem"),
        ("dir", "cancelledByOrganiser"),
    ],
)
def test_a_cancellation_counts_under_who_cancelled_it_beside_the_total(stores, race, by, counter):
    (reg,) = _confirm(stores, race, 1)
    stores.transact([stores.cancel_store.begin_cancel_item(reg.registrationId, NOW.isoformat(), by)])
    cancelling = stores.regs.get(reg.registrationId)
    hold = stores.holds.get(reg.holdId)
    assert cancelling is not None and hold is not None
    stores.transact(stores.cancel_store.finish_cancel_items(cancelling, hold, "re_1", NOW.isoformat()))
    split = {k: v for k, v in stores.regs.stats(race, "ev").items() if k.startswith("cancelledBy")}
    assert split == {k: int(k == counter) for k in split} and len(split) == 4
    assert stores.regs.stats(race, "ev")["cancelled"] == 1


def test_an_undone_cancellation_is_confirmed_again(stores, race):
    (reg,) = _confirm(stores, race, 1)
    stores.transact([stores.cancel_store.begin_cancel_item(reg.registrationId, NOW.isoformat(), "dir")])
    stores.transact([stores.cancel_store.undo_cancel_item(reg.registrationId)])
    back = stores.regs.get(reg.registrationId)
    assert back is not None and (back.status, back.cancelledBy) == (RegistrationPhase.CONFIRMED, None)


# -- a discount code changed after the card step (racecap.codes) ---------------------------------
def test_a_code_change_on_a_paying_hold_is_one_at_a_time_and_finishes_once(stores, race):
    stores.add_code(race, "SAVE", [1])
    stores.add_code(race, "MORE", [1])
    hold, attempt = _paying(stores, race, "di@example.com", "pi_contract")
    paying = stores.holds.get(hold.holdId)
    assert paying is not None
    change = _reprice("SAVE", 2000)
    stores.code_holds.begin_reprice(paying, change)
    assert stores.code_uses(race, "SAVE") == 1
    with pytest.raises(ConditionFailed) as busy:  # one change at a time
        stores.code_holds.begin_reprice(paying, _reprice("MORE", 1500))
    assert busy.value.first == 0 and stores.code_uses(race, "MORE") == 0
    # The details sent again meanwhile would write the old price back: told to wait instead.
    assert stores.attempts.begin_payment(paying, attempt, NOW) == BeginOutcome.HOLD_GONE
    assert stores.holds.finish_reprice(paying, change)
    assert not stores.holds.finish_reprice(paying, change)
    assert not stores.holds.undo_reprice(paying, change)
    done = stores.holds.get(hold.holdId)
    assert done is not None and done.attempt is not None
    assert (done.code, done.codeShard, done.amountCents, done.listCents, done.attempt.amountCents, done.reprice) == (
        "SAVE",
        "SHARD#000",
        2000,
        2500,
        2000,
        None,
    )
    assert done.status == HoldPhase.PAYING and stores.code_uses(race, "SAVE") == 1


def test_a_code_change_refused_or_on_a_used_up_code_gives_back_what_it_took(stores, race):
    stores.add_code(race, "SAVE", [1])
    stores.add_code(race, "MORE", [1])
    hold, _ = _paying(stores, race, "ed@example.com", "pi_contract")
    paying = stores.holds.get(hold.holdId)
    assert paying is not None
    change = _reprice("MORE", 1500)
    stores.code_holds.begin_reprice(paying, change)
    with_change = stores.holds.get(hold.holdId)
    assert with_change is not None and with_change.reprice == change
    assert stores.holds.undo_reprice(paying, change)
    assert not stores.holds.finish_reprice(paying, change)
    undone = stores.holds.get(hold.holdId)
    assert undone is not None and (undone.code, undone.amountCents, undone.reprice) == (None, paying.amountCents, None)
    assert stores.code_uses(race, "MORE") == 0
    stores.code_holds.begin_reprice(paying, _reprice("SAVE", 2000))
    other, _ = _paying(stores, race, "fy@example.com", "pi_other")
    other_paying = stores.holds.get(other.holdId)
    assert other_paying is not None
    with pytest.raises(ConditionFailed) as used_up:
        stores.code_holds.begin_reprice(other_paying, _reprice("SAVE", 2000))
    assert used_up.value.first == 1 and stores.code_uses(race, "SAVE") == 1


def test_an_abandoned_payment_with_a_code_change_under_way_gives_both_uses_back(stores, race):
    stores.add_code(race, "SAVE", [2])
    stores.add_code(race, "MORE", [2])
    hold, attempt = _paying(stores, race, "gu@example.com", "pi_contract")
    paying = stores.holds.get(hold.holdId)
    assert paying is not None
    first = _reprice("SAVE", 2000)
    stores.code_holds.begin_reprice(paying, first)
    assert stores.holds.finish_reprice(paying, first)
    with_save = stores.holds.get(hold.holdId)
    assert with_save is not None
    stores.code_holds.begin_reprice(with_save, _reprice("MORE", 1500))
    assert (stores.code_uses(race, "SAVE"), stores.code_uses(race, "MORE")) == (1, 1)
    assert not stores.attempts.abandon_payment(with_save, attempt)  # read before the change: refused
    now_hold = stores.holds.get(hold.holdId)
    assert now_hold is not None and now_hold.attempt is not None
    assert stores.attempts.abandon_payment(now_hold, now_hold.attempt)
    assert (stores.code_uses(race, "SAVE"), stores.code_uses(race, "MORE")) == (0, 0)
    assert stores.taken(race, "ev") == 0
