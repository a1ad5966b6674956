"""The local stand-in for Cognito + the HTTP API's JWT authorizer.

On AWS, race directors sign in to a Cognito user pool and API Gateway checks their JWT
before a director route reaches AdminApi. Locally:

* the stack creates an RS256 key pair for a *local issuer* in its work dir
  (``<work>/auth``: the private key, the public JWKS and the issuer's settings);
* the gateway checks every director route's bearer token against that JWKS exactly as
  the JWT authorizer does (signature, ``iss``, ``exp``/``nbf``, ``aud`` or ``client_id``)
  and hands the handler the claims as API Gateway does: every value a string;
* ``make token`` mints a token for the running ``make run`` stack:

    python -m local.auth token                  # the demo director (owns the demo race; signs in
                                                # to moto's user pool when the stack runs one)
    python -m local.auth token --director alice # another director, with her own races

Tokens carry a Cognito ID token's claims (``sub``, ``email``, ``cognito:username``,
``token_use``, ``aud``, ``iss``, ``iat``, ``exp``, ``auth_time``). A director's ``sub`` is
derived from the name, so the same name is the same director on every run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from local.run_dir import RUN_DIR, running_stack

ISSUER = "https://issuer.racecap.localhost/directors"
AUDIENCE = "racecap-local-directors"  # the "app client id" of the local user pool
DEFAULT_DIRECTOR = "demo"
TOKEN_TTL_S = 3600  # Cognito's default ID-token lifetime
LEEWAY_S = 5  # clock skew tolerated, as small as API Gateway's
_SUB_NAMESPACE = uuid.UUID("6f1d1c55-7a53-4c43-9a53-2f0c9a0e5e11")

KEY_FILE = "issuer-key.pem"
JWKS_FILE = "jwks.json"
SETTINGS_FILE = "issuer.json"


def director_sub(name: str) -> str:
    """A director's stable ``sub`` (Cognito's user id): the same name, the same director."""
    return str(uuid.uuid5(_SUB_NAMESPACE, name.strip().lower()))


@dataclass(frozen=True)
class Issuer:
    """The local issuer's files in a stack's work dir."""

    dir: Path
    issuer: str = ISSUER
    audience: str = AUDIENCE

    @property
    def key_file(self) -> Path:
        return self.dir / KEY_FILE

    @property
    def jwks_file(self) -> Path:
        return self.dir / JWKS_FILE

    @property
    def kid(self) -> str:
        return str(json.loads(self.jwks_file.read_text())["keys"][0]["kid"])

    def gateway_env(self) -> dict[str, str]:
        """What ``local.gateway`` needs to check tokens (see ``LocalAuthorizer.from_env``)."""
        return {
            "RACECAP_JWKS_FILE": str(self.jwks_file),
            "RACECAP_JWT_ISSUER": self.issuer,
            "RACECAP_JWT_AUDIENCE": self.audience,
        }

    def mint(
        self,
        director: str = DEFAULT_DIRECTOR,
        *,
        ttl_s: int = TOKEN_TTL_S,
        now: float | None = None,
        **extra: Any,
    ) -> str:
        now = int(now if now is not None else time.time())
        claims: dict[str, Any] = {
            "sub": director_sub(director),
            "iss": self.issuer,
            "aud": self.audience,
            "token_use": "id",
            "auth_time": now,
            "iat": now,
            "exp": now + ttl_s,
            "email": f"{director}@racecap.localhost",
            "email_verified": True,
            "cognito:username": director,
            "jti": str(uuid.uuid4()),
            **extra,
        }
        claims = {k: v for k, v in claims.items() if v is not None}  # extra=None drops a claim
        key = self.key_file.read_bytes()
        return jwt.encode(claims, key, algorithm="RS256", headers={"kid": self.kid})


def ensure_issuer(directory: Path) -> Issuer:
    """Create the issuer's key pair once per work dir (kept across restarts: tokens
    already handed out stay valid while their ``exp`` allows)."""
    issuer = Issuer(directory)
    if issuer.key_file.exists() and issuer.jwks_file.exists():
        return issuer
    directory.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(issuer.key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": uuid.uuid4().hex, "alg": "RS256", "use": "sig"})
    issuer.jwks_file.write_text(json.dumps({"keys": [jwk]}, indent=2))
    (directory / SETTINGS_FILE).write_text(json.dumps({"issuer": issuer.issuer, "audience": issuer.audience}, indent=2))
    return issuer


class LocalAuthorizer:
    """What the HTTP API JWT authorizer does with a director route's Authorization header.

    It trusts the local issuer and, when the stack runs one, the directors' user pool in moto
    (``local.directors``: where ``make smoke``'s director signs in with SRP + TOTP); each
    issuer with its own keys and app clients, as one authorizer per pool would on AWS."""

    def __init__(self, jwks: dict[str, Any], issuer: str, audiences: list[str]) -> None:
        self._trusted: dict[str, tuple[dict[str, jwt.PyJWK], set[str]]] = {}
        self.trust(jwks, issuer, audiences)

    def trust(self, jwks: dict[str, Any], issuer: str, audiences: list[str]) -> None:
        self._trusted[issuer] = ({k["kid"]: jwt.PyJWK(k) for k in jwks["keys"]}, set(audiences))

    @classmethod
    def from_env(cls) -> LocalAuthorizer:
        jwks = json.loads(Path(os.environ["RACECAP_JWKS_FILE"]).read_text())
        audiences = os.environ.get("RACECAP_JWT_AUDIENCE", AUDIENCE).split(",")
        authorizer = cls(jwks, os.environ.get("RACECAP_JWT_ISSUER", ISSUER), audiences)
        if os.environ.get("RACECAP_COGNITO_JWKS_FILE"):
            authorizer.trust(
                json.loads(Path(os.environ["RACECAP_COGNITO_JWKS_FILE"]).read_text()),
                os.environ["RACECAP_COGNITO_ISSUER"],
                [os.environ["RACECAP_COGNITO_CLIENT_ID"]],
            )
        return authorizer

    def claims(self, authorization: str) -> dict[str, str] | None:
        """The token's claims as API Gateway passes them on, or None (→ 401)."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        try:
            header = jwt.get_unverified_header(token.strip())
            # Which issuer's keys to check with; the signature check below proves the claim.
            issuer = str(jwt.decode(token.strip(), options={"verify_signature": False}).get("iss"))
            keys, audiences = self._trusted.get(issuer, ({}, set()))
            key = keys.get(str(header.get("kid")))
            if key is None or header.get("alg") != "RS256":
                return None
            claims: dict[str, Any] = jwt.decode(
                token.strip(),
                key=key,
                algorithms=["RS256"],
                issuer=issuer,
                leeway=LEEWAY_S,
                options={"require": ["exp", "iat", "iss", "sub"], "verify_aud": False},
            )
        except jwt.PyJWTError:
            return None
        # Cognito ID tokens name the app client in ``aud``, access tokens in ``client_id``;
        # the JWT authorizer accepts either.
        audience = claims.get("aud") or claims.get("client_id")
        found = set(audience) if isinstance(audience, list) else {audience}
        if not found & audiences:
            return None
        return {k: _as_api_gateway_string(v) for k, v in claims.items()}


def _as_api_gateway_string(value: Any) -> str:
    """HTTP API hands claims to the function as strings; arrays look like ``[a b]``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + " ".join(str(v) for v in value) + "]"
    return str(value)


# ---------------------------------------------------------------------------
# make token
# ---------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m local.auth", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    token = sub.add_parser("token", help="print a director's bearer token for the running local stack")
    token.add_argument("--director", default=DEFAULT_DIRECTOR, help="director name (default: %(default)s)")
    token.add_argument("--ttl", type=int, default=TOKEN_TTL_S, help="lifetime in seconds")
    token.add_argument("--work-dir", type=Path, default=RUN_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    info = running_stack(args.work_dir)
    issuer = Issuer(args.work_dir / "auth")
    if info is None or not issuer.key_file.exists():
        sys.exit(
            "No local Racecap stack is running (nothing at .local-stack/run). "
            "Start one with `make run` in another terminal, then run `make token` again."
        )
    director = args.director.strip()
    if not director or len(director) > 64 or not director.replace("-", "").replace("_", "").isalnum():
        sys.exit("--director must be 1-64 letters, digits, '-' or '_'")
    if director == DEFAULT_DIRECTOR and info.get("directors"):
        # The demo race belongs to the demo director of moto's user pool (the console's sign-in):
        # sign in as it, by SRP and TOTP as the console does.
        from local.cognito import DirectorSecret, sign_in
        from local.directors import _clients

        cognito, secrets = _clients(info)
        print(sign_in(cognito, DirectorSecret.read(secrets, info["directors"]["demoSecret"])))
        print(f"# the demo director {info['directors']['demoEmail']}, valid 60 min, for {info['url']}", file=sys.stderr)
        return
    print(issuer.mint(director, ttl_s=args.ttl))
    print(
        f"# director {director!r} (sub {director_sub(director)}), valid {args.ttl // 60} min, for {info['url']}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
