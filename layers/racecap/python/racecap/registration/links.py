"""The link to a runner's own registration (issue 39): signed, expiring, revocable, and the only
way a runner reaches their entry (the registration id alone is not a credential: it is in SES
tags, the provider's metadata, exports and hold links).

* **The token** is a signed ``reg`` token (``fairness.tokens``: HMAC under a key of its own kind,
  checked on CPU) naming the registration and the registration's ``linkVersion`` when it was
  made. Revoking every link of a registration (an email change does) bumps the version: the
  old tokens still verify, but name a version that is gone, and are refused. A link lives until
  a month after race day (at least a week), after which there is nothing left to manage.
* **The link goes out only by email, signed by the sender as it renders.** The confirmation
  carries it; "find my registration" queues a request that the *sender* resolves: it reads the
  race's email claim and the registration, and sends the link to the registered address, or
  nothing. The API does the same work whatever the address (a rate-limit check, the race's
  definition, one queued message), so neither its answer, nor its timing, nor the DynamoDB
  calls it makes can tell whether an address is registered. Doing the lookup before queueing
  would make the API read the claim, and then the registration only for a registered address:
  a second read that a stopwatch could see. The sender runs behind a queue where no caller
  waits, and it reads two items per request, rate-limited per address, network and device.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Protocol

from racecap.aws.keys import address_digest
from racecap.aws.queues import MessageQueue
from racecap.emails.models import EmailMessage
from racecap.errors import Busy, DomainError
from racecap.fairness.buckets import Decision
from racecap.fairness.tokens import InvalidToken, Signer
from racecap.races.catalog import RaceDefinitions
from racecap.registration.models import Registration, RegistrationPhase

# A link lives this long after race day: refunds settle, the runner looks up their bib.
DAYS_AFTER_RACE = 31
# ... and at least this long from when it is sent (a link asked for after race day still opens).
MIN_DAYS = 7
# "Find my registration": each address, network and device may ask this many times at once,
# then once every LINK_REQUEST_EVERY_S (a runner who lost the email asks once or twice; a
# script trying addresses meets the network's and device's buckets after three).
LINK_REQUEST_BURST = 3
LINK_REQUEST_EVERY_S = 60
# One link email per address and race in this window, however often it is asked for.
LINK_EMAIL_WINDOW_S = 600

LINK_KIND = "registration-link"  # the email "find my registration" sends
CHANGED_KIND = "email-changed"  # the registration's details at its new address (email_change)
# The emails whose data name the registration and its link version: the sender signs the link in.
SIGNED_INTO = frozenset({"confirmation", CHANGED_KIND, "transfer-confirmed", "switch-confirmed"})


class LinkRevoked(DomainError):
    """A genuine link, replaced since (the runner changed their email address)."""

    code, status = "LINK_REVOKED", 401


@dataclass(frozen=True)
class LinkHolder:
    registrationId: str
    version: int


class Buckets(Protocol):
    """Token buckets by key (``fairness.buckets.AddressBuckets``)."""

    def take(self, address: str | None) -> Decision: ...


class RegistrationLinks:
    def __init__(self, signer: Callable[[], Signer], site_url: str, clock: Callable[[], float] = time.time) -> None:
        self._signer = signer  # read on first use: the key comes from the secret store
        self._site = site_url.rstrip("/")
        self._clock = clock

    def token(self, registration_id: str, version: int, race_date: str) -> str:
        now = self._clock()
        try:
            last = datetime.combine(date.fromisoformat(race_date), datetime.min.time(), UTC)
            expires = (last + timedelta(days=DAYS_AFTER_RACE)).timestamp()
        except ValueError:
            expires = 0.0
        expires = max(expires, now + MIN_DAYS * 86400)
        return self._signer().sign("reg", {"r": registration_id, "v": version, "exp": int(expires)})

    def url(self, token: str) -> str:
        # In the fragment: never sent to a server, so never in an access log or a Referer.
        return f"{self._site}/#/my/{token}"

    def confirm_url(self, change_token: str) -> str:
        """The page that confirms a new address (``registration.email_change``)."""
        return f"{self._site}/#/my/email/{change_token}"

    def transfer_url(self, offer_token: str) -> str:
        """The page where the runner a place is offered to takes it over (``registration.transfer``)."""
        return f"{self._site}/#/transfer/{offer_token}"

    def holder(self, token: str | None) -> LinkHolder:
        """Who the token lets in, or ``InvalidToken``/``TokenExpired`` (revocation: ``check``)."""
        claims = self._signer().verify("reg", token or "", now=self._clock())
        rid, version = claims.get("r"), claims.get("v")
        if not isinstance(rid, str) or not rid or not isinstance(version, int):
            raise InvalidToken("The link to your registration is malformed; ask for a new one.")
        return LinkHolder(rid, version)

    def registration(self, token: str | None, get: Callable[[str], Registration | None]) -> Registration:
        """The registration the token opens (``get`` reads it), while the link is its current one."""
        holder = self.holder(token)
        return check(holder, get(holder.registrationId))


def check(holder: LinkHolder, reg: Registration | None) -> Registration:
    """The registration the link names, if the link is still its current one."""
    if reg is None or reg.purgedAt:
        # Gone (retention deleted the runner's data): nothing the link could show.
        raise InvalidToken("This link no longer leads to a registration.")
    if (reg.linkVersion or 0) != holder.version:
        raise LinkRevoked("This link was replaced (the registration's email address changed); use the newest one.")
    return reg


class LinkRequests:
    """The API's half of "find my registration": the same work for every address."""

    def __init__(
        self, catalog: RaceDefinitions, emails: MessageQueue, buckets: Buckets, clock: Callable[[], float] = time.time
    ) -> None:
        self._catalog = catalog
        self._emails = emails
        self._buckets = buckets
        self._clock = clock

    def request(self, race_id: str, email: str, network: str | None, device: str | None) -> None:
        """Queue the request (the sender sends the link if ``email`` is registered); raises
        ``RaceNotFound`` for an unknown race and ``TooManyRequests`` past the rate limits."""
        self._catalog.definition(race_id)  # 404 for a race that does not exist, whoever asks
        who = address_digest(race_id, email)
        keys = [f"addr:{who}", *([f"net:{network}"] if network else []), *([f"dev:{device}"] if device else [])]
        waits = [self._buckets.take(key).retry_after_s for key in keys]  # every bucket pays: a refusal is a request too
        if max(waits) > 0:
            raise Busy(
                "You asked for a link a moment ago; check your inbox (and spam folder) or ask again later.",
                retry_after=max(waits),
            )
        window = int(self._clock() // LINK_EMAIL_WINDOW_S)
        self._emails.send(
            EmailMessage(kind=LINK_KIND, dedupKey=f"link:{who}:{window}", to=email, data={"raceId": race_id})
        )


class LinkedRegistrations(Protocol):
    def by_email(self, race_id: str, email: str) -> Registration | None: ...


class LinkMail:
    """The sender's step before rendering (``emails.sender.Notifier``'s ``prepare``): the link
    signed into the emails that carry it, and a link request resolved to the registered address
    or to nothing."""

    def __init__(self, links: RegistrationLinks, registrations: LinkedRegistrations) -> None:
        self._links = links
        self._regs = registrations

    def prepare(self, message: EmailMessage) -> EmailMessage | None:
        if message.kind in SIGNED_INTO:
            data = message.data
            rid, race_date = str(data.get("registrationId", "")), str(data.get("raceDate", ""))
            version = data.get("linkVersion", 0)
            token = self._links.token(rid, version if isinstance(version, int) else 0, race_date)
            return message.model_copy(update={"data": {**data, "manageUrl": self._links.url(token)}})
        if message.kind != LINK_KIND:
            return message
        race_id = str(message.data.get("raceId", ""))
        reg = self._regs.by_email(race_id, message.to) if race_id else None
        if reg is None or reg.purgedAt or not reg.email:
            return None  # not registered (or a claim still paying): nothing is sent, and no one is told
        token = self._links.token(reg.registrationId, reg.linkVersion or 0, reg.raceDate)
        data = {
            "firstName": reg.firstName,
            "raceName": reg.raceName,
            "eventName": reg.eventName,
            "registrationId": reg.registrationId,
            "raceDate": reg.raceDate,
            "cancelled": reg.status != RegistrationPhase.CONFIRMED,
            "manageUrl": self._links.url(token),
        }
        return message.model_copy(update={"to": reg.email, "data": data})
