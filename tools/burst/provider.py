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


def set_limit(stack: LocalStack, per_second: float | None, per_endpoint: float | None = None) -> None:
    """The stand-in's request limits from now on, the account's and each endpoint's (a bench
    models a live account throughout, its warm-up included); None leaves one as it is."""
    _call(stack, "POST", "/_standin/ratelimit", _limits(per_second, per_endpoint))


def _limits(per_second: float | None, per_endpoint: float | None) -> dict[str, float]:
    return {
        **({"per_second": per_second} if per_second is not None else {}),
        **({"per_endpoint": per_endpoint} if per_endpoint is not None else {}),
    }


@dataclass
class ProviderWindow:
    """The stand-in's counters at the start of the burst, and the limit to put back."""

    stack: LocalStack
    limit_before: float
    rate_limited_before: int
    requests_before: Counter[str]
    limit_during: float | None = None
    endpoint_limit_before: float = 0.0
    endpoint_limit_during: float | None = None

    @classmethod
    def open(cls, stack: LocalStack, per_second: float | None, per_endpoint: float | None = None) -> ProviderWindow:
        stats = _call(stack, "GET", "/_standin/stats")
        before = _call(stack, "POST", "/_standin/ratelimit", {})
        if per_second is not None or per_endpoint is not None:
            _call(stack, "POST", "/_standin/ratelimit", _limits(per_second, per_endpoint))
        return cls(
            stack,
            float(before["per_second"]),
            int(stats["rateLimited"]),
            _api_calls(stats),
            endpoint_limit_before=float(before.get("per_endpoint", 0.0)),
        )

    def restore(self) -> None:
        """The runners are done: the stand-in's limits go back to what they were."""
        during = _call(self.stack, "POST", "/_standin/ratelimit", {})
        self.limit_during = float(during["per_second"])
        self.endpoint_limit_during = float(during.get("per_endpoint", 0.0))
        _call(self.stack, "POST", "/_standin/ratelimit", _limits(self.limit_before, self.endpoint_limit_before))

    def figures(self, race_id: str) -> dict[str, Any]:
        """What the provider saw from the first runner until the queues drained, and what it
        charged for the race (its own records: the basis of its fees)."""
        during = self.limit_during if self.limit_during is not None else self.limit_before
        stats = _call(self.stack, "GET", "/_standin/stats")
        calls = _api_calls(stats)
        calls.subtract(self.requests_before)
        # Read after the counters: these reads are the audit's, not the runners'.
        paid = [i for i in local_provider(self.stack).intents(race_id) if i["status"] == "succeeded"]
        endpoint = self.endpoint_limit_during if self.endpoint_limit_during is not None else self.endpoint_limit_before
        return {
            "limit_per_second": during,
            "endpoint_limit_per_second": endpoint,
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
