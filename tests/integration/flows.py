"""A runner's steps over HTTP, for the integration tests (the same calls the site makes)."""

from __future__ import annotations

import functools
import random
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
import requests
from racecap.payments.wiring import PAYMENTS_BUDGET_KEY
from racecap.ratelimit import RequestBudget
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

import blueprint
from local.stack import LocalStack
from tools.audit import AuditReport, audit_until_clean


def runner(email: str | None = None, token: str | None = "pm_card_visa") -> dict[str, str]:
    body = {
        "email": email or f"runner-{uuid.uuid4().hex[:10]}@example.com",
        "firstName": "Ada",
        "lastName": "Lovelace",
        "dateOfBirth": "1990-12-10",
        "paymentMethod": token,
    }
    return {k: v for k, v in body.items() if v is not None}  # type: ignore[misc]


def event_ids(api: requests.Session, race_id: str) -> list[str]:
    return [e["eventId"] for e in api.get(f"/api/races/{race_id}").json()["events"]]


def hold(api: requests.Session, race_id: str, event_id: str) -> requests.Response:
    return api.post(f"/api/races/{race_id}/events/{event_id}/holds")


def register(api: requests.Session, hold_id: str, body: dict[str, Any], *, patience: int = 20) -> requests.Response:
    """The details (and, in these tests, a PaymentMethod to confirm on the server). Like the
    site, a 429 from the provider's shared budget is waited out (Retry-After): the place is kept."""
    for _ in range(patience):
        resp = api.post(f"/api/holds/{hold_id}/registration", json=body)
        if resp.status_code != 429 or resp.json().get("error") != "TOO_MANY_REQUESTS":
            return resp
        time.sleep(min(5.0, float(resp.headers.get("Retry-After", "1"))) * (0.5 + random.random()))
    return resp


def confirm(api: requests.Session, hold_id: str) -> requests.Response:
    return api.post(f"/api/holds/{hold_id}/payment/confirm")


# -- the Stripe stand-in, as the browser (Stripe.js) and the dashboard reach it --------------------
def standin(stack: LocalStack) -> requests.Session:
    from local.stripe_standin.server import Keys

    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {Keys().secret}"
    # The stand-in's 25 requests/s are the account's, shared with the stack, whose own calls
    # are paced at 24/s: a reconciliation tick paging through a session's events leaves the
    # tests almost nothing for a second or two. Back off and retry a 429, as Stripe's docs advise
    # (a refused request was not applied, so retrying a POST is safe).
    retry = Retry(
        total=12, status_forcelist=(429,), allowed_methods=None, backoff_factor=0.2, backoff_max=2.0,
        respect_retry_after_header=True, raise_on_status=False,
    )  # fmt: skip
    session.mount("http://", HTTPAdapter(max_retries=retry))
    session.request = functools.partial(session.request, timeout=15)  # type: ignore[method-assign]
    return session


def browser_pays(stack: LocalStack, intent_id: str, payment_method: str = "pm_card_visa") -> dict[str, Any]:
    """What Stripe.js's confirmPayment does with the card the runner typed (a decline is a 402)."""
    resp = standin(stack).post(
        f"{stack.stripe_url}/v1/payment_intents/{intent_id}/confirm", data={"payment_method": payment_method}
    )
    body = resp.json()
    return body if resp.status_code == 200 else body["error"]["payment_intent"]


def intents_for(stack: LocalStack, *, hold_id: str) -> list[dict[str, Any]]:
    resp = standin(stack).get(
        f"{stack.stripe_url}/v1/payment_intents/search",
        params={"query": f"metadata['holdId']:'{hold_id}'", "limit": 100},
    )
    resp.raise_for_status()
    return list(resp.json()["data"])


def webhooks(stack: LocalStack, **knobs: Any) -> dict[str, Any]:
    resp = standin(stack).post(f"{stack.stripe_url}/_standin/webhooks", json=knobs)
    resp.raise_for_status()
    return dict(resp.json())


def deliveries(stack: LocalStack) -> list[dict[str, Any]]:
    return list(standin(stack).get(f"{stack.stripe_url}/_standin/webhooks").json()["deliveries"])


def hold_and_register(api: requests.Session, race_id: str, event_id: str, body: dict[str, Any]) -> tuple[str, str]:
    h = hold(api, race_id, event_id)
    assert h.status_code == 201, h.text
    r = register(api, h.json()["holdId"], body)
    assert r.status_code == 202, r.text
    return h.json()["holdId"], r.json()["registrationId"]


def wait_confirmed(api: requests.Session, registration_ids: list[str], timeout: float = 60) -> dict[str, dict]:
    """Poll like the waiting screen (but fast) until every registration is confirmed."""
    deadline = time.monotonic() + timeout
    done: dict[str, dict] = {}
    while time.monotonic() < deadline and len(done) < len(registration_ids):
        for rid in registration_ids:
            if rid in done:
                continue
            resp = api.get(f"/api/registrations/{rid}")
            if resp.status_code == 200 and resp.json()["status"] == "CONFIRMED":
                done[rid] = resp.json()
        if len(done) < len(registration_ids):
            time.sleep(0.3)
    missing = set(registration_ids) - set(done)
    assert not missing, f"{len(missing)} registrations not confirmed within {timeout}s"
    return done


def concurrently(fn: Any, args: list[Any], workers: int = 32) -> list[Any]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, args))


def wait_for_audit(stack: LocalStack, backend: Any, race_id: str, timeout: float = 90) -> AuditReport:
    """Audit once the queues have drained (emails are rate-limited, so this can take a while)."""
    return audit_until_clean(stack, backend.dynamodb, backend.sqs, race_id, timeout_s=timeout)


def standin_faults(stack: LocalStack, **knobs: Any) -> None:
    standin(stack).post(f"{stack.stripe_url}/_standin/faults", json=knobs).raise_for_status()


def spend_payment_budget(stack: LocalStack, seconds: float) -> None:
    """Take the payment budget's slots for the next ``seconds``, through the same budget the
    functions share (its key, its rates), as intent creations: calls in that time wait or are
    refused, whatever their endpoint (the account's slots are all taken)."""
    client = redis.Redis(port=stack.ports.redis)
    budget = RequestBudget(
        lambda: client,
        float(blueprint.param("PaymentsRatePerSecond").default),
        float(blueprint.param("PaymentsEndpointRatePerSecond").default),
        key=PAYMENTS_BUDGET_KEY,
    )
    while budget.reserve("POST /v1/payment_intents", seconds + 1) < seconds:
        pass
