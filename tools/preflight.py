"""Before an opening: will the account and the stage take the race's burst?

    make preflight TARGET=<CloudFormation stack name> RUNNERS_PER_MINUTE=5000
    python -m tools.preflight --stack <name> --runners-per-minute 5000

Reads the facts with the environment's AWS credentials and region (``AWS_ENDPOINT_URL_*``
point it elsewhere: the tests use moto's server), then prints one verdict per check
(``tools/preflight_rules.py``): OK, WILL NOT HOLD with the fixing command, or UNKNOWN with
the reason and the command to check by hand. Exit status 0 when every check is OK, 1 when
one will not hold, 2 when nothing will not hold but some are unknown.

The stage's resources are found by the tags CloudFormation puts on them
(``aws:cloudformation:stack-name``) and the blueprint id the CDK app tags each with; the
Lambda concurrency limit from Lambda's GetAccountSettings, else Service Quotas (L-B99A9384);
SES from v2 GetAccount, else v1 GetSendQuota (Max24HourSend 200 is the sandbox). An API that
cannot be read (not implemented where it runs, access denied) makes that check UNKNOWN.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import boto3
from botocore.exceptions import BotoCoreError, ClientError

import blueprint
from local.runtime import install_layer_path

install_layer_path()

from tools.preflight_rules import (  # noqa: E402
    BURST_TABLES,
    SES_SANDBOX_DAILY,
    ApiThrottle,
    Burst,
    CacheLimits,
    Facts,
    FunctionWarmth,
    SesQuota,
    TableWarmth,
    Unreadable,
    Verdict,
    render,
    verdicts,
)

STACK_TAG = "aws:cloudformation:stack-name"
BLUEPRINT_TAG = "racecap:blueprint-id"
WARM_FUNCTIONS = tuple(fn.id for fn in blueprint.FUNCTIONS if fn.warm_start is not None)
T = TypeVar("T")


def _read(check: str, read: Callable[[], T]) -> T | Unreadable:
    """A fact, or why it could not be read (an error answer, a missing permission)."""
    try:
        return read()
    except ClientError as exc:
        err = exc.response.get("Error", {})
        return Unreadable(f"{exc.operation_name}: {err.get('Code', '?')} ({_plain(err.get('Message', ''))})", check)
    except (BotoCoreError, KeyError, LookupError, ValueError) as exc:
        return Unreadable(f"{type(exc).__name__}: {exc}", check)
    except Exception as exc:  # e.g. an unparseable answer from an endpoint that lacks the API
        return Unreadable(f"{type(exc).__name__}: {_plain(str(exc))}", check)


def _plain(message: str) -> str:
    """One line of an error; an HTML error page (an endpoint without that API) said so."""
    if "<html" in message.lower() or "<!doctype" in message.lower():
        status = re.search(r"<title>([^<]*)</title>", message)
        return (
            f"the endpoint answered an HTML page ({status.group(1) if status else 'error'}): API not implemented there"
        )
    return " ".join(message.split())[:200]


class Gatherer:
    def __init__(self, stack: str, session: Any | None = None) -> None:
        self.stack = stack
        self.session = session or boto3.session.Session()

    def client(self, name: str) -> Any:
        make: Any = self.session.client  # one factory for every service the checks read
        return make(name)

    # -- the stage's resources, by tag --------------------------------------------------
    def _ours(self, tags: dict[str, str]) -> str | None:
        return tags.get(BLUEPRINT_TAG) if tags.get(STACK_TAG) == self.stack else None

    def functions(self) -> dict[str, str]:
        """Blueprint id -> function name."""
        lam, found = self.client("lambda"), {}
        for page in lam.get_paginator("list_functions").paginate():
            for fn in page["Functions"]:
                bp = self._ours(lam.list_tags(Resource=fn["FunctionArn"]).get("Tags", {}))
                if bp:
                    found[bp] = fn["FunctionName"]
        return found

    def tables(self) -> dict[str, str]:
        ddb, found = self.client("dynamodb"), {}
        for page in ddb.get_paginator("list_tables").paginate():
            for name in page["TableNames"]:
                arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
                tags = {t["Key"]: t["Value"] for t in ddb.list_tags_of_resource(ResourceArn=arn).get("Tags", [])}
                bp = self._ours(tags)
                if bp:
                    found[bp] = name
        return found

    def api(self) -> tuple[str, str]:
        apis = [
            a for a in self.client("apigatewayv2").get_apis()["Items"] if a.get("Tags", {}).get(STACK_TAG) == self.stack
        ]
        if len(apis) != 1:
            raise LookupError(f"{len(apis)} HTTP APIs tagged {STACK_TAG}={self.stack}")
        return apis[0]["ApiId"], "$default"

    # -- the facts ------------------------------------------------------------------------
    def lambda_concurrency(self) -> int | Unreadable:
        check = "aws lambda get-account-settings --query AccountLimit.ConcurrentExecutions"
        first = _read(
            check, lambda: int(self.client("lambda").get_account_settings()["AccountLimit"]["ConcurrentExecutions"])
        )
        if not isinstance(first, Unreadable):
            return first
        quota = _read(
            check,
            lambda: int(
                self.client("service-quotas").get_service_quota(ServiceCode="lambda", QuotaCode="L-B99A9384")["Quota"][
                    "Value"
                ]
            ),
        )
        if isinstance(quota, Unreadable):
            return Unreadable(f"{first.reason}; Service Quotas: {quota.reason}", check)
        return quota

    def api_throttle(self, api_id: str, stage: str) -> ApiThrottle | Unreadable:
        def read() -> ApiThrottle:
            settings = (
                self.client("apigatewayv2").get_stage(ApiId=api_id, StageName=stage).get("DefaultRouteSettings", {})
            )
            rate = settings.get("ThrottlingRateLimit")
            return ApiThrottle(None if rate is None else float(rate), settings.get("ThrottlingBurstLimit"))

        return _read(f"aws apigatewayv2 get-stage --api-id {api_id} --stage-name '{stage}'", read)

    def table(self, name: str) -> TableWarmth | Unreadable:
        def read() -> TableWarmth:
            warm = self.client("dynamodb").describe_table(TableName=name)["Table"]["WarmThroughput"]
            return TableWarmth(name, int(warm["ReadUnitsPerSecond"]), int(warm["WriteUnitsPerSecond"]))

        return _read(f"aws dynamodb describe-table --table-name {name} --query Table.WarmThroughput", read)

    def function(self, bp_id: str, name: str) -> FunctionWarmth | Unreadable:
        def read() -> FunctionWarmth:
            config = self.client("lambda").get_function_configuration(FunctionName=name)
            snap = config.get("SnapStart", {}).get("ApplyOn") == "PublishedVersions"
            targets = self.client("application-autoscaling").describe_scalable_targets(
                ServiceNamespace="lambda",
                ResourceIds=[f"function:{name}:{blueprint.LIVE_ALIAS}"],
                ScalableDimension="lambda:function:ProvisionedConcurrency",
            )["ScalableTargets"]
            declared = next(fn.warm_start for fn in blueprint.FUNCTIONS if fn.id == bp_id)
            return FunctionWarmth(name, declared, snap, int(targets[0]["MaxCapacity"]) if targets else None)

        return _read(f"aws lambda get-function-configuration --function-name {name} --query SnapStart", read)

    def ses(self) -> SesQuota | Unreadable:
        def v2() -> SesQuota:
            account = self.client("sesv2").get_account()
            quota = account["SendQuota"]
            production = bool(account["ProductionAccessEnabled"])
            return SesQuota(production, float(quota["Max24HourSend"]), float(quota["MaxSendRate"]))

        def v1() -> SesQuota:
            # v1 has no production flag; the sandbox's daily quota is 200 (AWS's own test).
            quota = self.client("ses").get_send_quota()
            daily = float(quota["Max24HourSend"])
            return SesQuota(daily > SES_SANDBOX_DAILY, daily, float(quota["MaxSendRate"]))

        check = "aws sesv2 get-account --query '{production:ProductionAccessEnabled,quota:SendQuota}'"
        first = _read(check, v2)
        if not isinstance(first, Unreadable):
            return first
        second = _read(check, v1)
        return Unreadable(f"{first.reason}; v1: {second.reason}", check) if isinstance(second, Unreadable) else second

    def cache(self) -> CacheLimits | Unreadable:
        def read() -> CacheLimits:
            ec = self.client("elasticache")

            def stack_of(arn: str) -> str | None:
                tags = ec.list_tags_for_resource(ResourceName=arn)["TagList"]
                return next((t["Value"] for t in tags if t["Key"] == STACK_TAG), None)

            caches = ec.describe_serverless_caches()["ServerlessCaches"]
            ours = [c for c in caches if stack_of(c["ARN"]) == self.stack]
            if not ours:
                raise LookupError(f"no serverless cache tagged {STACK_TAG}={self.stack}")
            limits = ours[0].get("CacheUsageLimits", {}).get("ECPUPerSecond", {})
            return CacheLimits(ours[0]["ServerlessCacheName"], limits.get("Maximum"))

        return _read("aws elasticache describe-serverless-caches --query 'ServerlessCaches[].CacheUsageLimits'", read)

    @staticmethod
    def _each(found: dict[str, str] | Unreadable, bp_id: str, read: Callable[[str], T], missing: str) -> T | Unreadable:
        if isinstance(found, Unreadable):
            return found
        check = f"aws resourcegroupstaggingapi get-resources --tag-filters Key={STACK_TAG},Values=<stack>"
        return read(found[bp_id]) if bp_id in found else Unreadable(missing, check)

    def facts(self) -> Facts:
        tables = _read("aws dynamodb list-tables", self.tables)
        functions = _read("aws lambda list-functions", self.functions)
        api = _read(f'aws apigatewayv2 get-apis --query "Items[?Tags.\\"{STACK_TAG}\\"==\'{self.stack}\']"', self.api)
        api_id, stage = ("?", "$default") if isinstance(api, Unreadable) else api
        no_such = f"not found among the resources tagged {STACK_TAG}={self.stack}"
        return Facts(
            api_id=api_id,
            stage_name=stage,
            lambda_concurrency=self.lambda_concurrency(),
            reserved_concurrency=sum(fn.reserved_concurrency or 0 for fn in blueprint.FUNCTIONS),
            api_throttle=api if isinstance(api, Unreadable) else self.api_throttle(api_id, stage),
            tables={t: self._each(tables, t, self.table, no_such) for t in _burst_tables()},
            functions={
                f: self._each(functions, f, functools.partial(self.function, f), no_such) for f in WARM_FUNCTIONS
            },
            ses=self.ses(),
            cache=self.cache(),
        )


def _burst_tables() -> tuple[str, ...]:
    return tuple(t for t in BURST_TABLES if any(table.id == t for table in blueprint.TABLES))


def exit_status(verdict_list: list[Any]) -> int:
    found = {c.verdict for c in verdict_list}
    return 1 if Verdict.WILL_NOT_HOLD in found else 2 if Verdict.UNKNOWN in found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.preflight", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stack", required=True, help="the stage's CloudFormation stack name")
    parser.add_argument("--runners-per-minute", type=float, required=True, help="the race's expected burst")
    args = parser.parse_args(argv)
    burst = Burst(args.runners_per_minute)
    checks = verdicts(Gatherer(args.stack).facts(), burst)
    print(render(checks, burst))
    return exit_status(checks)


if __name__ == "__main__":
    sys.exit(main())
