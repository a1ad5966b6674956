"""The payment provider's side of a local burst: the Stripe stand-in's request limit, set
low for the burst when asked (so runners really meet it), and what it counted.

On a deployed stage the provider is Stripe itself: its limit is the account's (test mode
25 requests/s), and nothing here applies.
"""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from dataclasses import dataclass
from typing import Any

from local.stack import LocalStack
from local.stripe_standin.server import Keys
from tools.audit import local_provider


def _call(stack: LocalStack, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(stack.stripe_url + path, data=data, method=method)  # noqa: S310 - loopback
    req.add_header("Authorization", f"Bearer {Keys().secret}")
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
        answer: dict[str, Any] = json.loads(resp.read())
    return answer


def set_limit(stack: LocalStack, per_second: float | None, per_endpoint: float | None = None) -> dict[str, Any]:
    """The stand-in's request limits from now on, the account's and each endpoint's (a bench
    models a live account throughout, its warm-up included); None leaves one as it is. Answers
    the limits as they then are (both None: reads them, changing nothing)."""
    return _call(stack, "POST", "/_standin/ratelimit", _limits(per_second, per_endpoint))


def _limits(per_second: float | None, per_endpoint: float | None) -> dict[str, float]:
    return {
        **({"per_second": per_second} if per_second is not None else {}),
        **({"per_endpoint": per_endpoint} if per_endpoint is not None else {}),
    }


@dataclass
class ProviderWindow:
    """The stand-in's counters at the start of the burst, and the limits to put back."""

    stack: LocalStack
    before: dict[str, Any]  # the stand-in's limits at the start ({"per_second", "per_endpoint", ...})
    rate_limited_before: int
    requests_before: Counter[str]
    during: dict[str, Any] | None = None  # its limits while the runners ran, read by ``restore``

    @classmethod
    def open(cls, stack: LocalStack, per_second: float | None, per_endpoint: float | None = None) -> ProviderWindow:
        stats = _call(stack, "GET", "/_standin/stats")
        before = set_limit(stack, None)
        set_limit(stack, per_second, per_endpoint)
        return cls(stack, before, int(stats["rateLimited"]), _api_calls(stats))

    def restore(self) -> None:
        """The runners are done: the stand-in's limits go back to what they were."""
        self.during = set_limit(self.stack, None)
        set_limit(self.stack, float(self.before["per_second"]), float(self.before.get("per_endpoint", 0.0)))

    def figures(self, race_id: str) -> dict[str, Any]:
        """What the provider saw from the first runner until the queues drained, and what it
        charged for the race (its own records: the basis of its fees)."""
        limits = self.during or self.before
        stats = _call(self.stack, "GET", "/_standin/stats")
        calls = _api_calls(stats)
        calls.subtract(self.requests_before)
        # Read after the counters: these reads are the audit's, not the runners'.
        paid = [i for i in local_provider(self.stack).intents(race_id) if i["status"] == "succeeded"]
        return {
            "limit_per_second": float(limits["per_second"]),
            "endpoint_limit_per_second": float(limits.get("per_endpoint", 0.0)),
            "api_calls": sum(calls.values()),
            "api_calls_by_route": {k: n for k, n in sorted(calls.items()) if n},
            "answered_429": int(stats["rateLimited"]) - self.rate_limited_before,
            "charges_succeeded": len(paid),
            "amount_charged_cents": sum(int(i["amount"]) for i in paid),
        }


def _api_calls(stats: dict[str, Any]) -> Counter[str]:
    """Calls to the provider's API (``POST /v1/payment_intents`` …), refused ones included;
    the stand-in's other counters (replays, faults) are not calls."""
    return Counter({k: int(n) for k, n in stats["requests"].items() if k.split(" ", 1)[0] in ("GET", "POST", "DELETE")})
