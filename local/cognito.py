"""Signing in to a Cognito directors' pool as a person does: SRP (pycognito), then a TOTP code (RFC 6238).

The directors' user pool requires TOTP MFA and allows SRP only, so the smoke test (``tools.smoke``)
and the local demo director (``local.directors``, ``make token``, ``make totp``) sign in exactly
like a person: SRP password verifier, then the SOFTWARE_TOKEN_MFA challenge answered with the
current code of the seed kept in the director's secret. ``enroll`` does the one-time set-up after a
deploy (the stack cannot: a TOTP seed only exists once a signed-in user asks Cognito for one): it
makes the stack's generated password the user's permanent one, answers MFA_SETUP, and writes the
seed into the secret.

Nothing here knows whether it talks to AWS or to the local stack (moto's cognito-idp and
Secrets Manager): ``AWS_ENDPOINT_URL_*`` decide. It lives in ``local/`` because the local stack
provisions its directors with it, and ``tools/`` may import ``local`` but not the other way round.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from botocore.exceptions import ClientError
from cryptography.hazmat.primitives.hashes import SHA1
from cryptography.hazmat.primitives.twofactor.totp import TOTP
from pycognito.aws_srp import AWSSRP
from pycognito.exceptions import SoftwareTokenMFAChallengeException

TOTP_STEP_S = 30
# A code read in the last seconds of its 30 s step can expire on the way; wait for the next.
TOTP_MARGIN_S = 3.0


class SignInError(Exception):
    """The smoke director could not sign in; the message says what to do."""


@dataclass(frozen=True)
class DirectorSecret:
    username: str
    password: str
    userPoolId: str
    clientId: str
    totpSeed: str = ""

    @classmethod
    def read(cls, secrets: Any, secret_id: str) -> DirectorSecret:
        value = json.loads(secrets.get_secret_value(SecretId=secret_id)["SecretString"])
        missing = [k for k in ("username", "password", "userPoolId", "clientId") if not value.get(k)]
        if missing:
            lacks = ", ".join(missing)
            raise SignInError(f"the smoke director's secret lacks {lacks}: is it the stack's SmokeDirector secret?")
        return cls(**{k: str(value.get(k, "")) for k in cls.__dataclass_fields__})

    def write(self, secrets: Any, secret_id: str) -> None:
        secrets.put_secret_value(SecretId=secret_id, SecretString=json.dumps(asdict(self)))


def totp_code(seed: str, *, sleep: Any = time.sleep, clock: Any = time.time) -> str:
    """The current code; near the end of its step, the next step's (a code read in the last
    seconds may be stale when Cognito checks it)."""
    left = TOTP_STEP_S - clock() % TOTP_STEP_S
    if left < TOTP_MARGIN_S:
        sleep(left + 0.2)
    now = clock()
    return _totp(seed).generate(int(now)).decode()


def _totp(seed: str) -> TOTP:
    # cryptography's RFC 6238 TOTP (Cognito: SHA-1, 6 digits, 30 s). Not pyotp: 2.12 refuses
    # seeds under 112 bits, and moto's pool hands every user one fixed 80-bit seed (Cognito's
    # own are 160 bits), so pyotp could not sign in where the local tests run this code.
    key = base64.b32decode(seed + "=" * (-len(seed) % 8), casefold=True)
    return TOTP(key, 6, SHA1(), TOTP_STEP_S, enforce_key_length=False)  # noqa: S303 - RFC 6238 as Cognito uses it


def _next_step(sleep: Any = time.sleep, clock: Any = time.time) -> None:
    sleep(TOTP_STEP_S - clock() % TOTP_STEP_S + 0.2)


def _srp(cognito: Any, d: DirectorSecret) -> dict[str, Any]:
    srp = AWSSRP(username=d.username, password=d.password, pool_id=d.userPoolId, client_id=d.clientId, client=cognito)
    try:
        return dict(srp.authenticate_user())
    except SoftwareTokenMFAChallengeException as challenge:
        return dict(challenge.get_tokens())


def _late_code(exc: ClientError) -> bool:
    """Cognito refused the code: a wrong seed, or a code that expired on the way (a slow answer
    on a loaded machine). One more try with the next step's code tells them apart."""
    return exc.response.get("Error", {}).get("Code") in {"CodeMismatchException", "EnableSoftwareTokenMFAException"}


def sign_in(cognito: Any, d: DirectorSecret, *, tries: int = 2) -> str:
    """The director's ID token (what the API's JWT authorizer checks), after SRP and TOTP."""
    if not d.totpSeed:
        raise SignInError("the secret has no TOTP seed yet: run `python -m tools.smoke enroll --secret …` once")
    answer = _srp(cognito, d)
    if answer.get("ChallengeName") == "SOFTWARE_TOKEN_MFA":
        try:
            answer = cognito.respond_to_auth_challenge(
                ClientId=d.clientId,
                ChallengeName="SOFTWARE_TOKEN_MFA",
                Session=answer["Session"],
                ChallengeResponses={"USERNAME": d.username, "SOFTWARE_TOKEN_MFA_CODE": totp_code(d.totpSeed)},
            )
        except ClientError as exc:
            if tries > 1 and _late_code(exc):
                _next_step()
                return sign_in(cognito, d, tries=tries - 1)
            raise
    if "AuthenticationResult" not in answer:
        raise SignInError(f"Cognito asked for {answer.get('ChallengeName')!r} instead of issuing tokens")
    return str(answer["AuthenticationResult"]["IdToken"])


def enroll(cognito: Any, secrets: Any, secret_id: str) -> DirectorSecret:
    """Once per stage: the generated password becomes permanent, TOTP is set up, the seed is kept.
    Needs the operator's ``cognito-idp:AdminSetUserPassword`` and ``secretsmanager:PutSecretValue``
    (the stack's SmokeEnroller policy); signing in afterwards needs only the secret."""
    d = DirectorSecret.read(secrets, secret_id)
    cognito.admin_set_user_password(UserPoolId=d.userPoolId, Username=d.username, Password=d.password, Permanent=True)
    answer = _srp(cognito, d)
    if answer.get("ChallengeName") == "SOFTWARE_TOKEN_MFA" and d.totpSeed:
        sign_in(cognito, d)  # already enrolled: prove the kept seed still works
        return d
    if answer.get("ChallengeName") != "MFA_SETUP":
        raise SignInError(
            f"expected Cognito's MFA_SETUP challenge, got {answer.get('ChallengeName')!r}: if the user has a TOTP "
            "device whose seed is lost, reset it (aws cognito-idp admin-set-user-mfa-preference "
            "--software-token-mfa-settings Enabled=false …) and enroll again"
        )
    associated = cognito.associate_software_token(Session=answer["Session"])
    seed = associated["SecretCode"]
    session = associated.get("Session", answer["Session"])
    try:
        verified = cognito.verify_software_token(
            Session=session, UserCode=totp_code(seed), FriendlyDeviceName="racecap-smoke"
        )
    except ClientError as exc:
        if not _late_code(exc):
            raise
        _next_step()
        verified = cognito.verify_software_token(
            Session=session, UserCode=totp_code(seed), FriendlyDeviceName="racecap-smoke"
        )
    if verified.get("Status") != "SUCCESS":
        raise SignInError(f"Cognito did not accept the first TOTP code ({verified.get('Status')})")
    done = cognito.respond_to_auth_challenge(
        ClientId=d.clientId,
        ChallengeName="MFA_SETUP",
        Session=verified["Session"],
        ChallengeResponses={"USERNAME": d.username},
    )
    cognito.set_user_mfa_preference(
        AccessToken=done["AuthenticationResult"]["AccessToken"],
        SoftwareTokenMfaSettings={"Enabled": True, "PreferredMfa": True},
    )
    enrolled = replace(d, totpSeed=seed)
    enrolled.write(secrets, secret_id)
    return enrolled
