"""The preflight's verdicts, from facts already read (pure: no AWS, no clock, no I/O).

For an expected burst (runners per minute arriving at the opening) each check compares what
the account and the stage allow with what the burst needs, and answers:

* ``OK`` — it will hold, with the figures that show it;
* ``WILL NOT HOLD`` — it will not, and where possible the command that fixes it;
* ``UNKNOWN`` — the fact could not be read (an API this account or emulator does not answer,
  or a permission missing): the reason, and the command to check it by hand.

The estimates are the pre-warm's (``window.prewarm``: every runner makes
``CALLS_PER_RUNNER`` registration-API calls of ``SECONDS_PER_CALL``, with ``HEADROOM``) and
the benchmark's measured DynamoDB cost per registration (docs/benchmark.md, row (d)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from racecap.window.prewarm import CALLS_PER_RUNNER, HEADROOM, SECONDS_PER_CALL, environments_for

# `make bench` (d) `capacity_per_registration_by_table`, per registration (one `--only-flow`
# run on 2026-11-25 at e0f156f: 900 runners, 21.5 WCU and 5.0 RCU across all tables). Each
# table the burst writes is checked against its own units (indexes and failed conditions
# included), times UNITS_MARGIN for what a local run cannot show: writes retried after
# throttling, items larger than the bench race's, the sweeper's reads over a long opening.
WCU_PER_RUNNER = {"Inventory": 18.0, "Registrations": 3.5}
RCU_PER_RUNNER = {"Inventory": 3.9, "Registrations": 1.1}
UNITS_MARGIN = 1.5
BURST_TABLES = tuple(WCU_PER_RUNNER)
# AWS keeps 100 of the account's concurrency unreserved; reserved functions take theirs out.
UNRESERVED_FLOOR = 100
# One confirmation email per runner, sent within the burst minute by the rate-limited sender.
EMAILS_PER_RUNNER = 1.0
SES_SANDBOX_DAILY = 200  # GetSendQuota's Max24HourSend in the SES sandbox
# ElastiCache Serverless: ECPUs per second one cache scales to (AWS: 15,000,000 per second
# per cache); each API call costs the cache about this many ECPUs (a few small commands).
ECPU_PER_CALL = 4


class Verdict(StrEnum):
    OK = "OK"
    WILL_NOT_HOLD = "WILL NOT HOLD"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class Unreadable:
    """A fact the gatherer could not read: why, and how to check it by hand."""

    reason: str
    check: str


@dataclass(frozen=True)
class ApiThrottle:
    rate_per_s: float | None  # None: no stage throttle set (the account's 10,000/s applies)
    burst: int | None


@dataclass(frozen=True)
class TableWarmth:
    name: str
    read_units_per_s: int
    write_units_per_s: int


@dataclass(frozen=True)
class FunctionWarmth:
    name: str
    declared: str | None  # the blueprint's warm_start: "snapstart", "provisioned" or None
    snap_start: bool
    provisioned_max: int | None  # the warm-start target's MaxCapacity, None without one


@dataclass(frozen=True)
class SesQuota:
    production: bool  # out of the sandbox: any address, not only verified ones
    max_24h_send: float
    max_send_rate: float


@dataclass(frozen=True)
class CacheLimits:
    name: str
    max_ecpu_per_s: int | None  # None: no limit set (the service's own applies)


@dataclass(frozen=True)
class Facts:
    """What the gatherer read; every field may be ``Unreadable`` instead."""

    api_id: str
    stage_name: str
    lambda_concurrency: int | Unreadable
    reserved_concurrency: int  # the stage's reserved functions together (from the blueprint)
    api_throttle: ApiThrottle | Unreadable
    tables: dict[str, TableWarmth | Unreadable] = field(default_factory=dict)  # blueprint id ->
    functions: dict[str, FunctionWarmth | Unreadable] = field(default_factory=dict)  # API functions
    ses: SesQuota | Unreadable = Unreadable("not read", "aws ses get-send-quota")
    cache: CacheLimits | Unreadable = Unreadable("not read", "aws elasticache describe-serverless-caches")


@dataclass(frozen=True)
class Check:
    name: str
    verdict: Verdict
    detail: str
    fix: str = ""  # a command that fixes it (WILL NOT HOLD) or checks it (UNKNOWN)


@dataclass(frozen=True)
class Burst:
    runners_per_minute: float

    @property
    def api_calls_per_s(self) -> float:
        return self.runners_per_minute / 60 * CALLS_PER_RUNNER * HEADROOM

    @property
    def api_concurrency(self) -> int:
        return math.ceil(self.runners_per_minute / 60 * CALLS_PER_RUNNER * SECONDS_PER_CALL * HEADROOM)

    @property
    def warm_environments(self) -> int:
        return environments_for(self.runners_per_minute, maximum=10**9)

    def write_units_per_s(self, table_id: str) -> int:
        return self._units(WCU_PER_RUNNER[table_id])

    def read_units_per_s(self, table_id: str) -> int:
        return self._units(RCU_PER_RUNNER[table_id])

    def _units(self, per_runner: float) -> int:
        return math.ceil(round(self.runners_per_minute / 60 * per_runner * UNITS_MARGIN * HEADROOM, 6))

    @property
    def emails_per_s(self) -> float:
        return self.runners_per_minute / 60 * EMAILS_PER_RUNNER


def _unknown(name: str, fact: Unreadable) -> Check:
    return Check(name, Verdict.UNKNOWN, f"could not read: {fact.reason}", fact.check)


def lambda_concurrency(facts: Facts, burst: Burst) -> Check:
    name = "Lambda concurrency"
    if isinstance(facts.lambda_concurrency, Unreadable):
        return _unknown(name, facts.lambda_concurrency)
    quota = facts.lambda_concurrency
    available = quota - facts.reserved_concurrency
    need = burst.api_concurrency + UNRESERVED_FLOOR
    detail = (
        f"account {quota}, {facts.reserved_concurrency} reserved by the stage: {available} for the API; "
        f"the burst keeps ~{burst.api_concurrency} busy (+{UNRESERVED_FLOOR} AWS keeps unreserved)"
    )
    if available >= need:
        return Check(name, Verdict.OK, detail)
    wanted = max(1000, need + facts.reserved_concurrency)
    fix = (
        "aws service-quotas request-service-quota-increase --service-code lambda "
        f"--quota-code L-B99A9384 --desired-value {wanted}"
    )
    return Check(name, Verdict.WILL_NOT_HOLD, detail, fix)


def api_throttle(facts: Facts, burst: Burst) -> Check:
    name = "API Gateway stage throttle"
    if isinstance(facts.api_throttle, Unreadable):
        return _unknown(name, facts.api_throttle)
    t = facts.api_throttle
    need = math.ceil(burst.api_calls_per_s)
    if t.rate_per_s is None:
        return Check(name, Verdict.OK, f"no stage limit (account default 10,000/s); the burst needs ~{need}/s")
    detail = f"rate {t.rate_per_s:g}/s, burst {t.burst}; the burst needs ~{need}/s"
    if t.rate_per_s >= need and (t.burst or 0) >= need:
        return Check(name, Verdict.OK, detail)
    fix = (
        f"aws apigatewayv2 update-stage --api-id {facts.api_id} --stage-name {facts.stage_name} "
        f"--default-route-settings ThrottlingRateLimit={need},ThrottlingBurstLimit={need}"
    )
    return Check(name, Verdict.WILL_NOT_HOLD, detail, fix)


def table_warmth(table_id: str, fact: TableWarmth | Unreadable, burst: Burst) -> Check:
    name = f"DynamoDB warm throughput: {table_id}"
    if isinstance(fact, Unreadable):
        return _unknown(name, fact)
    w, r = burst.write_units_per_s(table_id), burst.read_units_per_s(table_id)
    detail = (
        f"{fact.write_units_per_s} WCU/s, {fact.read_units_per_s} RCU/s warm; "
        f"the burst needs up to {w} WCU/s, {r} RCU/s"
    )
    if fact.write_units_per_s >= w and fact.read_units_per_s >= r:
        return Check(name, Verdict.OK, detail)
    fix = (
        f"aws dynamodb update-table --table-name {fact.name} --warm-throughput "
        f"ReadUnitsPerSecond={max(r, fact.read_units_per_s)},WriteUnitsPerSecond={max(w, fact.write_units_per_s)}"
    )
    return Check(name, Verdict.WILL_NOT_HOLD, detail, fix)


def function_warmth(function_id: str, fact: FunctionWarmth | Unreadable, burst: Burst) -> Check:
    name = f"warm starts: {function_id}"
    if isinstance(fact, Unreadable):
        return _unknown(name, fact)
    if fact.snap_start:
        return Check(name, Verdict.OK, "SnapStart on published versions")
    need = burst.warm_environments
    if fact.provisioned_max is None:
        detail = (
            f"neither SnapStart nor provisioned concurrency (declared: {fact.declared}): every environment starts cold"
        )
        fix = (
            f"aws lambda update-function-configuration --function-name {fact.name} --snap-start "
            "ApplyOn=PublishedVersions, then `make deploy` to publish the live alias on a SnapStart version"
            if fact.declared == "snapstart"
            else f"aws lambda put-provisioned-concurrency-config --function-name {fact.name} --qualifier live "
            f"--provisioned-concurrent-executions {need}"
        )
        return Check(name, Verdict.WILL_NOT_HOLD, detail, fix)
    detail = f"provisioned concurrency up to {fact.provisioned_max} (the window's pre-warm raises it); needs {need}"
    if fact.provisioned_max >= need:
        return Check(name, Verdict.OK, detail)
    fix = (
        "aws application-autoscaling register-scalable-target --service-namespace lambda "
        f"--resource-id function:{fact.name}:live --scalable-dimension lambda:function:ProvisionedConcurrency "
        f"--min-capacity 0 --max-capacity {need}"
    )
    return Check(name, Verdict.WILL_NOT_HOLD, detail, fix)


def ses(facts: Facts, burst: Burst) -> Check:
    name = "SES production access and send rate"
    if isinstance(facts.ses, Unreadable):
        return _unknown(name, facts.ses)
    q, need = facts.ses, burst.emails_per_s
    daily = math.ceil(burst.runners_per_minute * EMAILS_PER_RUNNER)
    if not q.production:
        detail = (
            f"sandbox (Max24HourSend {q.max_24h_send:g}, {q.max_send_rate:g}/s): verified addresses only, "
            f"{daily} emails wanted"
        )
        fix = (
            "aws sesv2 put-account-details --production-access-enabled --mail-type TRANSACTIONAL "
            "--website-url https://… --use-case-description '…'"
        )
        return Check(name, Verdict.WILL_NOT_HOLD, detail, fix)
    detail = f"production, {q.max_send_rate:g} emails/s, {q.max_24h_send:g}/day; the burst sends ~{need:.1f}/s, {daily}"
    if q.max_send_rate >= need and q.max_24h_send >= daily:
        return Check(name, Verdict.OK, detail)
    # Emails wait in their queue rather than fail, but confirmations arrive late.
    fix = (
        "aws service-quotas request-service-quota-increase --service-code ses --quota-code L-CDEF9B6B "
        f"--desired-value {math.ceil(need)}"
    )
    return Check(name, Verdict.WILL_NOT_HOLD, detail, fix)


def cache(facts: Facts, burst: Burst) -> Check:
    name = "cache limits (ElastiCache Serverless)"
    if isinstance(facts.cache, Unreadable):
        return _unknown(name, facts.cache)
    need = math.ceil(burst.api_calls_per_s * ECPU_PER_CALL)
    if facts.cache.max_ecpu_per_s is None:
        return Check(name, Verdict.OK, f"no ECPU limit set on {facts.cache.name}; the burst needs ~{need} ECPU/s")
    detail = f"{facts.cache.name}: at most {facts.cache.max_ecpu_per_s} ECPU/s; the burst needs ~{need}"
    if facts.cache.max_ecpu_per_s >= need:
        return Check(name, Verdict.OK, detail)
    fix = (
        f"aws elasticache modify-serverless-cache --serverless-cache-name {facts.cache.name} "
        f"--cache-usage-limits 'ECPUPerSecond={{Maximum={need}}}'"
    )
    return Check(name, Verdict.WILL_NOT_HOLD, detail, fix)


def verdicts(facts: Facts, burst: Burst) -> list[Check]:
    checks = [lambda_concurrency(facts, burst), api_throttle(facts, burst)]
    checks += [table_warmth(t, f, burst) for t, f in facts.tables.items()]
    checks += [function_warmth(fn, f, burst) for fn, f in facts.functions.items()]
    checks += [ses(facts, burst), cache(facts, burst)]
    return checks


def render(checks: list[Check], burst: Burst) -> str:
    lines = [
        f"preflight for {burst.runners_per_minute:g} runners/minute "
        f"(~{burst.api_calls_per_s:.0f} API calls/s, ~{burst.api_concurrency} busy environments, "
        f"~{burst.emails_per_s:.1f} emails/s)"
    ]
    for c in checks:
        lines.append(f"  {c.verdict.value:<13} {c.name}: {c.detail}")
        if c.fix:
            lines.append(f"  {'':<13}   {'fix' if c.verdict is Verdict.WILL_NOT_HOLD else 'check'}: {c.fix}")
    counts = {v: sum(c.verdict is v for c in checks) for v in Verdict}
    lines.append(
        f"{counts[Verdict.OK]} OK, {counts[Verdict.WILL_NOT_HOLD]} WILL NOT HOLD, {counts[Verdict.UNKNOWN]} UNKNOWN"
    )
    return "\n".join(lines)
