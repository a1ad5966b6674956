"""Signed, self-contained tokens: the device, queue-entry, admission and challenge tokens, and
the link to a runner's own registration and the one confirming a new address (``registration.links``),
and the link to a runner's waitlist entry (``waitlist.service``: it confirms the address, then shows the place).

A token is ``<kind>.<payload>.<mac>``: the payload is base64url JSON and the MAC an
HMAC-SHA256 over ``kind.payload`` under a key derived per kind from the one signing key,
so a token of one kind can never pass for another (a queue token is not an admission).
Verification is pure CPU: a poll that only checks a token costs no database work.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any, Literal

from racecap.errors import DomainError

Kind = Literal["dev", "que", "adm", "pow", "reg", "eml", "wtl", "wto", "trf", "bal"]
KINDS: tuple[Kind, ...] = ("dev", "que", "adm", "pow", "reg", "eml", "wtl", "wto", "trf", "bal")


class InvalidToken(DomainError):
    """Forged, truncated or of the wrong kind: we cannot tell who signed it."""

    code, status = "INVALID_TOKEN", 401


class TokenExpired(DomainError):
    code, status = "TOKEN_EXPIRED", 401


class TokenNotYours(DomainError):
    """A genuine token presented by another device or for another race (a replay)."""

    code, status = "TOKEN_NOT_YOURS", 403


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Signer:
    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("the signing key must be at least 16 bytes")
        self._keys = {k: hmac.new(key, f"racecap-{k}".encode(), hashlib.sha256).digest() for k in KINDS}

    def _mac(self, kind: Kind, body: str) -> str:
        return _b64(hmac.new(self._keys[kind], f"{kind}.{body}".encode(), hashlib.sha256).digest())

    def sign(self, kind: Kind, claims: dict[str, Any]) -> str:
        body = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
        return f"{kind}.{body}.{self._mac(kind, body)}"

    def verify(self, kind: Kind, token: str, *, now: float | None = None) -> dict[str, Any]:
        """The token's claims, or a clear refusal. ``exp`` (epoch seconds) is enforced."""
        what = _NAMES[kind]
        parts = token.split(".") if token else []
        if len(parts) != 3 or parts[0] != kind or len(token) > 2048:
            raise InvalidToken(f"The {what} is malformed; get a new one.")
        body, mac = parts[1], parts[2]
        if not hmac.compare_digest(mac, self._mac(kind, body)):
            raise InvalidToken(f"The {what} was not issued by Racecap (its signature does not match).")
        try:
            claims = json.loads(_unb64(body))
        except ValueError as exc:  # cannot happen for a genuine token; be safe
            raise InvalidToken(f"The {what} is malformed; get a new one.") from exc
        if not isinstance(claims, dict):
            raise InvalidToken(f"The {what} is malformed; get a new one.")
        exp = claims.get("exp")
        if exp is not None and (now if now is not None else time.time()) >= float(exp):
            raise TokenExpired(f"The {what} has expired.")
        return claims


_NAMES: dict[str, str] = {
    "dev": "device token",
    "que": "queue token",
    "adm": "admission token",
    "pow": "proof-of-work challenge",
    "reg": "link to your registration",
    "eml": "link confirming your new email address",
    "wtl": "link to your waitlist entry",
    "wto": "link to the place offered to you",
    "trf": "link to take a place over",
    "bal": "link to your ballot application",
}
