"""`make smoke` against the test session's stack: the same code as against a stage (SRP + TOTP
sign-in in moto's user pool, the secret in moto's Secrets Manager, the real API and payment
flow), and a non-zero exit with one ✗ line when a step breaks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import boto3
import requests

import blueprint
from local.stack import LocalStack

from .admin import wait_until
from .flows import intents_for, standin


def run_smoke(stack: LocalStack, *args: str, secret: str | None = None) -> subprocess.CompletedProcess[str]:
    assert stack.directors is not None
    cmd = [
        sys.executable,
        "-m",
        "tools.smoke",
        "--target",
        stack.url,
        "--secret",
        secret or stack.directors.smoke_secret,
    ]
    env = {**os.environ, **stack.aws_env()}
    done = subprocess.run(
        [*cmd, *args], env=env, cwd=blueprint.ROOT, capture_output=True, text=True, timeout=400, check=False
    )
    print(done.stdout, done.stderr)  # shown with -s, and in the report of a failure
    return done


def _secrets(stack: LocalStack) -> Any:
    env = stack.aws_env()
    return boto3.client(
        "secretsmanager",
        endpoint_url=env["AWS_ENDPOINT_URL_SECRETS_MANAGER"],
        region_name=env["AWS_REGION"],
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def test_the_smoke_test_registers_confirms_refunds_and_closes(stack: LocalStack) -> None:
    done = run_smoke(stack)

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(" ")[1] for line in lines if line.startswith("[smoke] ") and "/8" in line] == [
        f"{n}/8" for n in range(1, 9)
    ]
    assert all(" ✓ " in line for line in lines if "/8" in line)
    race_id = _found(r"create an unlisted race — race (\S+)", done.stdout)
    hold_id = _found(r"hold (\S+), paid", done.stdout)
    refund_id = _found(r"refund (re_\S+) of 500 EUR", done.stdout)
    # What a runner and the provider now see: the race unlisted and closed, the one payment refunded.
    assert _closed(stack, race_id)
    assert race_id not in {r["raceId"] for r in requests.get(f"{stack.url}/api/races", timeout=10).json()["races"]}
    [intent] = intents_for(stack, hold_id=hold_id)
    assert intent["status"] == "succeeded" and intent["amount_received"] == 500
    refund = standin(stack).get(f"{stack.stripe_url}/v1/refunds/{refund_id}").json()
    assert (refund["payment_intent"], refund["amount"], refund["status"]) == (intent["id"], 500, "succeeded")


def _found(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in the output"
    return match.group(1)


def _closed(stack: LocalStack, race_id: str) -> bool:
    # The public answer is cached for a moment (the version stamp): wait for the close to show.
    return bool(
        wait_until(lambda: requests.get(f"{stack.url}/api/races/{race_id}", timeout=10).json()["status"] == "CLOSED")
    )


def test_a_wrong_totp_seed_fails_the_sign_in_step_and_creates_nothing(stack: LocalStack) -> None:
    assert stack.directors is not None
    secrets = _secrets(stack)
    good = json.loads(secrets.get_secret_value(SecretId=stack.directors.smoke_secret)["SecretString"])
    secrets.create_secret(
        Name="racecap-smoke-director-wrong-seed",
        SecretString=json.dumps({**good, "totpSeed": "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"}),
    )

    done = run_smoke(stack, secret="racecap-smoke-director-wrong-seed")

    assert done.returncode == 1
    assert "[smoke] 2/8 ✗ sign in (SRP + TOTP)" in done.stdout
    assert "create an unlisted race" not in done.stdout
    assert done.stdout.rstrip().endswith("[smoke] FAILED")


def test_a_declined_card_fails_the_register_step_and_still_cleans_up(stack: LocalStack) -> None:
    done = run_smoke(stack, "--payment-method", "pm_card_chargeDeclined")

    assert done.returncode == 1
    assert "[smoke] 5/8 ✗ register one runner with the test card" in done.stdout
    assert "402" in done.stdout
    assert "[smoke] 8/8 ✓ clean up" in done.stdout
    assert _closed(stack, _found(r"create an unlisted race — race (\S+)", done.stdout))
