"""The payment providers the port's contract suite runs against: one entry each.

A provider says which cards mean what to it, how to lose one answer (a fault), and how to
sign a webhook. Every provider implements the whole port (the Charges-style adapter that
could not, and the skips it needed, are gone); another provider joins by adding one
``PortUnderTest`` factory to ``PROVIDERS``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import urllib3
from racecap.payments.port import PaymentProvider
from racecap.payments.stripe_provider import StripeKeys, StripePaymentProvider

from local import servers
from local.stripe_standin.server import Keys as StandInKeys
from local.stripe_standin.webhooks import sign as stripe_sign
from tests.fakes.payments import FakePaymentProvider

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class PortUnderTest:
    name: str
    provider: PaymentProvider
    cards: Mapping[str, str]  # "ok", "declined", "invalid"
    lose_next_answer: Callable[[], None]  # the next mutating call works but its answer is lost
    sign: Callable[[bytes], str] | None = None
    extra: dict[str, object] = field(default_factory=dict)


def fake_port() -> Iterator[PortUnderTest]:
    fake = FakePaymentProvider()

    def lose() -> None:
        fake.fail_after_next = 1

    yield PortUnderTest(
        "fake",
        fake,
        {
            "ok": "pm_card_visa",
            "declined": "pm_card_chargeDeclined",
            "invalid": "pm_card_nope",
            "action": "pm_card_authenticationRequired",
            "pendingRefund": "pm_card_pendingRefund",
        },
        lose,
        sign=fake.sign,
    )


# The contract's cases come faster than Stripe's limits (25/s per account and per endpoint).
NO_RATE_LIMITS = ("--rate-limit", "0", "--endpoint-rate-limit", "0")


def stripe_port() -> Iterator[PortUnderTest]:
    """The Stripe adapter (the official SDK) against the Stripe stand-in (its own process)."""
    port = servers.free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "local.stripe_standin", "--port", str(port), *NO_RATE_LIMITS],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    http = urllib3.PoolManager()
    keys = StandInKeys()
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                http.request("GET", url + "/health", retries=False, timeout=1.0)
                break
            except urllib3.exceptions.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("local.stripe_standin did not start") from None
                time.sleep(0.05)
        # No retries: a lost answer stays lost (the SDK would otherwise replay it by key).
        provider = StripePaymentProvider(
            lambda: StripeKeys(keys.secret, keys.webhook_secret), api_base=url, max_retries=0
        )

        def lose() -> None:
            http.request(
                "POST",
                url + "/_standin/faults",
                body=b'{"fail_after_next": 1}',
                headers={"Authorization": f"Bearer {keys.secret}"},
                retries=False,
            )

        yield PortUnderTest(
            "stripe",
            provider,
            {
                "ok": "pm_card_visa",
                "declined": "pm_card_chargeDeclined",
                "invalid": "pm_card_nope",
                "action": "pm_card_authenticationRequired",
                "pendingRefund": "pm_card_pendingRefund",
            },
            lose,
            sign=lambda payload: stripe_sign(payload, keys.webhook_secret),
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# name -> a generator of one PortUnderTest, set up once per session
PROVIDERS: dict[str, Callable[[], Iterator[PortUnderTest]]] = {
    "fake": fake_port,
    "stripe": stripe_port,
}
