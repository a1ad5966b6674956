"""After a local burst: what the handlers counted second by second (racecap.pulse, in Redis) is
what the burst's other witnesses saw — Σ confirmed per event is the audit's confirmed, Σ places
held is Artillery's successful holds (a team's captain holds its places: compared without
teams), Σ card declines is the payment provider's own failed charges (issue 42)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import redis
import requests
from racecap import pulse

from local.stack import LocalStack
from tools.audit import AuditReport


def pulse_sums(stack: LocalStack, race_id: str) -> Counter[tuple[str, str]]:
    """Every count of the race so far, per (event, name), read from Redis."""
    client = redis.Redis.from_url(f"redis://127.0.0.1:{stack.ports.redis}/0", decode_responses=True)
    sums: Counter[tuple[str, str]] = Counter()
    for key in client.scan_iter(f"{pulse.KEY_PREFIX}{race_id}:*"):
        for field, n in client.hgetall(key).items():  # type: ignore[union-attr]
            _, event_id, name = pulse.parse_field(str(field))
            sums[(event_id, name)] += int(n)
    return sums


def failed_charges(stack: LocalStack, race_id: str) -> int:
    """The stand-in's payment_failed events for the race's payments (its own word)."""
    from local.stripe_standin.server import Keys

    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {Keys().secret}"
    failed, after = 0, ""
    while True:
        params: dict[str, str | int] = {"type": "payment_intent.payment_failed", "limit": 100}
        if after:
            params["starting_after"] = after
        page = session.get(f"{stack.stripe_url}/v1/events", params=params, timeout=15).json()
        for e in page["data"]:
            failed += e["data"]["object"]["metadata"].get("raceId") == race_id
        if not page.get("has_more") or not page["data"]:
            return failed
        after = page["data"][-1]["id"]


def compare(
    before: Counter[tuple[str, str]],
    after: Counter[tuple[str, str]],
    audit: AuditReport,
    held_by_runners: int,
    runners_lost: int,
    declined_by_provider: int,
    *,
    teams: bool,
) -> tuple[dict[str, Any], list[str]]:
    """The figures and the problems: each sum against its witness."""

    def total(counts: Counter[tuple[str, str]], name: str) -> int:
        return sum(n for (_, what), n in counts.items() if what == name)

    confirmed = {e: n for (e, what), n in after.items() if what == pulse.CONFIRMED}
    holds = total(after, pulse.HOLDS) - total(before, pulse.HOLDS)
    figures = {
        "confirmed_by_event": confirmed,
        "holds_in_burst": holds,
        "declined": total(after, pulse.DECLINED),
        "by_name": {name: total(after, name) for name in pulse.NAMES},
    }
    problems = []
    audited = {e: v["confirmed"] for e, v in audit.events.items() if v["confirmed"]}
    if confirmed != audited:
        problems.append(f"pulse: confirmed per event {confirmed} != the audit's {audited}")
    # A runner whose connection died after the server granted its hold never told Artillery: at
    # most one such hold per runner lost, never fewer holds than Artillery saw.
    if not teams and not held_by_runners <= holds <= held_by_runners + runners_lost:
        problems.append(
            f"pulse: {holds} holds counted; Artillery saw {held_by_runners} (and lost {runners_lost} runners)"
        )
    if figures["declined"] != declined_by_provider:
        problems.append(f"pulse: {figures['declined']} declines counted != the provider's {declined_by_provider}")
    return figures, problems
