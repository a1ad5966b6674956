"""The shared request budget in front of the payment provider: the account's limit and each
endpoint's, as Stripe counts them (on the fake provider, a fake clock and the per-process
budget; the Redis script is driven in tests/integration/test_payment_budget.py)."""

from __future__ import annotations

import heapq
import inspect
import itertools
from pathlib import Path
from typing import Any

import pytest
import redis
from pydantic import ValidationError
from racecap.config import PAYMENT_ENDPOINTS, Settings
from racecap.payments.budget import ENDPOINTS, LimitedPaymentProvider
from racecap.payments.port import IntentStatus, NewIntent, PaymentIntent, PaymentProvider, PaymentRateLimited
from racecap.ratelimit import LocalSlotLimiter, RequestBudget

from tests.fakes.payments import FakePaymentProvider

CREATE = "POST /v1/payment_intents"
RETRIEVE = "GET /v1/payment_intents/:id"


class Slots:
    """A budget that hands out the waits it is given, and records each endpoint reserved."""

    def __init__(self, *waits: float) -> None:
        self.waits = list(waits)
        self.endpoints: list[str] = []

    def reserve(self, endpoint: str, max_wait_s: float) -> float:
        self.endpoints.append(endpoint)
        return self.waits.pop(0) if self.waits else 0.0


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class _DeadRedis:
    def __getattr__(self, name: str) -> Any:
        def fail(*_a: Any, **_k: Any) -> Any:
            raise redis.ConnectionError("down")

        return fail


def budget(clock: Clock, account: float, endpoint: float, **kw: Any) -> RequestBudget:
    """The budget with Redis down and one instance: its per-process form at the full rates."""
    return RequestBudget(_DeadRedis, account, endpoint, key="test", max_instances=1, clock=clock, **kw)  # type: ignore[arg-type]


def _create(p: LimitedPaymentProvider, key: str = "k1") -> PaymentIntent:
    return p.create_intent(
        NewIntent(amount_cents=2500, currency="usd", metadata={"holdId": key}, description="t"), idempotency_key=key
    )


# -- the wrapper ---------------------------------------------------------------------------------
def test_a_near_slot_is_waited_for_then_the_call_goes_through() -> None:
    slept: list[float] = []
    fake = FakePaymentProvider()
    p = LimitedPaymentProvider(fake, Slots(0.2).reserve, max_wait_s=0.5, sleep=slept.append)
    intent = _create(p)
    assert slept == [0.2]
    assert fake.retrieve_intent(intent.id).status == IntentStatus.REQUIRES_PAYMENT_METHOD


def test_a_far_slot_is_refused_with_retry_after_and_nothing_reaches_the_provider() -> None:
    fake = FakePaymentProvider()
    p = LimitedPaymentProvider(fake, Slots(3.0).reserve, max_wait_s=0.5, sleep=lambda _: None)
    with pytest.raises(PaymentRateLimited) as limited:
        _create(p, "hold-1")
    assert limited.value.retry_after == 3.0
    assert fake.find_intents(hold_id="hold-1") == []


def test_every_provider_call_reserves_in_its_own_endpoint_as_stripe_counts_them_but_a_webhook_does_not() -> None:
    fake = FakePaymentProvider()
    slots = Slots()
    p = LimitedPaymentProvider(fake, slots.reserve, sleep=lambda _: None)
    intent = _create(p, "hold-2")
    p.retrieve_intent(intent.id)
    p.update_intent_amount(intent.id, 2000, idempotency_key="u")
    p.confirm_intent(intent.id, payment_method="pm_card_visa", idempotency_key="c")
    p.find_intents(hold_id="hold-2")
    p.refund(intent_id=intent.id, idempotency_key="r")
    assert len(list(p.list_events(types=["payment_intent.succeeded"], created_after=0))) >= 1
    other = _create(p, "hold-3")
    p.cancel_intent(other.id, idempotency_key="x")
    assert slots.endpoints == [
        CREATE,
        RETRIEVE,
        "POST /v1/payment_intents/:id",
        "POST /v1/payment_intents/:id/confirm",
        "GET /v1/payment_intents/search",
        "POST /v1/refunds",
        "GET /v1/events",
        CREATE,
        "POST /v1/payment_intents/:id/cancel",
    ]
    payload = b'{"id":"evt_1","type":"x","created":1,"data":{"object":{}}}'
    p.parse_webhook(payload, fake.sign(payload))
    assert len(slots.endpoints) == 9


def test_every_call_of_the_port_has_an_endpoint_the_settings_know() -> None:
    calls = {name for name, _ in inspect.getmembers(PaymentProvider, inspect.isfunction) if not name.startswith("_")}
    assert set(ENDPOINTS) == calls - {
        "parse_webhook",
        "admitted",
    }  # a webhook is Stripe calling us; admitted calls none
    assert set(ENDPOINTS.values()) == PAYMENT_ENDPOINTS
    assert len(set(ENDPOINTS.values())) == len(ENDPOINTS)  # no two calls share an endpoint


# -- the budget: two limits at once --------------------------------------------------------------
def _run(b: RequestBudget, clock: Clock, arrivals: list[tuple[float, str]], max_wait: float = 0.5) -> dict[str, Any]:
    """Callers arriving at (time, endpoint), each sending at its slot or, refused, asking again
    after the wait it was told (as a runner does after Retry-After). Returns the sends and the
    refusals."""
    queue = [(t, i, endpoint) for i, (t, endpoint) in enumerate(arrivals)]
    heapq.heapify(queue)
    sends: list[tuple[float, str]] = []
    refused = 0
    while queue:
        t, i, endpoint = heapq.heappop(queue)
        clock.now = t
        wait = b.reserve(endpoint, max_wait)
        if wait <= max_wait:
            sends.append((t + wait, endpoint))
        else:
            refused += 1
            heapq.heappush(queue, (t + wait, i, endpoint))
    return {"sends": sorted(sends), "refused": refused}


def _most_in_a_second(times: list[float]) -> int:
    times = sorted(times)
    return max((sum(1 for u in times[i:] if u - t < 1.0) for i, t in enumerate(times)), default=0)


def test_given_a_live_account_when_200_creations_arrive_at_once_then_they_go_at_the_endpoints_pace() -> None:
    clock = Clock()
    b = budget(clock, account=90, endpoint=24)  # live: 100/s less headroom; Stripe's 25/s per endpoint

    run = _run(b, clock, [(clock.now, CREATE)] * 200)

    sends = [t for t, _ in run["sends"]]
    assert len(sends) == 200 and run["refused"] > 0
    gaps = [b - a for a, b in itertools.pairwise(sends)]
    assert min(gaps) >= 1.1 / 24 - 1e-6  # the endpoint's spacing, not the account's (1.1/90)
    assert _most_in_a_second(sends) <= 22  # under Stripe's 25 in any second, headroom kept
    assert sends[-1] - sends[0] == pytest.approx(199 * 1.1 / 24, abs=0.01)


def test_a_queue_of_creations_does_not_hold_up_the_other_endpoints() -> None:
    clock = Clock()
    b = budget(clock, account=90, endpoint=24)
    taken = [b.reserve(CREATE, 0.5) for _ in range(11)]  # the creations fill the next half second
    assert taken[-1] == pytest.approx(10 * 1.1 / 24, abs=1e-5) and b.reserve(CREATE, 0.5) > 0.5

    # A retrieve asked now goes within one account slot, between the creations: not behind them.
    assert b.reserve(RETRIEVE, 0.5) == pytest.approx(1.1 / 90, abs=1e-5)
    assert b.reserve("GET /v1/events", 0.5) == pytest.approx(2 * 1.1 / 90, abs=1e-5)


def test_the_accounts_limit_holds_over_every_endpoint_together() -> None:
    clock = Clock()
    b = budget(clock, account=24, endpoint=24)  # test mode: 25/s for the whole account too
    endpoints = sorted(PAYMENT_ENDPOINTS)

    run = _run(b, clock, [(clock.now + i * 0.01, endpoints[i % len(endpoints)]) for i in range(120)])

    sends = run["sends"]
    assert len(sends) == 120
    assert min(b - a for (a, _), (b, _) in itertools.pairwise(sends)) >= 1.1 / 24 - 1e-6
    assert _most_in_a_second([t for t, _ in sends]) <= 22
    for endpoint in endpoints:
        assert _most_in_a_second([t for t, e in sends if e == endpoint]) <= 22


def test_a_refusal_by_the_endpoint_takes_no_slot_in_the_account() -> None:
    clock = Clock()
    b = budget(clock, account=24, endpoint=24)
    assert b.reserve(CREATE, 0.5) == 0.0
    for _ in range(50):  # the creations' endpoint is full for the next half second: refused
        assert b.reserve(CREATE, 0.04) > 0.04
    # The account has room right after the one creation taken, as if the refusals never happened.
    assert b.reserve(RETRIEVE, 0.5) == pytest.approx(1.1 / 24, abs=1e-5)


def test_a_refusal_by_the_account_takes_no_slot_in_the_endpoint() -> None:
    clock = Clock()
    b = budget(clock, account=2, endpoint=24)  # the account: one call each 0.55 s
    assert b.reserve(CREATE, 0.5) == 0.0
    for _ in range(50):
        assert b.reserve(RETRIEVE, 0.5) == pytest.approx(0.55)  # refused: the account is full
    clock.now += 0.1
    # The retrieve's endpoint kept no slot for the refusals: only the account's wait is left.
    assert b.reserve(RETRIEVE, 0.5) == pytest.approx(0.45)


def test_an_endpoint_stripe_raised_goes_at_the_accounts_pace() -> None:
    clock = Clock()
    b = budget(clock, account=90, endpoint=24, endpoint_rates={CREATE: 90})

    run = _run(b, clock, [(clock.now, CREATE)] * 90 + [(clock.now, RETRIEVE)] * 30)

    creates = [t for t, e in run["sends"] if e == CREATE]
    assert min(b - a for a, b in itertools.pairwise(creates)) == pytest.approx(1.1 / 90, abs=1e-5)
    assert _most_in_a_second([t for t, e in run["sends"] if e == RETRIEVE]) <= 22


def test_given_redis_down_each_instance_keeps_to_its_share_of_both_limits() -> None:
    clock = Clock()
    b = RequestBudget(_DeadRedis, 90, 24, key="test", max_instances=2, clock=clock)  # type: ignore[arg-type]

    assert [b.reserve(CREATE, 0.5) for _ in range(3)] == pytest.approx([0.0, 2 * 1.1 / 24, 4 * 1.1 / 24], abs=1e-5)
    assert b.reserve(RETRIEVE, 0.5) == pytest.approx(2 * 1.1 / 90, abs=1e-5)
    assert not b.shared


def test_a_refused_reservation_takes_no_slot_so_the_next_caller_is_not_pushed_out() -> None:
    now = [100.0]
    limiter = LocalSlotLimiter(2.0, clock=lambda: now[0])  # slots 0.5 s apart
    assert limiter.reserve(max_wait_s=0.6) == 0.0  # taken: now
    assert limiter.reserve(max_wait_s=0.6) == 0.5  # taken: 0.5 s out
    for _ in range(50):  # an opening's retries, each refused (1 s out > 0.6 s)
        assert limiter.reserve(max_wait_s=0.6) == pytest.approx(1.0)
    now[0] += 0.5
    # Half a second later the next slot is 0.5 s out, as if the refusals never happened.
    assert limiter.reserve(max_wait_s=0.6) == pytest.approx(0.5)


# -- the settings --------------------------------------------------------------------------------
def _settings(**env: str) -> Settings:
    from local.stack import LocalStack

    return Settings.model_validate({**LocalStack(Path("/nonexistent")).function_env(), **env})


def test_by_default_every_endpoint_has_the_same_budget_and_none_is_raised() -> None:
    s = _settings()
    assert (s.payments_endpoint_rate_per_second, s.payments_endpoint_rates) == (24.0, {})


def test_the_endpoints_stripe_raised_are_read_by_name() -> None:
    s = _settings(PAYMENTS_ENDPOINT_RATES=" POST /v1/payment_intents=80,  GET  /v1/payment_intents/:id = 60 ,")
    assert s.payments_endpoint_rates == {CREATE: 80.0, RETRIEVE: 60.0}


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("PAYMENTS_ENDPOINT_RATES", "POST /v1/payment_intent=80", "not an endpoint Racecap calls"),
        ("PAYMENTS_ENDPOINT_RATES", "POST /v1/payment_intents", "write ENDPOINT=RATE"),
        ("PAYMENTS_ENDPOINT_RATES", "POST /v1/payment_intents=0", "positive"),
        ("PAYMENTS_ENDPOINT_RATE_PER_SECOND", "0", "greater than 0"),
    ],
)
def test_a_malformed_endpoint_budget_fails_at_cold_start(variable: str, value: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        _settings(**{variable: value})
