"""The preflight's verdicts from facts: every check's OK, WILL NOT HOLD (with its fixing
command) and UNKNOWN (with the reason and the command to check by hand)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tools.preflight_rules import (
    ApiThrottle,
    Burst,
    CacheLimits,
    Facts,
    FunctionWarmth,
    SesQuota,
    TableWarmth,
    Unreadable,
    Verdict,
    api_throttle,
    cache,
    function_warmth,
    lambda_concurrency,
    render,
    ses,
    table_warmth,
    verdicts,
)

BURST = Burst(5000)  # the product's design case: 5,000 runners in the first minute
DENIED = Unreadable("GetAccountSettings: AccessDeniedException (not authorized)", "aws lambda get-account-settings")


def facts(**over: object) -> Facts:
    base = Facts(
        api_id="abc123",
        stage_name="$default",
        lambda_concurrency=1000,
        reserved_concurrency=11,
        api_throttle=ApiThrottle(1000.0, 2000),
        tables={"Inventory": TableWarmth("stage-Inventory", 30000, 10000)},
        functions={"RegistrationApi": FunctionWarmth("stage-Reg", "provisioned", False, 200)},
        ses=SesQuota(True, 100000, 100),
        cache=CacheLimits("stage-cache", None),
    )
    return replace(base, **over)  # type: ignore[arg-type]


def test_the_burst_estimates_are_the_pre_warms() -> None:
    assert BURST.api_concurrency == 125 == BURST.warm_environments
    assert round(BURST.api_calls_per_s) == 500
    # Each table's own units per runner (the bench's), x 1.5 margin x 1.5 headroom.
    assert (BURST.write_units_per_s("Inventory"), BURST.read_units_per_s("Inventory")) == (3375, 732)
    assert (BURST.write_units_per_s("Registrations"), BURST.read_units_per_s("Registrations")) == (657, 207)


def test_a_healthy_stage_is_ok_everywhere() -> None:
    checks = verdicts(facts(), BURST)
    assert {c.verdict for c in checks} == {Verdict.OK}
    assert all(c.fix == "" for c in checks)
    assert render(checks, BURST).endswith("6 OK, 0 WILL NOT HOLD, 0 UNKNOWN")


def test_lambda_concurrency() -> None:
    assert lambda_concurrency(facts(), BURST).verdict is Verdict.OK
    low = lambda_concurrency(facts(lambda_concurrency=10), BURST)  # a new account's limit
    assert low.verdict is Verdict.WILL_NOT_HOLD
    assert "--quota-code L-B99A9384 --desired-value 1000" in low.fix
    # The reserved functions take their share out of what the API can use.
    assert lambda_concurrency(facts(lambda_concurrency=236), BURST).verdict is Verdict.OK
    assert lambda_concurrency(facts(lambda_concurrency=235), BURST).verdict is Verdict.WILL_NOT_HOLD
    unknown = lambda_concurrency(facts(lambda_concurrency=DENIED), BURST)
    assert (unknown.verdict, unknown.fix) == (Verdict.UNKNOWN, DENIED.check)
    assert "AccessDenied" in unknown.detail


def test_api_gateway_stage_throttle() -> None:
    assert api_throttle(facts(), BURST).verdict is Verdict.OK
    assert api_throttle(facts(api_throttle=ApiThrottle(None, None)), BURST).verdict is Verdict.OK
    slow = api_throttle(facts(api_throttle=ApiThrottle(100.0, 50)), BURST)
    assert slow.verdict is Verdict.WILL_NOT_HOLD
    assert slow.fix == (
        "aws apigatewayv2 update-stage --api-id abc123 --stage-name $default "
        "--default-route-settings ThrottlingRateLimit=500,ThrottlingBurstLimit=500"
    )
    assert api_throttle(facts(api_throttle=ApiThrottle(1000.0, 100)), BURST).verdict is Verdict.WILL_NOT_HOLD
    assert api_throttle(facts(api_throttle=DENIED), BURST).verdict is Verdict.UNKNOWN


def test_table_warm_throughput() -> None:
    # A new on-demand table is warm for 4,000 WCU/s and 12,000 RCU/s: the design burst fits
    # both tables; 8,000 runners a minute need Inventory (the holds' table) raised.
    new = {t: TableWarmth(f"stage-{t}", 12000, 4000) for t in ("Inventory", "Registrations")}
    assert table_warmth("Inventory", new["Inventory"], BURST).verdict is Verdict.OK
    assert table_warmth("Registrations", new["Registrations"], BURST).verdict is Verdict.OK
    bigger = table_warmth("Inventory", new["Inventory"], Burst(8000))
    assert bigger.verdict is Verdict.WILL_NOT_HOLD
    assert bigger.fix == (
        "aws dynamodb update-table --table-name stage-Inventory --warm-throughput "
        "ReadUnitsPerSecond=12000,WriteUnitsPerSecond=5400"
    )
    assert table_warmth("Registrations", new["Registrations"], Burst(8000)).verdict is Verdict.OK
    assert table_warmth("Inventory", DENIED, BURST).verdict is Verdict.UNKNOWN


@pytest.mark.parametrize(
    ("fact", "verdict", "fix"),
    [
        (FunctionWarmth("pub", "snapstart", True, None), Verdict.OK, ""),
        (FunctionWarmth("reg", "provisioned", False, 200), Verdict.OK, ""),
        (FunctionWarmth("reg", "provisioned", False, 50), Verdict.WILL_NOT_HOLD, "--max-capacity 125"),
        (FunctionWarmth("reg", "provisioned", False, None), Verdict.WILL_NOT_HOLD, "put-provisioned-concurrency"),
        (FunctionWarmth("pub", "snapstart", False, None), Verdict.WILL_NOT_HOLD, "--snap-start ApplyOn=Published"),
        (DENIED, Verdict.UNKNOWN, DENIED.check),
    ],
)
def test_warm_starts_on_the_api_functions(fact: FunctionWarmth | Unreadable, verdict: Verdict, fix: str) -> None:
    check = function_warmth("RegistrationApi", fact, BURST)
    assert check.verdict is verdict
    assert fix in check.fix and (fix or check.fix == "")


def test_ses_production_access_and_rate() -> None:
    assert ses(facts(), BURST).verdict is Verdict.OK
    sandbox = ses(facts(ses=SesQuota(False, 200, 1)), BURST)
    assert sandbox.verdict is Verdict.WILL_NOT_HOLD and "--production-access-enabled" in sandbox.fix
    slow = ses(facts(ses=SesQuota(True, 50000, 14)), BURST)  # production's starting rate
    assert slow.verdict is Verdict.WILL_NOT_HOLD and "--desired-value 84" in slow.fix
    assert ses(facts(ses=SesQuota(True, 1000, 100)), BURST).verdict is Verdict.WILL_NOT_HOLD  # daily quota
    assert ses(facts(ses=DENIED), BURST).verdict is Verdict.UNKNOWN


def test_cache_limits() -> None:
    assert cache(facts(), BURST).verdict is Verdict.OK
    assert cache(facts(cache=CacheLimits("c", 5000)), BURST).verdict is Verdict.OK
    capped = cache(facts(cache=CacheLimits("c", 1000)), BURST)
    assert capped.verdict is Verdict.WILL_NOT_HOLD and "ECPUPerSecond={Maximum=2000}" in capped.fix
    assert cache(facts(cache=DENIED), BURST).verdict is Verdict.UNKNOWN


def test_the_report_shows_each_fix_or_check_under_its_verdict() -> None:
    checks = verdicts(facts(lambda_concurrency=DENIED, ses=SesQuota(False, 200, 1)), BURST)
    text = render(checks, BURST)
    assert "UNKNOWN       Lambda concurrency" in text and "check: aws lambda get-account-settings" in text
    assert "WILL NOT HOLD SES" in text and "fix: aws sesv2 put-account-details" in text
    assert text.endswith("4 OK, 1 WILL NOT HOLD, 1 UNKNOWN")
