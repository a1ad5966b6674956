"""The provider's real limits (issue 37): Stripe's 25 requests/s per endpoint under the account's
limit, and the API's budgets that keep every runner clear of them.

The Stripe stand-in plays a live account: 100 requests/s in all, 25/s to any one endpoint. Two
hundred runners start paying at once; the API's budgets (shared through the stack's Redis) pace
the intents' creation, answer the rest 429 + Retry-After while their places stay held, and the
provider never answers 429 to anyone.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from racecap.config import PAYMENT_ENDPOINTS
from racecap.holds.models import HoldPhase
from racecap.ratelimit import RequestBudget
from requests.adapters import HTTPAdapter

from local.environments import LOCAL_CONCURRENCY
from local.stack import LocalStack
from tests.integration.conftest import Backend, api_session
from tests.integration.flows import concurrently, event_ids, hold, runner, spend_payment_budget, standin
from tests.integration.latency import machine
from tools.audit import local_provider

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

RUNNERS = 200
CREATE = "POST /v1/payment_intents"
RETRIEVE = "GET /v1/payment_intents/:id"
# The budgets in the stack's environment (the blueprint's defaults): slots 1.1/24 s apart.
ENDPOINT_INTERVAL_S = 1.1 / 24


def _slots(backend: Backend, key: str) -> list[int]:
    """The account's slots still ahead, in microseconds (the members of its sorted set)."""
    return [int(str(member)) for member in backend.redis.zrange(key, 0, -1)]


def _stats(stack: LocalStack) -> dict[str, Any]:
    return dict(standin(stack).get(f"{stack.stripe_url}/_standin/stats").json())


@pytest.fixture
def live_account(stack: LocalStack) -> Iterator[None]:
    """The stand-in as a live Stripe account during the test, its limits put back after."""
    control = standin(stack)
    url = f"{stack.stripe_url}/_standin/ratelimit"
    before = control.post(url, json={}).json()
    control.post(url, json={"per_second": 100, "per_endpoint": 25, "endpoints": {}}).raise_for_status()
    time.sleep(1.0)  # the sliding second holds nothing from before
    yield
    control.post(url, json=before).raise_for_status()


def test_given_200_runners_starting_to_pay_at_once_then_none_meets_the_providers_429_and_every_place_is_kept(
    stack: LocalStack, backend: Backend, live_account: None
) -> None:
    race_id = backend.create_race([RUNNERS])
    api = api_session(stack)
    api.mount("http://", HTTPAdapter(pool_connections=4, pool_maxsize=RUNNERS))
    (event_id,) = event_ids(api, race_id)
    # The places first, as many at a time as the stack has environments, after one alone: on a
    # fresh stack sixteen cold starts at once (behind 200 requests) ran past the function's
    # timeout on a loaded machine. This warms the environments the payment step then runs in.
    first = hold(api, race_id, event_id)
    assert first.status_code == 201 and api.delete(f"/api/holds/{first.json()['holdId']}").status_code == 204
    holds = concurrently(lambda _: hold(api, race_id, event_id), list(range(RUNNERS)), workers=LOCAL_CONCURRENCY)
    assert Counter(h.status_code for h in holds) == {201: RUNNERS}, [h.text for h in holds if h.status_code != 201]
    # The budget met for certain: its next second spent as everyone starts. Two hundred at once
    # meet it by themselves only with more environments than the budget's half-second of slots
    # (11 at 24/s); make test's stacks run 8 each (docs/local-stack.md), as a reserved
    # concurrency would on AWS.
    everyone_ready = threading.Barrier(RUNNERS, action=lambda: spend_payment_budget(stack, 1.0), timeout=60)
    before = _stats(stack)

    def start_paying(held: requests.Response) -> dict[str, Any]:
        hold_id = held.json()["holdId"]
        body = runner(token=None)  # the details; the card form comes after
        everyone_ready.wait()
        busy: list[tuple[int, str, str | None]] = []
        for _ in range(60):
            answer = api.post(f"/api/holds/{hold_id}/registration", json=body)
            if answer.status_code != 429:
                return {"hold": hold_id, "answer": answer, "busy": busy, "at": time.monotonic()}
            busy.append((answer.status_code, answer.json().get("error"), answer.headers.get("Retry-After")))
            # As the site does: wait what Retry-After says, spread a little so retries do not march together.
            time.sleep(float(answer.headers.get("Retry-After") or 1) * random.uniform(0.5, 1.5))
        return {"hold": hold_id, "answer": answer, "busy": busy, "at": time.monotonic()}

    started = time.monotonic()
    with ThreadPoolExecutor(RUNNERS) as pool:
        runners = list(pool.map(start_paying, holds))
    span = max(r["at"] for r in runners) - started
    after = _stats(stack)

    # The budget slots creations at the endpoint's pace, so the provider's limit is met only by
    # jitter: a call stalled in flight past the budget's headroom lands beside the next second's
    # (seen in fresh clones: 5 and 10 of 200 at load 2-3, 27 at load 5.3, when make test's own
    # stack and burst share two cores). How many is a property of the machine's stalls, not of
    # the code, so the bound is loose: a quarter, where a budget that did not pace would meet
    # most of them (200 at once against 25/s: ~175 refused).
    # Each was retried inside the adapter (Stripe's advice), and every runner still got the card
    # form for its own place with one intent (below): a refusal by the budget never reached it.
    refused = after["rateLimited"] - before["rateLimited"]
    assert refused <= RUNNERS // 4, (refused, span, after["rateLimitedBy"], machine())
    # The budget did refuse: 429 TOO_MANY_REQUESTS with Retry-After, and those runners asked again.
    busy = [b for r in runners for b in r["busy"]]
    retried = [r for r in runners if r["busy"]]
    assert busy and retried, "200 at once never met the budget"
    assert {(status, error) for status, error, _ in busy} == {(429, "TOO_MANY_REQUESTS")}, Counter(busy)
    assert all(retry_after is not None and int(retry_after) >= 1 for _, _, retry_after in busy), Counter(busy)
    # Everyone got the card form for their own place, the ones who retried included.
    outcomes = Counter((r["answer"].status_code, r["answer"].json().get("status")) for r in runners)
    assert outcomes == {(200, "PAYMENT_REQUIRED"): RUNNERS}, outcomes
    assert all(r["answer"].json().get("clientSecret") for r in runners)
    # Every place kept, none sold twice: the cap's 200 places are these 200 holds, each PAYING
    # with one intent of its own at the provider; the next runner finds the race sold out.
    kept = {r["hold"] for r in runners}
    usage = backend.inventory().usage(race_id, event_id, consistent=True)
    assert len(kept) == RUNNERS and (usage.cap, usage.taken) == (RUNNERS, RUNNERS)
    phases = Counter(h.status for h in map(backend.holds().get, kept) if h is not None)
    assert phases == {HoldPhase.PAYING: RUNNERS}, phases
    intents = local_provider(stack).intents(race_id)
    assert sorted(i["metadata"]["holdId"] for i in intents) == sorted(kept)
    sold_out = api.post(f"/api/races/{race_id}/events/{event_id}/holds")
    assert (sold_out.status_code, sold_out.json()["error"]) == (409, "SOLD_OUT")
    # At the endpoint's pace, never faster: 200 creations need 199 slots after the first.
    assert span >= 199 * ENDPOINT_INTERVAL_S * 0.95, span
    print(
        f"\n[budget] {RUNNERS} runners in {span:.1f}s ({RUNNERS / span:.1f} intents/s); {len(retried)} retried after "
        f"{len(busy)} 429s with Retry-After; the provider answered {refused} 429s, retried ({machine()})"
    )


def test_the_shared_budgets_script_paces_each_endpoint_and_lets_the_others_into_the_accounts_gaps(
    backend: Backend,
) -> None:
    """The script behind every environment's budget, on the stack's Redis, from as many threads
    as the API has environments, for a live account: 90/s in all, 24/s per endpoint. Judged on
    the slots it hands out, exactly (the stand-in above judges arrivals, which a loaded machine
    jitters: 200 threads of one process sending at their slots clumped past Stripe's 25 there)."""
    key = f"test-budget-{time.time_ns()}"
    budget = RequestBudget(lambda: backend.redis, 90, 24, key=key)
    account, creations = "{" + key + "}:account", "{" + key + "}:" + CREATE
    endpoint_us, account_us = round(1.1 / 24 * 1e6), round(1.1 / 90 * 1e6)

    # 200 creations at once, each taking whatever slot it is given.
    waits = concurrently(lambda _: budget.reserve(CREATE, 60.0), list(range(RUNNERS)), workers=LOCAL_CONCURRENCY)
    assert budget.shared and max(waits) < 60.0
    # The endpoint's pace, not the account's: ~9 s for 200, where the account alone allows 2.4 s.
    # (A slot in the past is dropped as others are asked for: the set holds those still ahead.)
    slots = _slots(backend, account)
    assert len(slots) > RUNNERS / 2 and min(b - a for a, b in itertools.pairwise(slots)) >= endpoint_us
    assert max(waits) == pytest.approx(199 * endpoint_us / 1e6, abs=1.0)

    # A retrieve asked now is not queued behind them: it takes a gap between two creations.
    assert budget.reserve(RETRIEVE, 0.5) <= endpoint_us / 1e6
    # A creation refused (its slot is 9 s out) leaves nothing behind in either limit.
    ahead, last = set(_slots(backend, account)), backend.redis.get(creations)
    assert budget.reserve(CREATE, 0.5) > 8
    assert set(_slots(backend, account)) <= ahead and backend.redis.get(creations) == last

    # Every endpoint at once, more than the account allows together: its slots stay apart.
    mixed = RequestBudget(lambda: backend.redis, 90, 24, key=key + "-mixed")
    endpoints = sorted(PAYMENT_ENDPOINTS)
    waits = concurrently(
        lambda i: mixed.reserve(endpoints[i % len(endpoints)], 60.0), list(range(320)), workers=LOCAL_CONCURRENCY
    )
    slots = _slots(backend, "{" + key + "-mixed}:account")
    assert len(slots) > 160 and min(b - a for a, b in itertools.pairwise(slots)) >= account_us
    # 40 calls to each of 8 endpoints: the account's pace bounds them (319 x 1.1/90 s = 3.9 s),
    # not each endpoint's (39 x 1.1/24 s = 1.8 s).
    assert max(waits) == pytest.approx(319 * account_us / 1e6, abs=1.0)
