"""The local stand-in for Cognito + the JWT authorizer: what passes, what gets a 401."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jwt
import pytest

from local.auth import Issuer, LocalAuthorizer, director_sub, ensure_issuer


@pytest.fixture
def issuer(tmp_path: Path) -> Issuer:
    return ensure_issuer(tmp_path / "auth")


@pytest.fixture
def authorizer(issuer: Issuer) -> LocalAuthorizer:
    jwks = json.loads(issuer.jwks_file.read_text())
    return LocalAuthorizer(jwks, issuer.issuer, [issuer.audience])


def test_a_minted_token_passes_with_cognito_claims_as_strings(issuer: Issuer, authorizer: LocalAuthorizer) -> None:
    claims = authorizer.claims(f"Bearer {issuer.mint('nina')}")
    assert claims is not None
    assert claims["sub"] == director_sub("nina")
    assert claims["cognito:username"] == "nina"
    assert claims["token_use"] == "id"
    assert claims["email_verified"] == "true"  # API Gateway hands every claim on as a string
    assert claims["exp"].isdigit()


def test_the_key_pair_is_made_once_and_kept_private(issuer: Issuer, tmp_path: Path) -> None:
    kid = issuer.kid
    assert ensure_issuer(tmp_path / "auth").kid == kid
    assert issuer.key_file.stat().st_mode & 0o077 == 0
    assert "PRIVATE" not in issuer.jwks_file.read_text()


@pytest.mark.parametrize(
    "header",
    ["", "Bearer", "Bearer ", "Basic abc", "Bearer not-a-token", "bearer a.b.c"],
)
def test_no_usable_token_is_refused(authorizer: LocalAuthorizer, header: str) -> None:
    assert authorizer.claims(header) is None


def test_expired_foreign_and_forged_tokens_are_refused(
    issuer: Issuer, authorizer: LocalAuthorizer, tmp_path: Path
) -> None:
    other = ensure_issuer(tmp_path / "other")
    forged = jwt.encode(
        {
            "sub": "x",
            "iss": issuer.issuer,
            "aud": issuer.audience,
            "iat": int(time.time()),
            "exp": int(time.time()) + 60,
        },
        other.key_file.read_bytes(),
        algorithm="RS256",
        headers={"kid": issuer.kid},  # claims to be from our issuer's key
    )
    for token in (
        issuer.mint("nina", now=time.time() - 7200),
        issuer.mint("nina", aud="another-client"),
        issuer.mint("nina", iss="https://elsewhere.example"),
        other.mint("nina"),
        forged,
    ):
        assert authorizer.claims(f"Bearer {token}") is None


def test_an_access_token_is_matched_on_client_id(issuer: Issuer, authorizer: LocalAuthorizer) -> None:
    token = issuer.mint("nina", aud=None, client_id=issuer.audience, token_use="access")
    assert authorizer.claims(f"Bearer {token}") is not None


def test_a_second_trusted_issuer_is_checked_with_its_own_keys_and_clients(
    issuer: Issuer, authorizer: LocalAuthorizer, tmp_path: Path
) -> None:
    # What the local stack does for moto's user pool (make smoke's director signs in there).
    pool = ensure_issuer(tmp_path / "pool")
    pool_iss, pool_client = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_pool", "pool-client"
    authorizer.trust(json.loads(pool.jwks_file.read_text()), pool_iss, [pool_client])

    assert authorizer.claims(f"Bearer {pool.mint('smoke', iss=pool_iss, aud=pool_client)}") is not None
    assert authorizer.claims(f"Bearer {issuer.mint('nina')}") is not None  # the local issuer still works
    assert authorizer.claims(f"Bearer {pool.mint('smoke', iss=pool_iss, aud=issuer.audience)}") is None
    assert authorizer.claims(f"Bearer {issuer.mint('smoke', iss=pool_iss, aud=pool_client)}") is None  # wrong keys
