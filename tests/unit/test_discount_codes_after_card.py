"""A discount code applied or removed after the card step started, on fakes: the hold's one
PaymentIntent changes its amount (never a second intent), the payment then equals the new
price, and every way it can go wrong (paid meanwhile, the provider not answering, expiry)
leaves the code's uses right."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from racecap.codes.models import CodeTerms
from racecap.codes.service import Discounts, code_uses, shard_caps
from racecap.codes.store import StoredCode
from racecap.errors import Busy, CodeError, CodeTooLate, HoldExpired
from racecap.holds.code_tally import CodeTally
from racecap.holds.models import HoldPhase
from racecap.payments.port import IntentStatus
from racecap.registration.models import PaidRegistration

from tests.fakes.codes import FakeCodes
from tests.fakes.races import local_cache
from tests.unit.core_world import World, request

PRICE = 2500


@pytest.fixture
def world() -> World:
    w = World()
    w.race(caps=(3,), price_cents=PRICE)
    return w


@pytest.fixture
def codes(world: World) -> FakeCodes:
    store = FakeCodes(world.tables)
    for code, terms, uses in (
        ("TWENTY", CodeTerms(kind="PERCENT", percent=20), 5),
        ("FIVE", CodeTerms(kind="AMOUNT", amountCents=500), None),
        ("FREE", CodeTerms(kind="PERCENT", percent=100), None),
        ("TINY", CodeTerms(kind="AMOUNT", amountCents=PRICE - 10), None),
    ):
        store.create(
            [
                StoredCode(
                    raceId="race-1",
                    code=code,
                    terms=terms,
                    maxUses=uses,
                    shards=shard_caps(uses),
                    createdAt=datetime.now(UTC),
                )
            ],
            {},
        )
    return store


@pytest.fixture
def discounts(world: World, codes: FakeCodes) -> Discounts:
    return Discounts(codes, world.code_holds, world.catalog, world.payments)  # type: ignore[arg-type]


def _paying(world: World) -> str:
    """A hold at the card step: details sent, its intent created, nothing paid."""
    hold_id = world.hold_service.hold("race-1", "ev0").holdId
    accepted = world.registration.register(hold_id, request(card=None))
    assert accepted.status == "PAYMENT_REQUIRED"
    return hold_id


def _intents(world: World, hold_id: str) -> list:
    return [i for i in world.payments.intents if i.metadata.get("holdId") == hold_id]


def _pay(world: World, hold_id: str) -> PaidRegistration:
    (intent,) = _intents(world, hold_id)
    world.payments.confirm_intent(intent.id, payment_method="pm_card_visa", idempotency_key=f"pay-{intent.id}")
    world.registration.confirm(hold_id)
    (message,) = world.queue.sent
    assert isinstance(message, PaidRegistration)
    return message


def test_a_code_on_the_card_step_changes_the_one_intents_amount_and_the_charge_is_the_discounted_price(
    world: World, discounts: Discounts
) -> None:
    hold_id = _paying(world)
    discounts.apply(hold_id, "twenty")
    (intent,) = _intents(world, hold_id)
    assert intent.amount_cents == 2000
    hold = world.holds.get(hold_id)
    assert hold is not None and hold.attempt is not None
    assert (hold.code, hold.amountCents, hold.attempt.amountCents, hold.listCents, hold.reprice) == (
        "TWENTY",
        2000,
        2000,
        PRICE,
        None,
    )
    assert world.tables.code_uses("race-1", "TWENTY") == 1
    # The card step shows the new amount on the same intent.
    assert world.registration.payment_step(hold_id).amountCents == 2000
    message = _pay(world, hold_id)
    assert (message.amountCents, message.code, message.discountCents) == (2000, "TWENTY", 500)
    assert len(_intents(world, hold_id)) == 1 and world.payments.refunds == []
    assert world.tables.code_uses("race-1", "TWENTY") == 1


def test_a_code_removed_on_the_card_step_puts_the_price_back_and_its_use_back(
    world: World, discounts: Discounts
) -> None:
    hold_id = _paying(world)
    discounts.apply(hold_id, "TWENTY")
    discounts.remove(hold_id)
    (intent,) = _intents(world, hold_id)
    assert intent.amount_cents == PRICE
    assert world.tables.code_uses("race-1", "TWENTY") == 0
    message = _pay(world, hold_id)
    assert (message.amountCents, message.code, message.discountCents) == (PRICE, None, None)


def test_codes_switched_back_and_forth_each_change_the_amount_under_their_own_key(
    world: World, discounts: Discounts
) -> None:
    """A key per change: applying TWENTY again after removing it must change the amount again,
    which a key derived from the amount alone would only replay."""
    hold_id = _paying(world)
    discounts.apply(hold_id, "TWENTY")
    discounts.apply(hold_id, "FIVE")  # replaces it: TWENTY's use goes back
    assert world.tables.code_uses("race-1", "TWENTY") == 0 and world.tables.code_uses("race-1", "FIVE") == 1
    discounts.remove(hold_id)
    discounts.apply(hold_id, "TWENTY")
    (intent,) = _intents(world, hold_id)
    assert intent.amount_cents == 2000
    assert world.tables.code_uses("race-1", "TWENTY") == 1 and world.tables.code_uses("race-1", "FIVE") == 0
    assert _pay(world, hold_id).amountCents == 2000


def test_paid_meanwhile_the_code_is_refused_with_409_and_its_use_given_back(world: World, discounts: Discounts) -> None:
    hold_id = _paying(world)
    (intent,) = _intents(world, hold_id)
    world.payments.confirm_intent(intent.id, payment_method="pm_card_visa", idempotency_key="pay")
    with pytest.raises(CodeTooLate) as refused:
        discounts.apply(hold_id, "TWENTY")
    assert refused.value.status == 409 and "went through" in refused.value.message
    assert world.tables.code_uses("race-1", "TWENTY") == 0
    hold = world.holds.get(hold_id)
    assert hold is not None and hold.reprice is None and hold.code is None
    assert world.registration.payment_succeeded(world.payments.retrieve_intent(intent.id)) == "queued"
    (message,) = world.queue.sent
    assert isinstance(message, PaidRegistration) and message.amountCents == PRICE


def test_an_intent_cancelled_meanwhile_answers_that_the_hold_expired_and_gives_the_use_back(
    world: World, discounts: Discounts
) -> None:
    hold_id = _paying(world)
    (intent,) = _intents(world, hold_id)
    world.payments.cancel_intent(intent.id, idempotency_key="sweeper")
    with pytest.raises(HoldExpired):
        discounts.apply(hold_id, "TWENTY")
    assert world.tables.code_uses("race-1", "TWENTY") == 0


def test_a_provider_that_does_not_answer_leaves_the_change_for_the_retry_which_finishes_it(
    world: World, discounts: Discounts
) -> None:
    hold_id = _paying(world)
    world.payments.fail_next = 1
    with pytest.raises(Busy):
        discounts.apply(hold_id, "TWENTY")
    hold = world.holds.get(hold_id)
    assert hold is not None and hold.reprice is not None and hold.amountCents == PRICE
    assert world.tables.code_uses("race-1", "TWENTY") == 1  # taken with the change, not twice
    discounts.apply(hold_id, "TWENTY")  # the runner's retry
    (intent,) = _intents(world, hold_id)
    hold = world.holds.get(hold_id)
    assert hold is not None and hold.reprice is None and (hold.code, hold.amountCents) == ("TWENTY", 2000)
    assert intent.amount_cents == 2000 and world.tables.code_uses("race-1", "TWENTY") == 1


def test_paid_at_the_new_amount_before_the_call_heard_the_webhook_finishes_the_change(
    world: World, discounts: Discounts
) -> None:
    hold_id = _paying(world)
    world.payments.fail_after_next = 1  # the amount changes; the caller does not hear
    with pytest.raises(Busy):
        discounts.apply(hold_id, "TWENTY")
    (intent,) = _intents(world, hold_id)
    assert intent.amount_cents == 2000
    world.payments.confirm_intent(intent.id, payment_method="pm_card_visa", idempotency_key="pay")
    assert world.registration.payment_succeeded(world.payments.retrieve_intent(intent.id)) == "queued"
    (message,) = world.queue.sent
    assert isinstance(message, PaidRegistration)
    assert (message.amountCents, message.code, message.discountCents) == (2000, "TWENTY", 500)
    assert world.payments.refunds == [] and world.tables.code_uses("race-1", "TWENTY") == 1


def test_paid_at_the_old_amount_with_a_change_under_way_the_change_is_dropped(
    world: World, discounts: Discounts
) -> None:
    hold_id = _paying(world)
    world.payments.fail_next = 1  # the change is recorded, the provider never asked
    with pytest.raises(Busy):
        discounts.apply(hold_id, "TWENTY")
    (intent,) = _intents(world, hold_id)
    world.payments.confirm_intent(intent.id, payment_method="pm_card_visa", idempotency_key="pay")
    assert world.registration.payment_succeeded(world.payments.retrieve_intent(intent.id)) == "queued"
    (message,) = world.queue.sent
    assert isinstance(message, PaidRegistration) and (message.amountCents, message.code) == (PRICE, None)
    assert world.payments.refunds == [] and world.tables.code_uses("race-1", "TWENTY") == 0


def test_an_unpaid_hold_expiring_with_a_change_under_way_gives_every_use_back(
    world: World, discounts: Discounts
) -> None:
    hold_id = _paying(world)
    discounts.apply(hold_id, "FIVE")
    world.payments.fail_next = 1
    with pytest.raises(Busy):
        discounts.apply(hold_id, "TWENTY")  # FIVE on the hold, TWENTY under way: two uses
    assert world.tables.code_uses("race-1", "FIVE") == 1 and world.tables.code_uses("race-1", "TWENTY") == 1
    hold = world.holds.get(hold_id)
    assert hold is not None
    world.sweeper.sweep(hold.expiresAt + timedelta(minutes=31))
    hold = world.holds.get(hold_id)
    assert hold is not None and hold.status == HoldPhase.EXPIRED
    assert world.tables.code_uses("race-1", "FIVE") == 0 and world.tables.code_uses("race-1", "TWENTY") == 0
    (intent,) = _intents(world, hold_id)
    assert intent.status == IntentStatus.CANCELED


def test_a_code_making_a_paying_place_free_is_refused_and_changes_nothing(world: World, discounts: Discounts) -> None:
    hold_id = _paying(world)
    with pytest.raises(CodeTooLate) as refused:
        discounts.apply(hold_id, "FREE")
    assert "free" in refused.value.message and "before your details" in refused.value.message
    (intent,) = _intents(world, hold_id)
    assert intent.amount_cents == PRICE and world.tables.code_uses("race-1", "FREE") == 0


def test_a_discounted_price_under_the_providers_minimum_is_refused_on_the_card_step_too(
    world: World, discounts: Discounts
) -> None:
    hold_id = _paying(world)
    with pytest.raises(CodeError) as refused:
        discounts.apply(hold_id, "TINY")
    assert refused.value.status == 400 and "less than the payment provider can charge" in refused.value.message
    (intent,) = _intents(world, hold_id)
    assert intent.amount_cents == PRICE and world.tables.code_uses("race-1", "TINY") == 0


def test_the_directors_stats_list_each_codes_uses_against_its_limit(
    world: World, codes: FakeCodes, discounts: Discounts
) -> None:
    discounts.apply(world.hold_service.hold("race-1", "ev0").holdId, "TWENTY")
    discounts.apply(_paying(world), "FIVE")
    # No Redis here: the stats read the shards, as they do when the copy cannot be read.
    no_copy = CodeTally(local_cache().shared)
    assert [(u.code, u.used, u.limit) for u in code_uses(codes, no_copy, "race-1")] == [
        ("FIVE", 1, None),
        ("FREE", 0, None),
        ("TINY", 0, None),
        ("TWENTY", 1, 5),
    ]
    assert code_uses(codes, no_copy, "race-without-codes") == []
