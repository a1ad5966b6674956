"""The Stripe stand-in, driven by the official ``stripe`` SDK pointed at it (its API base).

The stand-in runs as its own process, as in the local stack; a small receiver in the test
process plays Racecap's webhook endpoint and checks signatures with the SDK.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
import stripe

import blueprint
from local import servers
from local.stripe_standin.server import Keys

pytestmark = pytest.mark.integration

KEYS = Keys()


class Receiver:
    """Racecap's webhook endpoint, played by the test: records verified events in order."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.fail_next = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                payload = self.rfile.read(int(self.headers["Content-Length"]))
                try:
                    stripe.Webhook.construct_event(payload, self.headers.get("Stripe-Signature"), KEYS.webhook_secret)
                    status = 200
                except stripe.SignatureVerificationError:
                    status = 400
                with receiver.lock:
                    if status == 200 and receiver.fail_next > 0:
                        receiver.fail_next -= 1
                        status = 503
                    if status == 200:
                        receiver.events.append(json.loads(payload))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/payments/webhook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, predicate: Any, timeout: float = 15.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate(self.events):
                    return list(self.events)
            time.sleep(0.05)
        with self.lock:
            pytest.fail(f"webhooks never matched; got {[e['type'] for e in self.events]}")


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver) -> Iterator[str]:
    port = servers.free_port()
    # No rate limit but in the test that sets one: these tests come faster than 25 requests/s.
    cmd = [
        sys.executable,
        "-m",
        "local.stripe_standin",
        "--port",
        str(port),
        "--webhook-url",
        receiver.url,
        "--rate-limit",
        "0",
        "--endpoint-rate-limit",
        "0",
    ]
    log_dir: Path = tmp_path_factory.mktemp("stripe")
    proc = servers.spawn("stripe", cmd, port, log_dir, env={"PYTHONPATH": str(blueprint.ROOT)}, cwd=blueprint.ROOT)
    yield proc.endpoint
    proc.stop()


@pytest.fixture
def client(standin: str) -> stripe.StripeClient:
    return stripe.StripeClient(
        KEYS.secret,
        base_addresses={"api": standin},
        max_network_retries=3,
        http_client=stripe.RequestsClient(timeout=10),
    )


@pytest.fixture
def control(standin: str) -> Iterator[Any]:
    """POST to the stand-in's test controls; every knob is put back afterwards."""

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = requests.post(f"{standin}/_standin/{path}", json=body, headers={"Authorization": f"Bearer {KEYS.secret}"})
        assert r.status_code == 200, r.text
        return r.json()

    yield post
    post("ratelimit", {"per_second": 0, "per_endpoint": 0, "endpoints": {}})
    post("faults", {"fail_next": 0, "fail_after_next": 0, "latency_s": 0})
    post("webhooks", {"delay_s": 0, "duplicate": 0, "reorder": False, "paused": False})


def new_intent(client: stripe.StripeClient, key: str | None = None, **params: Any) -> stripe.PaymentIntent:
    params = {
        "amount": 2500,
        "currency": "eur",
        "payment_method_types": ["card"],
        "metadata": {"holdId": key or "h-" + str(time.monotonic_ns())},
        **params,
    }
    return client.v1.payment_intents.create(params=params, options={"idempotency_key": key} if key else {})


def test_test_cards_succeed_decline_and_ask_for_3ds(client: stripe.StripeClient, standin: str) -> None:
    paid = new_intent(client, payment_method="pm_card_visa", confirm=True)
    assert (paid.status, paid.amount_received) == ("succeeded", 2500)
    assert paid.latest_charge and paid.latest_charge.startswith("ch_")

    pi = new_intent(client)
    for pm, decline in (
        ("pm_card_chargeDeclined", "generic_decline"),
        ("pm_card_chargeDeclinedInsufficientFunds", "insufficient_funds"),
    ):
        with pytest.raises(stripe.CardError) as declined:
            client.v1.payment_intents.confirm(pi.id, params={"payment_method": pm})
        assert declined.value.http_status == 402
        assert (declined.value.code, declined.value.error.decline_code) == ("card_declined", decline)
        assert client.v1.payment_intents.retrieve(pi.id).status == "requires_payment_method"
    # The same intent, confirmed again after the declines, succeeds.
    assert client.v1.payment_intents.confirm(pi.id, params={"payment_method": "pm_card_visa"}).status == "succeeded"

    for outcome, status in (("approve", "succeeded"), ("fail", "requires_payment_method")):
        sca = new_intent(client, payment_method="pm_card_authenticationRequiredOnSetup", confirm=True)
        assert sca.status == "requires_action"
        # The browser answers the challenge with the publishable key and the client secret.
        r = requests.post(
            f"{standin}/3ds/{sca.id}",
            data={"client_secret": sca.client_secret, "outcome": outcome},
            headers={"Authorization": f"Bearer {KEYS.publishable}"},
        )
        assert r.status_code == 200
        after = client.v1.payment_intents.retrieve(sca.id)
        assert after.status == status
        if outcome == "fail":
            assert after.last_payment_error.code == "payment_intent_authentication_failure"


def test_card_numbers_go_in_from_the_browser_and_never_come_out(client: stripe.StripeClient, standin: str) -> None:
    pi = new_intent(client)
    card = {
        "payment_method_data[type]": "card",
        "payment_method_data[card][number]": "4242 4242 4242 4242",
        "payment_method_data[card][exp_month]": "12",
        "payment_method_data[card][exp_year]": "34",
        "payment_method_data[card][cvc]": "123",
    }
    browser = {"Authorization": f"Bearer {KEYS.publishable}"}
    wrong = requests.post(
        f"{standin}/v1/payment_intents/{pi.id}/confirm", data={**card, "client_secret": "x"}, headers=browser
    )
    assert wrong.status_code == 400
    r = requests.post(
        f"{standin}/v1/payment_intents/{pi.id}/confirm",
        data={**card, "client_secret": pi.client_secret},
        headers=browser,
    )
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "succeeded"
    # The publishable key can do nothing else.
    refused = requests.post(f"{standin}/v1/payment_intents", data={"amount": 100, "currency": "eur"}, headers=browser)
    assert refused.status_code == 401
    events = client.v1.events.list(params={"limit": 100})
    assert "4242424242424242" not in json.dumps([e.to_dict() for e in events.data])
    assert "4242424242424242" not in json.dumps(client.v1.payment_intents.retrieve(pi.id).to_dict())


def test_same_key_replays_and_other_parameters_are_an_idempotency_error(
    client: stripe.StripeClient, standin: str
) -> None:
    key = f"hold-{time.monotonic_ns()}"
    first = new_intent(client, key)
    again = new_intent(client, key)
    assert again.id == first.id
    with pytest.raises(stripe.IdempotencyError) as reused:
        new_intent(client, key, amount=9900)
    assert reused.value.http_status == 400
    raw = requests.post(
        f"{standin}/v1/payment_intents",
        data={"amount": 2500, "currency": "eur", "payment_method_types[0]": "card", "metadata[holdId]": key},
        headers={"Authorization": f"Bearer {KEYS.secret}", "Idempotency-Key": key},
    )
    assert raw.headers.get("Idempotent-Replayed") == "true"
    assert raw.json()["id"] == first.id


@pytest.mark.parametrize(
    ("currency", "refused", "least", "shown"),
    [
        ("usd", 49, 50, "0.50 usd"),
        ("gbp", 29, 30, "0.30 gbp"),
        ("jpy", 49, 50, "50 jpy"),
        ("sek", 299, 300, "3.00 sek"),
    ],
)
def test_each_currency_has_stripes_minimum_in_its_own_unit(
    client: stripe.StripeClient, currency: str, refused: int, least: int, shown: str
) -> None:
    """Stripe's documented minimums; JPY is zero-decimal, so 50 is ¥50 (it was 50 "cents" for all)."""
    with pytest.raises(stripe.InvalidRequestError) as small:
        new_intent(client, amount=refused, currency=currency)
    assert (small.value.code, small.value.param) == ("amount_too_small", "amount")
    assert shown in str(small.value.user_message)
    assert new_intent(client, amount=least, currency=currency).amount == least
    with pytest.raises(stripe.InvalidRequestError) as large:
        new_intent(client, amount=100_000_000, currency=currency)
    assert large.value.code == "amount_too_large"


def test_concurrent_requests_with_one_key_make_one_intent(client: stripe.StripeClient, control: Any) -> None:
    control("faults", {"latency_s": 0.2})  # keep the first request in flight while the others arrive
    key = f"hold-{time.monotonic_ns()}"
    with ThreadPoolExecutor(12) as pool:
        ids = set(pool.map(lambda _: new_intent(client, key).id, range(12)))
    assert len(ids) == 1
    assert len(client.v1.payment_intents.search(params={"query": f"metadata['holdId']:'{key}'"}).data) == 1


def test_a_lost_answer_is_replayed_on_retry(client: stripe.StripeClient, control: Any) -> None:
    control("faults", {"fail_after_next": 1})  # created, but the SDK hears a 500 and retries
    key = f"hold-{time.monotonic_ns()}"
    pi = new_intent(client, key)
    assert [i.id for i in client.v1.payment_intents.search(params={"query": f"metadata['holdId']:'{key}'"}).data] == [
        pi.id
    ]


def test_a_dashboard_refund_takes_an_amount_and_then_the_rest(client: stripe.StripeClient, control: Any) -> None:
    paid = new_intent(client, payment_method="pm_card_visa", confirm=True)
    part = control("refund", {"payment_intent": paid.id, "amount": 1000})
    assert (part["amount"], part["payment_intent"]) == (1000, paid.id)
    rest = control("refund", {"payment_intent": paid.id})
    assert rest["amount"] == 1500  # all that was left of 2500


def test_cancel_refund_and_search(client: stripe.StripeClient) -> None:
    unpaid = new_intent(client)
    assert client.v1.payment_intents.cancel(unpaid.id).status == "canceled"
    paid = new_intent(client, payment_method="pm_card_visa", confirm=True)
    with pytest.raises(stripe.InvalidRequestError) as not_cancelable:
        client.v1.payment_intents.cancel(paid.id)
    assert not_cancelable.value.code == "payment_intent_unexpected_state"
    assert not_cancelable.value.error.payment_intent.status == "succeeded"

    refund = client.v1.refunds.create(params={"payment_intent": paid.id}, options={"idempotency_key": f"r-{paid.id}"})
    assert (refund.status, refund.amount) == ("succeeded", 2500)
    with pytest.raises(stripe.InvalidRequestError) as twice:
        client.v1.refunds.create(params={"payment_intent": paid.id}, options={"idempotency_key": f"r2-{paid.id}"})
    assert twice.value.code == "charge_already_refunded"

    hold = paid.metadata["holdId"]
    found = client.v1.payment_intents.search(params={"query": f"metadata['holdId']:'{hold}' AND status:'succeeded'"})
    assert [i.id for i in found.data] == [paid.id]
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.payment_intents.search(params={"query": "nonsense"})


def test_events_list_filters_by_type_and_time_and_pages(client: stripe.StripeClient) -> None:
    since = int(time.time())
    ids = {new_intent(client, payment_method="pm_card_visa", confirm=True).id for _ in range(3)}
    events = client.v1.events.list(
        params={"types": ["payment_intent.succeeded"], "created": {"gte": since}, "limit": 1}
    )
    seen = [e for e in events.auto_paging_iter() if e.data.object["id"] in ids]
    assert {e.data.object["id"] for e in seen} == ids
    assert all(e.type == "payment_intent.succeeded" for e in seen)


def test_rate_limit_answers_429_like_stripe(client: stripe.StripeClient, control: Any) -> None:
    pi = new_intent(client)
    control("ratelimit", {"per_second": 5})
    time.sleep(1.0)  # the sliding second now holds none of the earlier calls

    def call(_: int) -> str:
        try:
            client.v1.payment_intents.retrieve(pi.id)
            return "ok"
        except stripe.RateLimitError as exc:
            return f"limited {exc.http_status}"

    with ThreadPoolExecutor(10) as pool:
        outcomes = list(pool.map(call, range(20)))
    assert 1 <= outcomes.count("ok") <= 10  # at most 5 per sliding second; the calls span < 2 s
    assert outcomes.count("limited 429") >= 10


def test_each_endpoint_has_its_own_limit_within_the_accounts_like_stripe(
    client: stripe.StripeClient, standin: str, control: Any
) -> None:
    pi = new_intent(client)
    assert control("ratelimit", {"per_second": 100, "per_endpoint": 5}) == {
        "per_second": 100,
        "per_endpoint": 5,
        "endpoints": {},
    }
    time.sleep(1.0)
    before = requests.get(f"{standin}/_standin/stats", headers={"Authorization": f"Bearer {KEYS.secret}"}).json()

    def retrieve(_: int) -> str:
        try:
            client.v1.payment_intents.retrieve(pi.id)  # every intent's retrieve is one endpoint
            return "ok"
        except stripe.RateLimitError as exc:  # Stripe's body: type and code
            error = (exc.error.type, exc.error.code) if exc.error else None
            return f"limited {exc.http_status} {error}"

    limited = "limited 429 ('invalid_request_error', 'rate_limit')"
    with ThreadPoolExecutor(10) as pool:
        outcomes = list(pool.map(retrieve, range(20)))
    # Far under the account's 100/s, the endpoint's 5 refuse the rest; another endpoint still answers.
    assert 1 <= outcomes.count("ok") <= 10 and outcomes.count(limited) >= 10, outcomes
    assert new_intent(client).status == "requires_payment_method"
    after = requests.get(f"{standin}/_standin/stats", headers={"Authorization": f"Bearer {KEYS.secret}"}).json()
    assert after["rateLimited"] - before["rateLimited"] == outcomes.count(limited)
    refused = after["rateLimitedBy"].get("GET /v1/payment_intents/:id", 0)
    assert refused - before["rateLimitedBy"].get("GET /v1/payment_intents/:id", 0) == outcomes.count(limited)

    # An endpoint Stripe raised for the account takes more; the others keep the default.
    settings = control("ratelimit", {"endpoints": {"GET /v1/payment_intents/:id": 50}})
    assert settings == {"per_second": 100, "per_endpoint": 5, "endpoints": {"GET /v1/payment_intents/:id": 50}}
    time.sleep(1.0)
    with ThreadPoolExecutor(10) as pool:
        assert list(pool.map(retrieve, range(20))).count("ok") == 20


def test_webhooks_are_signed_retried_duplicated_and_reordered(
    client: stripe.StripeClient, receiver: Receiver, control: Any
) -> None:
    pi = new_intent(client, payment_method="pm_card_visa", confirm=True)
    receiver.wait_for(
        lambda evs: any(e["type"] == "payment_intent.succeeded" and e["data"]["object"]["id"] == pi.id for e in evs)
    )

    receiver.fail_next = 1  # Racecap's endpoint fails once: Stripe delivers again
    refund = client.v1.refunds.create(params={"payment_intent": pi.id})
    receiver.wait_for(
        lambda evs: any(e["type"] == "refund.created" and e["data"]["object"]["id"] == refund.id for e in evs)
    )

    control("webhooks", {"duplicate": 1})
    dup = new_intent(client)
    events = receiver.wait_for(
        lambda evs: sum(e["type"] == "payment_intent.created" and e["data"]["object"]["id"] == dup.id for e in evs) == 2
    )
    assert len({e["id"] for e in events if e["data"]["object"].get("id") == dup.id}) == 1  # one event, twice

    control("webhooks", {"duplicate": 0, "paused": True, "reorder": True})
    late = new_intent(client)
    client.v1.payment_intents.confirm(late.id, params={"payment_method": "pm_card_visa"})
    time.sleep(0.3)
    control("webhooks", {"paused": False})
    events = receiver.wait_for(
        lambda evs: any(e["type"] == "payment_intent.created" and e["data"]["object"]["id"] == late.id for e in evs)
    )
    order = [e["type"] for e in events if e["data"]["object"].get("id") == late.id]
    assert order.index("payment_intent.succeeded") < order.index("payment_intent.created")


def test_an_endpoint_is_posted_only_the_event_types_it_subscribes_to(
    client: stripe.StripeClient, receiver: Receiver, control: Any
) -> None:
    control("webhooks", {"enabled_events": ["payment_intent.succeeded"]})
    try:
        pi = new_intent(client, payment_method="pm_card_visa", confirm=True)
        receiver.wait_for(
            lambda evs: any(e["type"] == "payment_intent.succeeded" and e["data"]["object"]["id"] == pi.id for e in evs)
        )
        time.sleep(0.3)  # anything else about this intent would have been posted with it
        with receiver.lock:
            about = [
                e
                for e in receiver.events
                if pi.id in (e["data"]["object"]["id"], e["data"]["object"].get("payment_intent"))
            ]
        assert {e["type"] for e in about} == {"payment_intent.succeeded"}  # not created, not charge.succeeded
        # The account's events still hold every type: only the posting is filtered.
        created = client.v1.events.list(params={"type": "payment_intent.created", "limit": 100}).data
        assert any(e.data.object["id"] == pi.id for e in created)
    finally:
        control("webhooks", {"enabled_events": ["*"]})


def test_a_signature_from_another_secret_is_refused(client: stripe.StripeClient) -> None:
    from local.stripe_standin.webhooks import sign

    payload = b'{"id":"evt_1","object":"event","type":"payment_intent.succeeded","data":{"object":{}}}'
    assert client.construct_event(payload, sign(payload, KEYS.webhook_secret), KEYS.webhook_secret).id == "evt_1"
    with pytest.raises(stripe.SignatureVerificationError):
        client.construct_event(payload, sign(payload, "whsec_other"), KEYS.webhook_secret)
    with pytest.raises(stripe.SignatureVerificationError):  # an old signature, replayed
        client.construct_event(
            payload, sign(payload, KEYS.webhook_secret, int(time.time()) - 3600), KEYS.webhook_secret
        )
