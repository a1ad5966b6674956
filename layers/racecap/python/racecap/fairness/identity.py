"""Who is a client: defined here once, for rate limits, hold limits and the queue.

Three identities, weakest to strongest (docs/fairness.md says what each stops and what not):

* **address** — the network the runner's IP address belongs to: an IPv4 address by itself,
  an IPv6 address by its /64 (the prefix lengths are settings: ``ADDRESS_IPV4_PREFIX`` and
  ``ADDRESS_IPV6_PREFIX``). A home IPv6 line is given a whole /64 (often more), so one
  person can send every request from a new address of it; keyed on the single address, a
  ceiling of 100 held 200 places from one /64. On AWS, CloudFront forwards the viewer's
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
DEVICE_TOKEN_DAYS = 90

# The three tokens are OpenAPI API-key schemes (tools/openapi declares them from this table,
# and each route names the ones it reads), so a client generated from the document sends
# them. Scheme name -> (header, what each answer means when the token is missing, expired or
# not this caller's).
TOKEN_SCHEMES: dict[str, tuple[str, str]] = {
    "device": (
        "X-Racecap-Device",
        "The device token from `POST /api/device` (the site asks once and keeps it). Missing: the queue's "
        "calls answer 401 DEVICE_TOKEN_REQUIRED, and a hold counts against the caller's address only. "
        "Not one of Racecap's, or altered: 401 INVALID_TOKEN. Expired (after 90 days): 401 TOKEN_EXPIRED "
        "(get a new one).",
    ),
    "queue": (
        "X-Racecap-Queue",
        "The `queueToken` from joining a race's queue (`POST /api/races/{raceId}/queue`): your place in line. "
        "Missing: the answer says to join. Not one of Racecap's: 401 INVALID_TOKEN. Expired: 401 TOKEN_EXPIRED "
        "(join again: the same device keeps its place). Issued to another device or race: 403 TOKEN_NOT_YOURS.",
    ),
    "admission": (
        "X-Racecap-Admission",
        "The `admissionToken` the queue gives when your turn comes, for holding places. Missing while the race's "
        "queue is on: 403 QUEUE_ADMISSION_REQUIRED (not needed while it is off). "
        "Not one of Racecap's: 401 INVALID_TOKEN. Expired: 401 TOKEN_EXPIRED (ask the queue again). "
        "Issued to another device or race: 403 TOKEN_NOT_YOURS.",
    ),
    "registration": (
        "X-Racecap-Registration",
        'The token in the link to your registration (the confirmation email\'s, or the one "find my registration" '
        "sends): the only way to see or change your own entry; the registration id alone is not. Missing or not one "
        "of Racecap's: 401 INVALID_TOKEN. Expired (a month after race day): 401 TOKEN_EXPIRED. Replaced (after an "
        "email change): 401 LINK_REVOKED. Ask for a new link on the race's page.",
    ),
    "waitlist": (
        "X-Racecap-Waitlist",
        "The token in the link to your waitlist entry (the email confirming your address sends it): the only "
        "way to see your place on an event's waitlist or leave it. Missing or not one of Racecap's: 401 "
        "INVALID_TOKEN. Expired (after race day): 401 TOKEN_EXPIRED.",
    ),
    "ballot": (
        "X-Racecap-Ballot",
        "The token in the link to your ballot application (the email confirming your address sends it): the only "
        "way to see your application or withdraw it. Missing or not one of Racecap's: 401 INVALID_TOKEN. Expired "
        "(after race day): 401 TOKEN_EXPIRED.",
    ),
}
# Headers as the handlers see them (lowercased, as API Gateway's HTTP API delivers them).
DEVICE_HEADER, QUEUE_HEADER, ADMISSION_HEADER, REGISTRATION_HEADER, WAITLIST_HEADER, BALLOT_HEADER = (
    TOKEN_SCHEMES[k][0].lower() for k in ("device", "queue", "admission", "registration", "waitlist", "ballot")
)
# What a route declares as its ``security`` (OpenAPI: alternatives OR-ed, ``{}`` = none needed).
NEEDS_DEVICE: list[dict[str, list[str]]] = [{"device": []}]
READS_QUEUE_TOKEN: list[dict[str, list[str]]] = [{"device": [], "queue": []}, {"device": []}]
HOLDS_SECURITY: list[dict[str, list[str]]] = [{"device": [], "admission": []}, {"device": []}, {}]
OWN_REGISTRATION: list[dict[str, list[str]]] = [{"registration": []}]
OWN_WAITLIST_ENTRY: list[dict[str, list[str]]] = [{"waitlist": []}]
OWN_BALLOT_APPLICATION: list[dict[str, list[str]]] = [{"ballot": []}]


class DeviceView(Model):
    deviceToken: str


class DeviceTokenRequired(DomainError):
    code, status = "DEVICE_TOKEN_REQUIRED", 401


@dataclass(frozen=True)
class Client:
    address: str | None  # the caller's network (address_from), or None when unknown (local calls without the header)
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


@dataclass(frozen=True)
class AddressPrefixes:
    """How much of an address is one subscriber's (``config.Settings`` holds the deployed values)."""

    ipv4: int = 32
    ipv6: int = 64

    def __post_init__(self) -> None:
        if not (8 <= self.ipv4 <= 32 and 16 <= self.ipv6 <= 128):
            raise ValueError(f"address prefixes out of range: /{self.ipv4} for IPv4, /{self.ipv6} for IPv6")


def address_from(headers: Mapping[str, str], prefixes: AddressPrefixes = AddressPrefixes()) -> str | None:
    """``1.2.3.4:443`` or ``2001:db8::1:443`` (CloudFront's format) → the caller's network,
    ``1.2.3.4`` or ``2001:db8::/64``: what rate limits and hold ceilings key on."""
    raw = (headers.get(ADDRESS_HEADER) or "").strip()
    if not raw:
        return None
    # CloudFront always appends the port, IPv6 included ("2001:db8::1:443"), so the last
    # ":" part goes; a bare IPv4 address (tests, hand-made calls) has no ":" at all, and a
    # bracketed one ("[2001:db8::1]:443") keeps its brackets around the address.
    if raw.startswith("["):
        host = raw[1 : raw.find("]")] if "]" in raw else ""
    else:
        host = raw.rsplit(":", 1)[0] if ":" in raw else raw
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None  # garbage in a trusted header: treat as unknown rather than as one shared bucket
    return network_of(ip, prefixes)


def network_of(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, prefixes: AddressPrefixes) -> str:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:a.b.c.d is an IPv4 client reaching a dual-stack edge
    if isinstance(ip, ipaddress.IPv4Address):
        if prefixes.ipv4 == 32:
            return str(ip)  # the common case keeps the plain address (existing keys, logs)
        return str(ipaddress.IPv4Network((ip, prefixes.ipv4), strict=False))
    return str(ipaddress.IPv6Network((ip, prefixes.ipv6), strict=False))


def lower_headers(event: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}


def client_from(headers: Mapping[str, str], signer: Signer, prefixes: AddressPrefixes = AddressPrefixes()) -> Client:
    """The caller. A device token that fails verification is an error, never silently ignored."""
    device_id = None
    token = headers.get(DEVICE_HEADER)
    if token:
        device_id = str(signer.verify("dev", token)["d"])
    return Client(address=address_from(headers, prefixes), device_id=device_id, headers=headers)


def new_device_token(signer: Signer, now: float | None = None) -> tuple[str, str]:
    """A fresh device id and its signed token (~128 random bits; the id is unguessable)."""
    now = now if now is not None else time.time()
    device_id = secrets.token_urlsafe(16)
    token = signer.sign("dev", {"d": device_id, "iat": int(now), "exp": int(now + DEVICE_TOKEN_DAYS * 86400)})
    return device_id, token
