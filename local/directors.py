"""The directors' user pool, locally: moto's cognito-idp, set up as the stack's pool is.

The local issuer (``local.auth``) mints tokens for tests and ``make token``; this pool is for
what must sign in as on AWS — ``make smoke``'s director, with SRP and a TOTP code. Like the
CDK pool it requires TOTP MFA (moto checks the code when the moto server runs with
``MOTO_COGNITO_IDP_USER_POOL_ENABLE_TOTP=true``; it does not check the SRP proof) and its
app client allows SRP only. The smoke director and its secret are made as the stack
declares them, then enrolled by the same code an operator runs after a deploy
(``local.cognito.enroll``). The gateway trusts the pool's tokens next to the local
issuer's (``LocalAuthorizer.from_env``).
"""

from __future__ import annotations

import argparse
import json
import secrets as random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

import blueprint
from local.run_dir import RUN_DIR, running_stack

JWKS_FILE = "cognito-jwks.json"
# The demo director: owns `make run`'s demo race under this pool identity (its ``sub``) and
# signs in to the console with this password and a TOTP code (`make totp`). Local only.
DEMO_EMAIL = "demo@racecap.localhost"
DEMO_PASSWORD = "Racecap-demo-2026!"  # noqa: S105 - the local demo account, printed by make run
DEMO_SECRET = f"{blueprint.APP_NAME}-local/demo-director"


@dataclass(frozen=True)
class DirectorPool:
    user_pool_id: str
    client_id: str
    issuer: str
    jwks_file: Path
    smoke_secret: str  # the smoke director's secret (name)
    endpoint: str = ""  # cognito-idp's endpoint (moto's), as the console calls it
    demo_sub: str = ""  # the demo director's user id: the owner of the demo race

    def gateway_env(self) -> dict[str, str]:
        return {
            "RACECAP_COGNITO_ISSUER": self.issuer,
            "RACECAP_COGNITO_JWKS_FILE": str(self.jwks_file),
            "RACECAP_COGNITO_CLIENT_ID": self.client_id,
            "RACECAP_CONSOLE_CONFIG": json.dumps(self.console_config()),
        }

    def console_config(self) -> dict[str, str]:
        """What the console reads from admin/config.json (the CDK deploys the same keys)."""
        region = self.user_pool_id.split("_", 1)[0]
        return {
            "region": region,
            "userPoolId": self.user_pool_id,
            "clientId": self.client_id,
            "endpoint": self.endpoint,
        }

    def describe(self) -> dict[str, str]:
        return {
            "userPoolId": self.user_pool_id,
            "clientId": self.client_id,
            "endpoint": self.endpoint,
            "demoEmail": DEMO_EMAIL,
            "demoSecret": DEMO_SECRET,
            "smokeSecret": self.smoke_secret,
        }


def invite(cognito: Any, user_pool_id: str, email: str, *, temporary_password: str | None = None) -> str:
    """A new director: a user with a temporary password, to be replaced at first sign-in, where
    the console also enrols TOTP. On AWS Cognito emails the invitation (see the AWS CLI command in
    docs/console.md, "Directors"); locally nothing is sent, so the temporary password is returned to be handed over."""
    password = temporary_password or f"Tmp-{random.token_urlsafe(12)}1!"
    cognito.admin_create_user(
        UserPoolId=user_pool_id,
        Username=email,
        UserAttributes=[{"Name": "email", "Value": email}, {"Name": "email_verified", "Value": "true"}],
        TemporaryPassword=password,
        MessageAction="SUPPRESS",
    )
    return password


def user_sub(cognito: Any, user_pool_id: str, username: str) -> str:
    user = cognito.admin_get_user(UserPoolId=user_pool_id, Username=username)
    return next(a["Value"] for a in user["UserAttributes"] if a["Name"] == "sub")


def provision_demo_director(cognito: Any, secrets: Any, user_pool_id: str, client_id: str) -> str:
    """The demo director, enrolled (permanent password, TOTP seed kept in a local secret) by
    the code an operator runs for the smoke director; returns its ``sub``."""
    from local.cognito import enroll

    invite(cognito, user_pool_id, DEMO_EMAIL)
    secrets.create_secret(
        Name=DEMO_SECRET,
        SecretString=json.dumps(
            {"username": DEMO_EMAIL, "password": DEMO_PASSWORD, "userPoolId": user_pool_id, "clientId": client_id}
        ),
    )
    enroll(cognito, secrets, DEMO_SECRET)
    return user_sub(cognito, user_pool_id, DEMO_EMAIL)


def provision_directors(cognito: Any, secrets: Any, moto_url: str, auth_dir: Path) -> DirectorPool:
    from local.cognito import enroll

    smoke = blueprint.SMOKE_DIRECTOR
    pool = cognito.create_user_pool(
        PoolName=f"{blueprint.APP_NAME}-directors",
        UsernameAttributes=["email"],
        AutoVerifiedAttributes=["email"],
        Policies={
            "PasswordPolicy": {
                "MinimumLength": 12,
                "RequireUppercase": True,
                "RequireLowercase": True,
                "RequireNumbers": True,
                "RequireSymbols": True,
            }
        },
    )["UserPool"]
    cognito.set_user_pool_mfa_config(
        UserPoolId=pool["Id"], SoftwareTokenMfaConfiguration={"Enabled": True}, MfaConfiguration="ON"
    )
    client = cognito.create_user_pool_client(
        UserPoolId=pool["Id"],
        ClientName=f"{blueprint.APP_NAME}-directors",
        GenerateSecret=False,
        ExplicitAuthFlows=["ALLOW_USER_SRP_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
    )["UserPoolClient"]
    cognito.admin_create_user(
        UserPoolId=pool["Id"],
        Username=smoke.username,
        UserAttributes=[{"Name": "email", "Value": smoke.username}, {"Name": "email_verified", "Value": "true"}],
        MessageAction="SUPPRESS",
    )
    # What the stack's secret holds before enrolment: a generated password, no seed.
    secrets.create_secret(
        Name=smoke.local_secret_name,
        SecretString=json.dumps(
            {
                "username": smoke.username,
                "password": random.token_urlsafe(24) + "Aa1!",
                "userPoolId": pool["Id"],
                "clientId": client["ClientId"],
            }
        ),
    )
    enroll(cognito, secrets, smoke.local_secret_name)
    auth_dir.mkdir(parents=True, exist_ok=True)
    jwks = requests.get(f"{moto_url}/{pool['Id']}/.well-known/jwks.json", timeout=10)
    jwks.raise_for_status()
    (auth_dir / JWKS_FILE).write_text(json.dumps(jwks.json(), indent=2))
    demo_sub = provision_demo_director(cognito, secrets, pool["Id"], client["ClientId"])
    return DirectorPool(
        user_pool_id=pool["Id"],
        client_id=client["ClientId"],
        issuer=f"https://cognito-idp.{cognito.meta.region_name}.amazonaws.com/{pool['Id']}",
        jwks_file=auth_dir / JWKS_FILE,
        smoke_secret=smoke.local_secret_name,
        endpoint=moto_url,
        demo_sub=demo_sub,
    )


# ---------------------------------------------------------------------------
# make director EMAIL=… / make totp
# ---------------------------------------------------------------------------
def _clients(info: dict[str, Any]) -> tuple[Any, Any]:
    import boto3

    env = info["env"]
    session = boto3.session.Session(
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_REGION"],
    )
    return (
        session.client("cognito-idp", endpoint_url=env["AWS_ENDPOINT_URL_COGNITO_IDENTITY_PROVIDER"]),
        session.client("secretsmanager", endpoint_url=env["AWS_ENDPOINT_URL_SECRETS_MANAGER"]),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m local.directors", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    inv = sub.add_parser("invite", help="invite a director to the running local stack's user pool")
    inv.add_argument("--email", required=True)
    sub.add_parser("code", help="print the demo director's current TOTP code")
    parser.add_argument("--work-dir", type=Path, default=RUN_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    info = running_stack(args.work_dir)
    if info is None or not info.get("directors"):
        sys.exit("No local Racecap stack is running: start one with `make run` in another terminal first.")
    cognito, secrets = _clients(info)
    pool = info["directors"]
    if args.command == "invite":
        email = args.email.strip()
        if "@" not in email or len(email) > 254:
            sys.exit("EMAIL must be an email address, e.g. make director EMAIL=ana@example.org")
        try:
            password = invite(cognito, pool["userPoolId"], email)
        except cognito.exceptions.UsernameExistsException:
            sys.exit(f"{email} is already a director of this stack.")
        print(f"Invited {email}. Sign in at {info['url']}{blueprint.CONSOLE_PATH}")
        print(f"  temporary password: {password}")
        print("  (the first sign-in sets a new password and enrols an authenticator app)")
        return
    from local.cognito import DirectorSecret, totp_code

    print(totp_code(DirectorSecret.read(secrets, pool["demoSecret"]).totpSeed))


if __name__ == "__main__":
    main()
