"""The directors' user pool, locally: moto's cognito-idp, set up as the stack's pool is.

The local issuer (``local.auth``) mints tokens for tests and ``make token``; this pool is for
what must sign in as on AWS — ``make smoke``'s director, with SRP and a TOTP code. Like the
CDK pool it requires TOTP MFA (moto checks the code when the moto server runs with
``MOTO_COGNITO_IDP_USER_POOL_ENABLE_TOTP=true``; it does not check the SRP proof) and its
app client allows SRP only. The smoke director and its secret are made as the stack
declares them, then enrolled by the same code an operator runs after a deploy
(``tools.smoke_director.enroll``). The gateway trusts the pool's tokens next to the local
issuer's (``LocalAuthorizer.from_env``).
"""

from __future__ import annotations

import json
import secrets as random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

import blueprint

JWKS_FILE = "cognito-jwks.json"


@dataclass(frozen=True)
class DirectorPool:
    user_pool_id: str
    client_id: str
    issuer: str
    jwks_file: Path
    smoke_secret: str  # the smoke director's secret (name)

    def gateway_env(self) -> dict[str, str]:
        return {
            "RACECAP_COGNITO_ISSUER": self.issuer,
            "RACECAP_COGNITO_JWKS_FILE": str(self.jwks_file),
            "RACECAP_COGNITO_CLIENT_ID": self.client_id,
        }


def provision_directors(cognito: Any, secrets: Any, moto_url: str, auth_dir: Path) -> DirectorPool:
    from tools.smoke_director import enroll

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
    return DirectorPool(
        user_pool_id=pool["Id"],
        client_id=client["ClientId"],
        issuer=f"https://cognito-idp.{cognito.meta.region_name}.amazonaws.com/{pool['Id']}",
        jwks_file=auth_dir / JWKS_FILE,
        smoke_secret=smoke.local_secret_name,
    )
