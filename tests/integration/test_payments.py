"""The Charges-style wire client (``ChargesClient``) against the real local payment server (``python -m local.payments``):
declines are results, retries reuse the key, and no key ever charges twice."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import urllib3
from racecap.dal.http_payments import (
    Charge,
    ChargeAlreadyRefunded,
    IdempotencyKeyReused,
    InvalidPaymentToken,
)
from racecap.dal.http_payments import ChargesClient as HttpPaymentProvider
from racecap.dal.payments import PaymentUnavailable

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SLOW_SECONDS = 1.0
_http = urllib3.PoolManager(maxsize=4)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None):
        resp = _http.request(
            method,
            self.url + path,
            body=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **(headers or {})},
            retries=False,
            timeout=10.0,
        )
        return resp.status, json.loads(resp.data)

    def charges(self, key: str | None = None) -> list[dict[str, Any]]:
        status, body = self.call("GET", "/v1/charges" + (f"?idempotency_key={key}" if key else ""))
        assert status == 200
        return body["data"]

    def faults(self, **faults: int) -> None:
        assert self.call("POST", "/_faults", faults)[0] == 200

    def stats(self) -> dict[str, Any]:
        return self.call("GET", "/_stats")[1]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "local.payments", "--port", str(port), "--slow-seconds", str(SLOW_SECONDS)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"local.payments exited early: {proc.stderr.read().decode() if proc.stderr else ''}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("local.payments did not start listening") from None
                time.sleep(0.05)
        yield Server(f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


@pytest.fixture
def provider(server: Server) -> HttpPaymentProvider:
    return HttpPaymentProvider(server.url, timeout_s=5.0, retries=3, backoff_s=0.05)


_keys = iter(range(1_000_000))


@pytest.fixture
def key(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name}-{next(_keys)}-{time.time_ns()}"


def _charge(provider: HttpPaymentProvider, key: str, card: str = "tok_visa", **kw: Any) -> Charge:
    args: dict[str, Any] = {
        "amount_cents": 2500,
        "currency": "USD",
        "token": card,
        "idempotency_key": key,
        "description": "Test Race — 10K",
        "metadata": {"registrationId": key},
    }
    args.update(kw)
    return provider.charge(**args)


def test_success(provider, server, key):
    charge = _charge(provider, key)
    assert charge.status == "succeeded"
    assert (charge.amount_cents, charge.currency, charge.idempotency_key) == (2500, "USD", key)
    assert charge.id.startswith("ch_")
    [stored] = server.charges(key)
    assert stored["id"] == charge.id
    assert stored["metadata"] == {"registrationId": key}
    assert stored["refunded"] is False
    assert isinstance(stored["created"], int)


def test_decline_is_a_result_and_is_replayed(provider, server, key):
    charge = _charge(provider, key, card="tok_declined")
    assert charge.status == "declined"
    assert charge.decline_reason == "card_declined"
    assert _charge(provider, key, card="tok_declined") == charge
    assert [c["status"] for c in server.charges(key)] == ["declined"]


def test_decline_wire_format_is_402_with_the_charge(server, key):
    body = {"amount": 100, "currency": "usd", "source": "tok_declined", "description": "d", "metadata": {}}
    status, out = server.call("POST", "/v1/charges", body, {"Idempotency-Key": key})
    assert status == 402
    assert out["status"] == "declined"
    assert out["decline_code"] == "card_declined"
    assert out["id"].startswith("ch_")
    assert server.call("POST", "/v1/charges", body, {"Idempotency-Key": key}) == (status, out)


def test_slow_token(provider, key):
    started = time.monotonic()
    assert _charge(provider, key, card="tok_slow").status == "succeeded"
    assert time.monotonic() - started >= SLOW_SECONDS * 0.9


def test_client_timeout_on_slow_charge_retries_into_the_same_charge(server, key):
    impatient = HttpPaymentProvider(server.url, timeout_s=SLOW_SECONDS / 2, retries=4, backoff_s=0.1)
    charge = _charge(impatient, key, card="tok_slow")
    assert charge.status == "succeeded"
    assert [c["id"] for c in server.charges(key)] == [charge.id]


def test_invalid_token_is_rejected_and_charges_nothing(provider, server, key):
    with pytest.raises(InvalidPaymentToken):
        _charge(provider, key, card="tok_bogus")
    assert server.charges(key) == []
    assert provider.find_charge(key) is None


def test_key_reuse_with_other_parameters_is_refused(provider, server, key):
    charge = _charge(provider, key)
    with pytest.raises(IdempotencyKeyReused):
        _charge(provider, key, amount_cents=9999)
    assert [c["id"] for c in server.charges(key)] == [charge.id]


def test_idempotency_key_header_is_required(server):
    body = {"amount": 100, "currency": "usd", "source": "tok_visa", "description": "d", "metadata": {}}
    status, out = server.call("POST", "/v1/charges", body)
    assert status == 400
    assert out["error"]["code"] == "idempotency_key_required"
    status, out = server.call("POST", "/v1/refunds", {"charge": "ch_x"})
    assert status == 400


def test_retry_after_500_charges_once(provider, server, key):
    before = server.stats()["counters"].get("faults_injected", 0)
    server.faults(fail_next=2)
    charge = _charge(provider, key)
    assert charge.status == "succeeded"
    assert [c["id"] for c in server.charges(key)] == [charge.id]
    assert server.stats()["counters"]["faults_injected"] == before + 2


def test_unavailable_after_all_retries_is_not_a_decline(provider, server, key):
    server.faults(fail_next=4)  # 1 attempt + 3 retries
    with pytest.raises(PaymentUnavailable):
        _charge(provider, key)
    assert provider.find_charge(key) is None
    assert _charge(provider, key).status == "succeeded"
    assert len(server.charges(key)) == 1


def test_lost_answer_then_retry_returns_the_original_charge(provider, server, key):
    server.faults(fail_after_charge_next=1)
    charge = _charge(provider, key)  # 500 after the charge, the retry replays it
    assert charge.status == "succeeded"
    assert [c["id"] for c in server.charges(key)] == [charge.id]


def test_lost_answer_without_retries_recovers_with_find_charge(server, key):
    no_retry = HttpPaymentProvider(server.url, retries=0)
    server.faults(fail_after_charge_next=1)
    with pytest.raises(PaymentUnavailable):
        _charge(no_retry, key)
    found = no_retry.find_charge(key)
    assert found is not None
    assert found.status == "succeeded"
    assert _charge(no_retry, key) == found
    assert len(server.charges(key)) == 1


@pytest.mark.parametrize("token", ["tok_visa", "tok_slow"])
def test_fifty_concurrent_identical_charges_make_one_charge(provider, server, key, token):
    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(lambda _: _charge(provider, key, card=token), range(50)))
    assert len({c.id for c in results}) == 1
    assert all(c.status == "succeeded" for c in results)
    assert len(server.charges(key)) == 1
    assert len([c for c in server.charges() if c["idempotency_key"] == key]) == 1


def test_refund_twice_with_the_same_key_is_harmless(provider, server, key):
    charge = _charge(provider, key)
    first = provider.refund(charge_id=charge.id, idempotency_key=f"refund-{key}")
    again = provider.refund(charge_id=charge.id, idempotency_key=f"refund-{key}")
    assert first == again
    assert (first.charge_id, first.amount_cents, first.status) == (charge.id, 2500, "succeeded")
    assert server.charges(key)[0]["refunded"] is True
    with pytest.raises(ChargeAlreadyRefunded):
        provider.refund(charge_id=charge.id, idempotency_key=f"refund-{key}-other")


def test_find_charge(provider, key):
    assert provider.find_charge(key) is None
    charge = _charge(provider, key)
    assert provider.find_charge(key) == charge
    assert provider.find_charge(key + "-declined") is None
    declined = _charge(provider, key + "-declined", card="tok_declined")
    assert provider.find_charge(key + "-declined") == declined


def test_find_charge_waits_for_an_in_flight_charge(provider, key):
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(_charge, provider, key, "tok_slow")
        time.sleep(SLOW_SECONDS / 4)
        found = provider.find_charge(key)
        assert found == pending.result()


def test_unreachable_provider_is_unavailable():
    dead = HttpPaymentProvider(f"http://127.0.0.1:{_free_port()}", timeout_s=0.5, retries=1, backoff_s=0.01)
    with pytest.raises(PaymentUnavailable):
        _charge(dead, "k-dead")
    with pytest.raises(PaymentUnavailable):
        dead.find_charge("k-dead")


def test_list_all_charges_for_the_audit(server, provider, key):
    _charge(provider, key)
    listed = server.charges()
    assert any(c["idempotency_key"] == key for c in listed)
    for c in listed:
        assert {
            "id",
            "status",
            "amount",
            "currency",
            "idempotency_key",
            "metadata",
            "refunded",
            "created",
        } <= set(c)
