"""Who is a client: defined here once, for rate limits, hold limits and the queue.

Three identities, weakest to strongest (the README says what each stops and what not):

* **address** — the runner's IP address. On AWS, CloudFront forwards the viewer's
  address in ``CloudFront-Viewer-Address`` (``ip:port``); API Gateway's ``sourceIp`` is
  only CloudFront's edge, and the API's own URL refuses calls that did not come through
  CloudFront, so the header cannot be forged from outside. The local gateway stands in
  for CloudFront and trusts the same header, which tests and Artillery set to play
  thousands of runners (or one bot). Without it — only ever locally — the address is
  unknown and per-address limits do not apply.
* **device** — a signed device token the site asks for on its first visit
  (``POST /api/device``) and keeps in local storage; sent as ``X-Racecap-Device``.
* **admission** — while a race's queue is on, the short-lived token its queue issued,
  sent as ``X-Racecap-Admission``; it names the device it was issued to.
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from racecap.errors import DomainError
from racecap.fairness.tokens import Signer
from racecap.models import Model

ADDRESS_HEADER = "cloudfront-viewer-address"
DEVICE_HEADER = "x-racecap-device"
QUEUE_HEADER = "x-racecap-queue"
ADMISSION_HEADER = "x-racecap-admission"
DEVICE_TOKEN_DAYS = 90


class DeviceView(Model):
    deviceToken: str


class DeviceTokenRequired(DomainError):
    code, status = "DEVICE_TOKEN_REQUIRED", 401


@dataclass(frozen=True)
class Client:
    address: str | None  # normalised IP, or None when unknown (local calls without the header)
    device_id: str | None  # from a verified device token
    headers: Mapping[str, str]

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    def require_device(self) -> str:
        if self.device_id is None:
            raise DeviceTokenRequired(
                "This call needs the device token the site gets on its first visit (POST /api/device)."
            )
        return self.device_id


def address_from(headers: Mapping[str, str]) -> str | None:
    """``1.2.3.4:443`` or ``2001:db8::1:443`` (CloudFront's format) → the bare address."""
    raw = (headers.get(ADDRESS_HEADER) or "").strip()
    if not raw:
        return None
    # CloudFront always appends the port, IPv6 included ("2001:db8::1:443"), so the last
    # ":" part goes; a bare IPv4 address (tests, hand-made calls) has no ":" at all.
    host = raw.rsplit(":", 1)[0] if ":" in raw else raw
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None  # garbage in a trusted header: treat as unknown rather than as one shared bucket


def lower_headers(event: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}


def client_from(headers: Mapping[str, str], signer: Signer) -> Client:
    """The caller. A device token that fails verification is an error, never silently ignored."""
    device_id = None
    token = headers.get(DEVICE_HEADER)
    if token:
        device_id = str(signer.verify("dev", token)["d"])
    return Client(address=address_from(headers), device_id=device_id, headers=headers)


def new_device_token(signer: Signer, now: float | None = None) -> tuple[str, str]:
    """A fresh device id and its signed token (~128 random bits; the id is unguessable)."""
    now = now if now is not None else time.time()
    device_id = secrets.token_urlsafe(16)
    token = signer.sign("dev", {"d": device_id, "iat": int(now), "exp": int(now + DEVICE_TOKEN_DAYS * 86400)})
    return device_id, token
