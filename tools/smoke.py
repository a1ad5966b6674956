"""End-to-end smoke test of a stage: one runner through the real flow, then everything undone.

    make smoke TARGET=https://… SECRET=<stack output SmokeDirectorSecretArn>
    python -m tools.smoke --target https://… --secret <ARN> [--payment-method pm_card_visa]
    python -m tools.smoke enroll --secret <ARN>          # once per stage, after the deploy

Steps, one line each (a ✗ line and exit status 1 at the first that fails):
 1. read the smoke director's secret (Secrets Manager);
 2. sign in with SRP and a TOTP code (the pool requires both, as for every director);
 3. create an unlisted race with one small event (2 places, 5.00 EUR);
 4. open its registration window now;
 5. hold a place and register one runner, the card confirmed on the server with the
    provider's test PaymentMethod (``pm_card_visa``: the stage must use a test-mode key);
 6. wait until the registration is CONFIRMED (the writer queue drained);
 7. cancel it as the director, with the refund;
 8. clean up: close the window (the race stays unlisted and closed; races are never deleted,
    the audit trail keeps what the smoke test did).
Step 8 runs whenever step 3 succeeded, also after a failure.

Against ``make run``'s stack, leave out ``--secret``: the running stack's moto user pool and
secret are used (local/directors.py), with the same code.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlparse

import boto3
import requests

from tools.smoke_director import DirectorSecret, SignInError, enroll, sign_in

STEPS = 8
CONFIRM_TIMEOUT_S = 120.0
OPEN_TIMEOUT_S = 30.0  # the window's open reaches every environment within seconds


class StepFailed(Exception):
    pass


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _check(resp: requests.Response, *expected: int) -> dict[str, Any]:
    if resp.status_code not in expected:
        where = f"{resp.request.method} {urlparse(resp.url).path}"
        raise StepFailed(f"{where} answered {resp.status_code}: {resp.text[:300]}")
    body: dict[str, Any] = resp.json() if resp.content else {}
    return body


@dataclass
class Smoke:
    target: str
    secret_id: str
    payment_method: str = "pm_card_visa"
    out: Callable[[str], None] = print
    session: requests.Session = field(default_factory=requests.Session)
    race_id: str = ""
    event_id: str = ""
    registration_id: str = ""
    _n: int = 0

    def url(self, path: str) -> str:
        return self.target.rstrip("/") + path

    def step(self, title: str, action: Callable[[], str]) -> None:
        self._n += 1
        t0 = time.monotonic()
        try:
            detail = action()
        except (StepFailed, SignInError, requests.RequestException) as exc:
            self.out(f"[smoke] {self._n}/{STEPS} ✗ {title}: {exc}")
            raise StepFailed(title) from exc
        except Exception as exc:  # an AWS error (botocore) or a surprise: still one clear line
            self.out(f"[smoke] {self._n}/{STEPS} ✗ {title}: {type(exc).__name__}: {exc}")
            raise StepFailed(title) from exc
        self.out(f"[smoke] {self._n}/{STEPS} ✓ {title} — {detail} ({time.monotonic() - t0:.1f} s)")

    # -- the steps --------------------------------------------------------------------------
    def run(self) -> int:
        self.session.headers["Accept"] = "application/json"
        director: dict[str, DirectorSecret] = {}
        try:
            self.step("read the smoke director's secret", lambda: self._read_secret(director))
            self.step("sign in (SRP + TOTP)", lambda: self._sign_in(director["secret"]))
            self.step("create an unlisted race", self._create_race)
            self.step("open registration now", self._open)
            self.step("register one runner with the test card", self._register)
            self.step("wait for CONFIRMED", self._wait_confirmed)
            self.step("cancel with a refund", self._cancel)
        except StepFailed:
            self._clean_up()
            self.out("[smoke] FAILED")
            return 1
        try:
            self.step("clean up", self._close)
        except StepFailed:
            self.out("[smoke] FAILED")
            return 1
        self.out(f"[smoke] OK: {self.target} registered, confirmed and refunded one runner")
        return 0

    def _read_secret(self, into: dict[str, DirectorSecret]) -> str:
        into["secret"] = DirectorSecret.read(boto3.client("secretsmanager"), self.secret_id)
        return f"{into['secret'].username}, pool {into['secret'].userPoolId}"

    def _sign_in(self, secret: DirectorSecret) -> str:
        token = sign_in(boto3.client("cognito-idp"), secret)
        self.session.headers["Authorization"] = f"Bearer {token}"
        return "ID token issued"

    def _create_race(self) -> str:
        now = datetime.now(UTC)
        body = {
            "name": f"Racecap smoke test {now:%Y-%m-%d %H:%M} {uuid.uuid4().hex[:6]}",
            "raceDate": (now + timedelta(days=60)).date().isoformat(),
            "currency": "EUR",
            "registrationOpensAt": _iso(now + timedelta(days=1)),
            "registrationClosesAt": _iso(now + timedelta(days=30)),
            "location": "Racecap smoke test",
            "listing": "UNLISTED",  # open by its link only: never on the public list
            "events": [{"name": "Smoke 1K", "cap": 2, "priceCents": 500}],
        }
        race = _check(self.session.post(self.url("/api/admin/races"), json=body, timeout=30), 201)
        self.race_id = str(race["raceId"])
        self.event_id = str(race["events"][0]["eventId"])
        return f"race {self.race_id}"

    def _open(self) -> str:
        window = _check(self.session.post(self.url(f"/api/admin/races/{self.race_id}/window/open"), timeout=30), 200)
        return f"registration {window['registrationState']}"

    def _register(self) -> str:
        runner = requests.Session()
        runner.headers["Accept"] = "application/json"
        deadline = time.monotonic() + OPEN_TIMEOUT_S
        while True:  # until the opening has reached the environment that answers
            hold = runner.post(self.url(f"/api/races/{self.race_id}/events/{self.event_id}/holds"), timeout=30)
            if hold.status_code != 409 or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        hold_id = _check(hold, 201)["holdId"]
        body = {
            "email": f"smoke-{uuid.uuid4().hex[:10]}@example.com",
            "firstName": "Smoke",
            "lastName": "Test",
            "dateOfBirth": "1990-01-01",
            "paymentMethod": self.payment_method,
        }
        registration = _check(runner.post(self.url(f"/api/holds/{hold_id}/registration"), json=body, timeout=60), 202)
        self.registration_id = str(registration["registrationId"])
        return f"hold {hold_id}, paid, registration {self.registration_id} {registration.get('status', '')}".rstrip()

    def _wait_confirmed(self) -> str:
        deadline = time.monotonic() + CONFIRM_TIMEOUT_S
        status = ""
        while time.monotonic() < deadline:
            resp = requests.get(self.url(f"/api/registrations/{self.registration_id}"), timeout=30)
            if resp.status_code == 200:
                status = resp.json()["status"]
                if status == "CONFIRMED":
                    return f"bib {resp.json().get('bib', '?')}"
                if status == "FAILED":
                    raise StepFailed("the registration FAILED")
            time.sleep(1.0)
        raise StepFailed(f"not CONFIRMED within {CONFIRM_TIMEOUT_S:.0f} s (last status {status or 'none'})")

    def _cancel(self) -> str:
        path = f"/api/admin/races/{self.race_id}/registrations/{self.registration_id}/cancel"
        done = _check(self.session.post(self.url(path), json={"reason": "smoke test"}, timeout=60), 200)
        if done["status"] != "CANCELLED" or not done.get("refundId"):
            raise StepFailed(f"cancel answered {done}")
        return f"refund {done['refundId']} of {done['amountCents']} {done['currency']}"

    def _close(self) -> str:
        window = _check(self.session.post(self.url(f"/api/admin/races/{self.race_id}/window/close"), timeout=30), 200)
        return f"race {self.race_id} {window['registrationState']}, unlisted"

    def _clean_up(self) -> None:
        if not self.race_id:
            return
        self._n = STEPS - 1
        try:
            self.step("clean up", self._close)
        except StepFailed:
            pass


def _local_stack_defaults(target: str) -> str | None:
    """Against ``make run``'s stack: point boto3 at its servers, answer its smoke secret."""
    if urlparse(target).hostname not in {"127.0.0.1", "localhost"}:
        return None
    from local.run_dir import RUN_DIR, running_stack

    info = running_stack(RUN_DIR)
    if info is None or not info.get("smokeSecret"):
        return None
    for key, value in info["env"].items():
        if key.startswith("AWS_"):
            os.environ.setdefault(key, value)
    return str(info["smokeSecret"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.smoke", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", nargs="?", choices=["run", "enroll"], default="run")
    parser.add_argument("--target", help="the stage's site or API base URL (https://…)")
    parser.add_argument("--secret", help="the smoke director's secret (stack output SmokeDirectorSecretArn)")
    parser.add_argument("--payment-method", default="pm_card_visa", help="the provider's test PaymentMethod")
    args = parser.parse_args(argv)
    secret = args.secret or (_local_stack_defaults(args.target) if args.target else None)
    if not secret:
        parser.error("--secret is required (the stack output SmokeDirectorSecretArn)")
    if args.command == "enroll":
        d = enroll(boto3.client("cognito-idp"), boto3.client("secretsmanager"), secret)
        print(f"[smoke] enrolled {d.username} in {d.userPoolId}: TOTP seed kept in {secret}")
        return 0
    if not args.target:
        parser.error("--target is required")
    return Smoke(args.target, secret, args.payment_method, out=lambda line: print(line, flush=True)).run()


if __name__ == "__main__":
    sys.exit(main())
