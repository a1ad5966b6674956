"""Who is calling the admin API: the director in the JWT that API Gateway already verified.

On AWS the HTTP API's JWT authorizer (Cognito) checks the token before the function
runs; locally the gateway does the same (``local/auth.py``). Either way the function
only reads the claims — as strings, the way API Gateway passes them on. A director
route reached without claims is a wiring mistake and is refused, never trusted.
"""

from __future__ import annotations

from typing import Any

from racecap.errors import Unauthorized
from racecap.models import Director


def director_from_claims(claims: dict[str, Any] | None) -> Director:
    claims = claims or {}
    sub = str(claims.get("sub") or "").strip()
    if not sub:
        raise Unauthorized("Sign in as a race director: a bearer token is required.")
    # ID tokens name the user ``cognito:username``, access tokens ``username``.
    username = str(claims.get("cognito:username") or claims.get("username") or claims.get("email") or sub)
    return Director(sub=sub, username=username, email=str(claims.get("email") or ""))
