"""A runner changes the email address of their registration (issue 39).

1. **Asked** with the registration's link (``registration.links``): a link confirming the new
   address goes *to the new address* (an ``eml`` token naming the registration, the new
   address and the link version it was asked under; it lives a day). Nothing changes yet, and
   the answer is the same whether or not the new address is registered for the race: the one
   who holds a registration's link learns nothing about other addresses.
2. **Confirmed** from that link: one transaction moves the race's email claim (the new address
   claimed only if free, the old claim deleted only if it is this registration's) and the
   registration's address, and bumps its link version, which revokes every earlier link.
   At every moment the race has one registration per email. A repeat of the confirmation
   answers what the first did.
3. The new address then gets the registration's details with its new link: an email of its own
   kind (``email-changed``) and key (``email-changed:<id>:v<version>``), so the confirmation's
   deduplication does not drop it and the audit does not count it as a second confirmation.
   The old address gets a notice (``email-moved``): a stolen link cannot move a registration
   without its owner hearing of it.

The trail records the change with the runner as actor and no address in it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from racecap.audit.service import AuditTrail
from racecap.aws.queues import MessageQueue
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.emails.models import EmailMessage
from racecap.errors import Busy, Conflict, EmailAlreadyRegistered
from racecap.fairness.tokens import InvalidToken, Signer
from racecap.models import Actor
from racecap.registration.links import CHANGED_KIND, Buckets, LinkRevoked, RegistrationLinks
from racecap.registration.models import Registration, RegistrationPhase
from racecap.registration.own_models import EmailChanged

CHANGE_KIND = "email-change"  # the email asking the new address to confirm
MOVED_KIND = "email-moved"  # the notice to the old address, once moved
CHANGE_TTL_S = 24 * 3600
# Each registration may ask this many times at once, then one a minute: a link holder cannot
# use Racecap to mail arbitrary addresses.
CHANGE_BURST = 3


class SameEmail(Conflict):
    code = "SAME_EMAIL"


class RegistrationEmails(Protocol):
    def get(self, registration_id: str, consistent: bool = True) -> Registration | None: ...

    def move_email_items(self, reg: Registration, new_email: str, now: str) -> list[TransactItem]: ...


class EmailChange:
    def __init__(
        self,
        links: RegistrationLinks,
        signer: Callable[[], Signer],
        registrations: RegistrationEmails,
        emails: MessageQueue,
        buckets: Buckets,
        audit: AuditTrail,
        transact: Callable[[list[TransactItem]], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._links = links
        self._signer = signer
        self._regs = registrations
        self._emails = emails
        self._buckets = buckets
        self._audit = audit
        self._transact = transact
        self._clock = clock

    def request(self, link_token: str | None, new_email: str) -> None:
        reg = self._reg(link_token)
        if reg.status != RegistrationPhase.CONFIRMED:
            raise Conflict("This registration is cancelled: its address cannot change.")
        if new_email == reg.email:
            raise SameEmail("That is the registration's address already.")
        wait = self._buckets.take(f"chg:{reg.registrationId}").retry_after_s
        if wait:
            raise Busy("You asked a moment ago: check the new address's inbox, or ask again later.", retry_after=wait)
        version = reg.linkVersion or 0
        token = self._signer().sign(
            "eml",
            {"r": reg.registrationId, "e": new_email, "v": version, "exp": int(self._clock()) + CHANGE_TTL_S},
        )
        self._emails.send(
            EmailMessage(
                kind=CHANGE_KIND,
                # One email per new address and link version, however often it is asked for.
                dedupKey=f"{CHANGE_KIND}:{reg.registrationId}:v{version}:{_digest(new_email)}",
                to=new_email,
                data={
                    "firstName": reg.firstName,
                    "raceName": reg.raceName,
                    "eventName": reg.eventName,
                    "registrationId": reg.registrationId,
                    "confirmUrl": self._links.confirm_url(token),
                },
            )
        )

    def confirm(self, change_token: str) -> EmailChanged:
        claims = self._signer().verify("eml", change_token, now=self._clock())
        rid, new_email, version = claims.get("r"), claims.get("e"), claims.get("v")
        if not isinstance(rid, str) or not isinstance(new_email, str) or not isinstance(version, int):
            raise InvalidToken("The link confirming your new address is malformed.")
        reg = self._regs.get(rid)
        if reg is None or reg.purgedAt:
            raise InvalidToken("This link no longer leads to a registration.")
        if reg.email == new_email and (reg.linkVersion or 0) == version + 1:
            return self._changed(reg)  # confirmed already (a second click, a retry)
        if (reg.linkVersion or 0) != version:
            raise LinkRevoked("The address changed since this link was sent; ask for a new one.")
        if reg.status != RegistrationPhase.CONFIRMED:
            raise Conflict("This registration is cancelled: its address cannot change.")
        now = datetime.now(UTC).isoformat()
        audit = self._audit.item(
            Actor.runner(rid), reg.raceId, "registration.email.changed", rid, eventId=reg.eventId, bib=reg.bib
        )
        try:
            self._transact([*self._regs.move_email_items(reg, new_email, now), audit])
        except ConditionFailed as exc:
            again = self._regs.get(rid)
            if again is not None and again.email == new_email and (again.linkVersion or 0) == version + 1:
                return self._changed(again)  # a concurrent click of the same link did it
            if 0 in exc.indexes:
                raise EmailAlreadyRegistered("That address is registered for this race already.") from exc
            raise Conflict("The registration changed meanwhile; open your newest link and try again.") from exc
        moved = self._regs.get(rid) or reg
        self._emails.send(
            EmailMessage(
                kind=CHANGED_KIND,
                dedupKey=f"{CHANGED_KIND}:{rid}:v{version + 1}",
                to=new_email,
                data={
                    "firstName": moved.firstName,
                    "lastName": moved.lastName,
                    "raceName": moved.raceName,
                    "eventName": moved.eventName,
                    "bib": moved.bib,
                    "registrationId": rid,
                    "amountCents": moved.amountCents,
                    "currency": moved.currency,
                    "raceDate": moved.raceDate,
                    "linkVersion": version + 1,
                },
            )
        )
        # The old address hears of it too (a stolen link would otherwise move a registration silently).
        self._emails.send(
            EmailMessage(
                kind=MOVED_KIND,
                dedupKey=f"{MOVED_KIND}:{rid}:v{version + 1}",
                to=reg.email,
                data={"firstName": reg.firstName, "raceName": reg.raceName, "registrationId": rid},
            )
        )
        return self._changed(moved)

    def _reg(self, token: str | None) -> Registration:
        return self._links.registration(token, self._regs.get)

    def _changed(self, reg: Registration) -> EmailChanged:
        token = self._links.token(reg.registrationId, reg.linkVersion or 0, reg.raceDate)
        return EmailChanged(
            registrationId=reg.registrationId,
            email=reg.email,
            linkToken=token,
            message="Your registration's email address is changed; earlier links to it no longer work.",
        )


def _digest(email: str) -> str:
    return hashlib.sha256(email.encode()).hexdigest()[:16]
