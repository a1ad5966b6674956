"""`make preflight` against the local stack's moto server, seeded where moto can be seeded:
the stage's HTTP API with its stage throttle, its tables with warm throughput (one raised,
the others at a new table's default), its API functions, and the warm-start target the stack
registers for RegistrationApi. What moto cannot answer (Lambda GetAccountSettings, Service
Quotas for Lambda, ElastiCache Serverless) must come out UNKNOWN with the command to check by
hand, and SES (moto's fixed sandbox quota) WILL NOT HOLD — each verdict appears."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from typing import Any

import boto3
import pytest

import blueprint
from local.stack import LocalStack

STACK = "racecap-preflight"
OTHER_STACK = "racecap-other"


def _client(stack: LocalStack, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=f"http://127.0.0.1:{stack.ports.s3}",
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def _tags(bp_id: str, stack_name: str = STACK) -> dict[str, str]:
    return {"aws:cloudformation:stack-name": stack_name, "racecap:blueprint-id": bp_id}


@pytest.fixture(scope="module")
def seeded(stack: LocalStack) -> LocalStack:
    role = _client(stack, "iam").create_role(RoleName=f"{STACK}-api", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("handler.py", "def handler(event, context):\n    return event\n")
    lam = _client(stack, "lambda")
    for fn in blueprint.FUNCTIONS:
        if fn.warm_start is not None:  # named as the local stack names them: the blueprint id
            lam.create_function(
                FunctionName=fn.id, Runtime="python3.12", Role=role, Handler="handler.handler",
                Code={"ZipFile": code.getvalue()}, Tags=_tags(fn.id),
            )  # fmt: skip
    ddb = _client(stack, "dynamodb")
    for table_id, warm in (("Inventory", None), ("Registrations", (30000, 10000))):
        extra = {"WarmThroughput": {"ReadUnitsPerSecond": warm[0], "WriteUnitsPerSecond": warm[1]}} if warm else {}
        ddb.create_table(
            TableName=f"{STACK}-{table_id}",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
            Tags=[{"Key": k, "Value": v} for k, v in _tags(table_id).items()],
            **extra,
        )
    # Another stage's table in the same account must not be taken for ours.
    ddb.create_table(
        TableName=f"{OTHER_STACK}-Registrations",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        Tags=[{"Key": k, "Value": v} for k, v in _tags("Registrations", OTHER_STACK).items()],
        WarmThroughput={"ReadUnitsPerSecond": 90000, "WriteUnitsPerSecond": 90000},
    )
    api = _client(stack, "apigatewayv2")
    api_id = api.create_api(Name=STACK, ProtocolType="HTTP", Tags={"aws:cloudformation:stack-name": STACK})["ApiId"]
    api.create_stage(
        ApiId=api_id,
        StageName="$default",
        DefaultRouteSettings={"ThrottlingRateLimit": 1000.0, "ThrottlingBurstLimit": 2000},
    )
    return stack


def preflight(stack: LocalStack, runners_per_minute: int, stack_name: str = STACK) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{stack.ports.s3}",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "1",  # moto's 500s for an API it lacks are not worth retrying
    }
    cmd = [
        sys.executable,
        "-m",
        "tools.preflight",
        "--stack",
        stack_name,
        "--runners-per-minute",
        str(runners_per_minute),
    ]
    done = subprocess.run(cmd, env=env, cwd=blueprint.ROOT, capture_output=True, text=True, timeout=120, check=False)
    print(done.stdout, done.stderr)  # the output, shown with -s and in a failure's report
    return done


def _line(output: str, check: str) -> str:
    [line] = [line for line in output.splitlines() if f" {check}:" in line]
    return line.strip()


def _after(output: str, check: str) -> str:
    lines = output.splitlines()
    i = next(n for n, line in enumerate(lines) if f" {check}:" in line)
    return lines[i + 1].strip()


def test_the_design_burst_gets_every_verdict_with_its_fix_or_check(seeded: LocalStack) -> None:
    done = preflight(seeded, 5000)
    out = done.stdout

    assert done.returncode == 1, out + done.stderr  # something will not hold
    assert out.startswith("preflight for 5000 runners/minute (~500 API calls/s, ~125 busy environments")
    assert _line(out, "API Gateway stage throttle").startswith("OK")
    assert "rate 1000/s, burst 2000" in _line(out, "API Gateway stage throttle")
    # A new on-demand table is warm for 4,000 WCU/s: the design burst fits each table's own units.
    inventory = _line(out, "DynamoDB warm throughput: Inventory")
    assert inventory.startswith("OK") and "4000 WCU/s" in inventory and "needs up to 3375 WCU/s" in inventory
    assert _line(out, "DynamoDB warm throughput: Registrations").startswith("OK")
    # The stack registered RegistrationApi's warm-start target up to its declared maximum.
    registration_api = _line(out, "warm starts: RegistrationApi")
    assert registration_api.startswith("OK")
    assert f"up to {blueprint.function('RegistrationApi').provisioned_max}" in registration_api
    # moto reports SnapStart off whatever was asked: the SnapStart functions are flagged, with the fix.
    assert _line(out, "warm starts: PublicApi").startswith("WILL NOT HOLD")
    assert "--snap-start ApplyOn=PublishedVersions" in _after(out, "warm starts: PublicApi")
    # SES v2 GetAccount is missing; v1 GetSendQuota answers moto's sandbox quota (200 a day).
    assert _line(out, "SES production access and send rate").startswith("WILL NOT HOLD")
    assert "sandbox (Max24HourSend 200" in out
    for unknown in ("Lambda concurrency", "cache limits (ElastiCache Serverless)"):
        assert _line(out, unknown).startswith("UNKNOWN"), unknown
        assert _after(out, unknown).startswith("check: aws ")
    assert "not implemented there" in _line(out, "Lambda concurrency")


def test_a_bigger_burst_needs_the_holds_table_raised_with_the_command_to_do_it(seeded: LocalStack) -> None:
    out = preflight(seeded, 8000).stdout

    inventory = _line(out, "DynamoDB warm throughput: Inventory")
    assert inventory.startswith("WILL NOT HOLD") and "4000 WCU/s" in inventory
    assert _after(out, "DynamoDB warm throughput: Inventory") == (
        f"fix: aws dynamodb update-table --table-name {STACK}-Inventory "
        "--warm-throughput ReadUnitsPerSecond=12000,WriteUnitsPerSecond=5400"
    )
    assert _line(out, "DynamoDB warm throughput: Registrations").startswith("OK")  # raised, and lighter


def test_a_smaller_burst_fits_the_new_tables(seeded: LocalStack) -> None:
    out = preflight(seeded, 3000).stdout

    for table_id in ("Inventory", "Registrations"):
        assert _line(out, f"DynamoDB warm throughput: {table_id}").startswith("OK")
    assert "fix: aws dynamodb" not in out


def test_a_stack_that_is_not_there_is_unknown_not_ok(seeded: LocalStack) -> None:
    done = preflight(seeded, 5000, stack_name="racecap-nowhere")

    assert done.returncode == 1  # SES's sandbox is the account's, whichever stage
    assert _line(done.stdout, "DynamoDB warm throughput: Registrations").startswith("UNKNOWN")
    assert _line(done.stdout, "warm starts: RegistrationApi").startswith("UNKNOWN")
    assert _line(done.stdout, "API Gateway stage throttle").startswith("UNKNOWN")
    assert " OK " not in done.stdout.replace("0 OK,", "")
