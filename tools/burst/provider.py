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


def set_limit(stack: LocalStack, per_second: float) -> None:
    """The stand-in's request limit from now on (a bench models a live account throughout,
    its warm-up included)."""
    _call(stack, "POST", "/_standin/ratelimit", {"per_second": per_second})


@dataclass
class ProviderWindow:
    """The stand-in's counters at the start of the burst, and the limit to put back."""

    stack: LocalStack
    limit_before: float
    rate_limited_before: int
    requests_before: Counter[str]
    limit_during: float | None = None

    @classmethod
    def open(cls, stack: LocalStack, per_second: float | None) -> ProviderWindow:
        stats = _call(stack, "GET", "/_standin/stats")
        before = float(_call(stack, "POST", "/_standin/ratelimit", {})["per_second"])
        if per_second is not None:
            _call(stack, "POST", "/_standin/ratelimit", {"per_second": per_second})
        return cls(stack, before, int(stats["rateLimited"]), _api_calls(stats))

    def restore(self) -> None:
        """The runners are done: the stand-in's limit goes back to what it was."""
        self.limit_during = float(_call(self.stack, "POST", "/_standin/ratelimit", {})["per_second"])
        _call(self.stack, "POST", "/_standin/ratelimit", {"per_second": self.limit_before})

    def figures(self, race_id: str) -> dict[str, Any]:
        """What the provider saw from the first runner until the queues drained, and what it
        charged for the race (its own records: the basis of its fees)."""
        during = self.limit_during if self.limit_during is not None else self.limit_before
        stats = _call(self.stack, "GET", "/_standin/stats")
        calls = _api_calls(stats)
        calls.subtract(self.requests_before)
        # Read after the counters: these reads are the audit's, not the runners'.
        paid = [i for i in local_provider(self.stack).intents(race_id) if i["status"] == "succeeded"]
        return {
            "limit_per_second": during,
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
