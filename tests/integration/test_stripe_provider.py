"""The Stripe adapter's own behaviour beyond the port's contract (tests/contract): the
provider's rate limit, an unreachable provider, 3-D Secure, and a lazy SDK import."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from racecap.payments.port import IntentStatus, NewIntent, PaymentRateLimited, PaymentUnavailable
from racecap.payments.stripe_provider import StripeKeys, StripePaymentProvider

import blueprint
from local import servers
from local.stripe_standin.server import Keys
from tests.integration.latency import machine

pytestmark = pytest.mark.integration
KEYS = Keys()


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = servers.free_port()
    cmd = [sys.executable, "-m", "local.stripe_standin", "--port", str(port), "--rate-limit", "0"]
    cmd += ["--endpoint-rate-limit", "0"]
    log_dir: Path = tmp_path_factory.mktemp("stripe-provider")
    proc = servers.spawn("stripe", cmd, port, log_dir, env={"PYTHONPATH": str(blueprint.ROOT)}, cwd=blueprint.ROOT)
    yield proc.endpoint
    proc.stop()


def provider(api_base: str, **kw: Any) -> StripePaymentProvider:
    return StripePaymentProvider(lambda: StripeKeys(KEYS.secret, KEYS.webhook_secret), api_base=api_base, **kw)


def create(p: StripePaymentProvider, **kw: Any) -> Any:
    key = f"k-{time.monotonic_ns()}"
    return p.create_intent(
        NewIntent(amount_cents=2500, currency="usd", metadata={"holdId": key}, description="t", **kw),
        idempotency_key=key,
    )


def test_the_providers_429_is_rate_limited_with_a_retry_after(standin: str) -> None:
    p = provider(standin, rate_limit_pauses_s=())  # no retry of a 429 here: what the caller finally sees
    intent = create(p)
    control = {"Authorization": f"Bearer {KEYS.secret}"}
    requests.post(f"{standin}/_standin/ratelimit", json={"per_second": 1}, headers=control, timeout=5)
    try:
        time.sleep(1.0)
        p.retrieve_intent(intent.id)  # the one call this second allows
        with pytest.raises(PaymentRateLimited) as limited:
            p.retrieve_intent(intent.id)
        assert limited.value.retry_after > 0
        assert isinstance(limited.value, PaymentUnavailable)  # the caller keeps the place and retries
    finally:
        requests.post(f"{standin}/_standin/ratelimit", json={"per_second": 0}, headers=control, timeout=5)


def test_an_unreachable_provider_is_unavailable_not_declined() -> None:
    p = provider(f"http://127.0.0.1:{servers.free_port()}", max_retries=1, connect_timeout_s=0.5, read_timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(PaymentUnavailable):
        create(p, payment_method="pm_card_visa", confirm=True)
    assert time.monotonic() - started < 10, machine()  # two 0.5-s tries, not a hang


def test_3d_secure_waits_for_the_runner_and_a_cancel_is_repeatable(standin: str) -> None:
    p = provider(standin)
    intent = create(p, payment_method="pm_card_authenticationRequired", confirm=True)
    assert intent.status == IntentStatus.REQUIRES_ACTION
    first = p.cancel_intent(intent.id, idempotency_key=f"cancel-{intent.id}")
    again = p.cancel_intent(intent.id, idempotency_key=f"cancel-again-{intent.id}")
    assert first.status == again.status == IntentStatus.CANCELED


def test_importing_the_adapter_does_not_import_the_sdk() -> None:
    code = "import sys, racecap.payments.stripe_provider; print('stripe' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(blueprint.ROOT / "layers" / "racecap" / "python")},
    )
    assert out.stdout.strip() == "False"


def test_the_keys_come_from_secrets_manager_through_powertools(
    standin: str, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from racecap.payments.stripe_provider import keys_from_secret

    from local import provision

    moto = servers.start_moto(servers.free_port(), tmp_path_factory.mktemp("moto"))
    try:
        for name, value in {
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": moto.endpoint,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            monkeypatch.setenv(name, value)
        client = boto3.client("secretsmanager", endpoint_url=moto.endpoint)
        provision.provision_secrets(
            client,
            {
                "PaymentProvider": {"secretKey": KEYS.secret, "webhookSecret": KEYS.webhook_secret},
                # provision_secrets takes a value for every blueprint secret, as the stack gives it
                "FairnessSigningKey": {"signingKey": "k" * 32},
            },
        )
        secret_id = blueprint.secret("PaymentProvider").local_name
        p = StripePaymentProvider(keys_from_secret(secret_id, max_age_s=60), api_base=standin)
        assert create(p, payment_method="pm_card_visa", confirm=True).status == IntentStatus.SUCCEEDED
        assert "sk_" not in repr(keys_from_secret(secret_id)())
        with pytest.raises(ValueError, match="exactly"):
            provision.provision_secrets(client, {"PaymentProvider": {"secretKey": "x"}})
    finally:
        moto.stop()


def test_environments_share_one_request_budget_through_redis(
    standin: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import redis
    from racecap.payments.budget import LimitedPaymentProvider
    from racecap.payments.port import PaymentRateLimited
    from racecap.ratelimit import RequestBudget

    server = servers.start_redis(servers.free_port(), tmp_path_factory.mktemp("redis"))
    try:
        client = redis.Redis(host="127.0.0.1", port=server.port)
        rate = 5.0
        # Two execution environments, each with its own budget object, the same Redis keys.
        envs = [
            LimitedPaymentProvider(
                provider(standin),
                RequestBudget(lambda: client, rate, rate, headroom=0.0, key="rc:ratelimit:payment-provider").reserve,
                max_wait_s=0.0,
            )
            for _ in range(2)
        ]
        outcomes = []
        started = time.monotonic()
        for i in range(20):
            try:
                create(envs[i % 2])
                outcomes.append("ok")
            except PaymentRateLimited as exc:
                outcomes.append("limited" if exc.retry_after > 0 else "limited without retry-after")
        elapsed = time.monotonic() - started
        assert outcomes.count("ok") <= rate * elapsed + 1, (outcomes, elapsed)
        assert outcomes.count("limited") > 0
    finally:
        server.stop()


def test_refused_callers_take_no_slot_from_the_shared_budget(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 31: hundreds of runners retrying at once must not push the budget's next slot
    out of reach; a refusal writes nothing to Redis."""
    import redis
    from racecap.ratelimit import SendRateLimiter

    server = servers.start_redis(servers.free_port(), tmp_path_factory.mktemp("redis"))
    try:
        client = redis.Redis(host="127.0.0.1", port=server.port)
        limiter = SendRateLimiter(lambda: client, 2.0, headroom=0.0, key="rc:ratelimit:refusals")  # 0.5 s apart
        assert limiter.reserve(max_wait_s=0.6) < 0.05
        assert 0.4 < limiter.reserve(max_wait_s=0.6) <= 0.5
        for _ in range(100):
            assert 0.9 < limiter.reserve(max_wait_s=0.6) <= 1.0  # refused: 1 s out
        time.sleep(0.5)
        assert limiter.reserve(max_wait_s=0.6) <= 0.5  # as if the 100 refusals never happened
    finally:
        server.stop()
