"""The runners' side of an event's waitlist: join, confirm the address, see the place, leave.

* **Joining** is open only on a sold-out event whose director switched the list on, while
  registration is open, and sits behind the opening queue's own protections, reused: the
  device token, a solved proof-of-work challenge from the queue's challenge endpoint (bound to
  the race and the device, spent once), and token buckets per address, network and device
  (joining sends an email: nobody may use it to mail strangers). The answer is the same 202
  whether or not the address is on the list already, and the work is the same too: one
  conditional write (a live entry is left as it is) and one queued email.
* **The address confirms by a signed link** (a ``wtl`` token naming the race, the event and the
  entry) before the entry counts: only then does it get its join number, from the event's line
  counter in the same transaction (``store``), and only then does it count in the length cap.
* **The place** is ``seq - head`` (``rules.position``): two numbers, not a count of entries.
* **Leaving** with the same link drops the runner's data at once and shortens the line.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Protocol

from racecap.aws.keys import waitlist_entry_id
from racecap.aws.queues import MessageQueue
from racecap.aws.transactions import ConditionFailed
from racecap.emails.models import EmailMessage
from racecap.errors import (
    Busy,
    Conflict,
    EventNotFound,
    NotSoldOut,
    WaitlistClosed,
    WaitlistEntryNotFound,
    WaitlistFull,
)
from racecap.fairness import work
from racecap.fairness.buckets import Decision
from racecap.fairness.identity import Client
from racecap.fairness.tokens import InvalidToken, Signer
from racecap.observability import metrics
from racecap.races.catalog import race_status
from racecap.races.models import Event, Race
from racecap.waitlist.models import Line, MyWaitlistEntry, WaitlistEntry, WaitlistJoin
from racecap.waitlist.rules import PENDING_DAYS, iso, link_expiry, position
from racecap.waitlist.store import WaitlistStore

CONFIRM_KIND = "waitlist-confirm"  # the link confirming the address
ON_LIST_KIND = "waitlist-joined"  # "you're on the list at position N"
# Joining sends an email: each address, network and device may join this many times at once,
# then once every JOIN_EVERY_S (a runner joins once or twice; a script meets the buckets).
JOIN_BURST = 3
JOIN_EVERY_S = 60
# One confirmation email per entry in this window, however often the address joins.
CONFIRM_EMAIL_WINDOW_S = 600
# Confirmations racing for the line's counter read it again this many times (each is a
# human's click on an email: a handful at once at most).
CONFIRM_TRIES = 12


class Races(Protocol):
    """What the waitlist reads of a race (``races.catalog.RaceCatalog``, cached)."""

    def for_runners(self, race_id: str, *, fresh: bool = False) -> tuple[Race, list[Event]]: ...

    def availability(self, race_id: str, events: list[Event]) -> dict[str, int]: ...


class Buckets(Protocol):
    """Token buckets by key (``fairness.buckets.AddressBuckets``)."""

    def take(self, address: str | None) -> Decision: ...


class Proofs(Protocol):
    """Where a proof-of-work challenge is spent once (``fairness.store.DynamoQueueStore``): the
    same record the opening queue spends it in, so one solved challenge buys one of either."""

    def spend_challenge(self, challenge_id: str, ttl_s: int) -> bool: ...


def runners_event(races: Races, race_id: str, event_id: str) -> tuple[Race, Event]:
    """The race and one of its events as runners see them (``EventNotFound`` if it has none)."""
    race, events = races.for_runners(race_id)
    event = next((e for e in events if e.eventId == event_id), None)
    if event is None:
        raise EventNotFound(f"Race {race_id} has no event {event_id}.")
    return race, event


def pass_protections(
    signer: Signer,
    buckets: Buckets,
    proofs: Proofs,
    race_id: str,
    client: Client,
    device: str,
    address_key: str,
    challenge: str | None,
    nonce: str | None,
    *,
    busy: str,
) -> None:
    """The opening queue's protections for a request that sends an email (a waitlist join, a
    ballot application): the proof-of-work checked, a token from each bucket (the address, under a
    digest, its network, its device: every bucket pays, a refusal is a request too), then the
    proof spent once. Raises ``ProofRefused`` or ``Busy`` (``busy`` says what to do)."""
    challenge_id = work.check(signer, race_id, device, challenge, nonce)
    keys = [f"addr:{address_key}"]
    keys += [f"net:{client.address}"] if client.address else []
    keys += [f"dev:{device}"]
    waits = [buckets.take(key).retry_after_s for key in keys]
    if max(waits) > 0:
        raise Busy(busy, retry_after=max(waits))
    if not proofs.spend_challenge(challenge_id, work.CHALLENGE_TTL_S * 2):
        raise work.ProofRefused("This proof-of-work was already used; ask for a new challenge.")


class Waitlist:
    def __init__(
        self,
        races: Races,
        store: WaitlistStore,
        emails: MessageQueue,
        buckets: Buckets,
        proofs: Proofs,
        signer: Callable[[], Signer],
        site_url: str,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._races = races
        self._store = store
        self._emails = emails
        self._buckets = buckets
        self._proofs = proofs
        self._signer = signer  # read on first use: the key comes from the secret store
        self._site = site_url.rstrip("/")
        self._clock = clock
        self._sleep = sleep

    # -- joining ---------------------------------------------------------------------------
    def join(self, race_id: str, event_id: str, client: Client, body: WaitlistJoin) -> None:
        """Queue the confirmation link to ``body.email`` (the same answer whether or not it is on
        the list); raises ``WaitlistClosed``, ``NotSoldOut``, ``WaitlistFull``, the proof's and the
        buckets' refusals."""
        # The device first, as the queue's join asks it: the document makes the device token
        # required here, so its absence is the answer whatever the event's state.
        device = client.require_device()
        race, event = self._event(race_id, event_id)
        if event.ballot.enabled:  # its line is the ballot's drawn order (racecap.ballot.job)
            raise WaitlistClosed(f"{event.name}'s waitlist is its ballot's drawn order: apply to the ballot instead.")
        if not event.waitlist.enabled or race_status(race) != "OPEN":
            raise WaitlistClosed(f"{event.name} takes no waitlist entries now.")
        if self._races.availability(race_id, [event]).get(event_id, 0) > 0:
            raise NotSoldOut(f"{event.name} still has places: hold one instead.")
        entry_id = waitlist_entry_id(race_id, event_id, body.email)
        pass_protections(
            self._signer(), self._buckets, self._proofs, race_id, client, device, entry_id, body.challenge, body.nonce,
            busy="You asked a moment ago: check your inbox (and spam folder), or try later.",
        )  # fmt: skip
        cap = event.waitlist.maxLength
        if cap is not None and self._store.line(race_id, event_id).waiting >= cap:
            raise WaitlistFull(f"The waitlist for {event.name} is full ({cap} runners).")
        now = self._clock()
        self._store.put_pending(
            WaitlistEntry(
                entryId=entry_id,
                raceId=race_id,
                eventId=event_id,
                state="PENDING",
                email=body.email,
                firstName=body.firstName,
                lastName=body.lastName,
                joinedAt=iso(now),
                ttl=int(now) + PENDING_DAYS * 86400,
            ),
            int(now),
        )  # False: the address has a live entry; the link below then shows it
        token = self._token(race, event_id, entry_id)
        window = int(now // CONFIRM_EMAIL_WINDOW_S)
        self._emails.send(
            EmailMessage(
                kind=CONFIRM_KIND,
                dedupKey=f"{CONFIRM_KIND}:{entry_id}:{window}",
                to=body.email,
                data={
                    "firstName": body.firstName,
                    "raceName": race.name,
                    "eventName": event.name,
                    "entryId": entry_id,
                    "confirmUrl": self.url(token),
                },
            )
        )
        metrics.add_metric(name="WaitlistJoinAsked", unit="Count", value=1)

    # -- the link ------------------------------------------------------------------------------
    def confirm(self, token: str) -> MyWaitlistEntry:
        """The address is confirmed: the entry gets the next join number (a repeat answers the same)."""
        race, event, entry = self._entry(token)
        if entry.state == "PENDING" and (entry.ttl or 0) <= self._clock():
            raise WaitlistEntryNotFound("This link's entry expired before it was confirmed: join the waitlist again.")
        if entry.state != "PENDING":
            return self._view(race, event, entry, token)
        if not event.waitlist.enabled:
            raise WaitlistClosed(f"The waitlist for {event.name} is closed.")
        cap = event.waitlist.maxLength
        for attempt in range(CONFIRM_TRIES):
            line = self._store.line(entry.raceId, entry.eventId)
            if cap is not None and line.waiting >= cap:
                raise WaitlistFull(f"The waitlist for {event.name} is full ({cap} runners); nothing was added.")
            try:
                self._store.confirm(entry, line, cap, iso(self._clock()))
                break
            except ConditionFailed as exc:
                if 1 in exc.indexes:  # no longer pending: a second click of the same link got there
                    again = self._store.get(entry.raceId, entry.eventId, entry.entryId)
                    if again is None:
                        raise WaitlistEntryNotFound("This link's entry is gone: join the waitlist again.") from exc
                    return self._view(race, event, again, token)
                # The line moved (another confirmation) or filled up: read it again.
                self._sleep(random.uniform(0.01, 0.05) * (attempt + 1))
        else:
            raise Busy("Many runners are confirming at once; please retry.", retry_after=1)
        confirmed = self._store.get(entry.raceId, entry.eventId, entry.entryId) or entry
        shown = self._view(race, event, confirmed, token)
        metrics.add_metric(name="WaitlistConfirmed", unit="Count", value=1)
        self._emails.send(
            EmailMessage(
                kind=ON_LIST_KIND,
                dedupKey=f"{ON_LIST_KIND}:{entry.entryId}:{confirmed.seq}",
                to=entry.email,
                data={
                    "firstName": entry.firstName,
                    "raceName": race.name,
                    "eventName": event.name,
                    "entryId": entry.entryId,
                    "position": shown.position or 1,
                    "manageUrl": self.url(token),
                },
            )
        )
        return shown

    def mine(self, token: str | None) -> MyWaitlistEntry:
        race, event, entry = self._entry(token)
        return self._view(race, event, entry, token or "")

    def leave(self, token: str | None) -> None:
        """Off the list (a repeat does nothing more); the runner's name and address go at once."""
        for _ in range(3):
            _, _, entry = self._entry(token)
            if entry.state in ("LEFT", "REMOVED"):
                return
            try:
                self._store.leave(entry, iso(self._clock()))
                metrics.add_metric(name="WaitlistLeft", unit="Count", value=1)
                return
            except ConditionFailed:
                continue  # confirmed (or removed) in between: leave from where it is now
        raise Conflict("Your entry kept changing while you left; please retry.")

    def url(self, token: str) -> str:
        # In the fragment: never sent to a server, so never in an access log or a Referer.
        return f"{self._site}/#/waitlist/{token}"

    # -- helpers -------------------------------------------------------------------------------
    def _event(self, race_id: str, event_id: str) -> tuple[Race, Event]:
        return runners_event(self._races, race_id, event_id)

    def _token(self, race: Race, event_id: str, entry_id: str) -> str:
        claims = {"r": race.raceId, "e": event_id, "i": entry_id, "exp": link_expiry(race.raceDate, self._clock())}
        return self._signer().sign("wtl", claims)

    def _entry(self, token: str | None) -> tuple[Race, Event, WaitlistEntry]:
        claims = self._signer().verify("wtl", token or "", now=self._clock())
        race_id, event_id, entry_id = claims.get("r"), claims.get("e"), claims.get("i")
        if not (isinstance(race_id, str) and isinstance(event_id, str) and isinstance(entry_id, str)):
            raise InvalidToken("The link to your waitlist entry is malformed.")
        race, event = self._event(race_id, event_id)
        entry = self._store.get(race_id, event_id, entry_id)
        if entry is None:
            raise WaitlistEntryNotFound("This link no longer leads to a waitlist entry: join the waitlist again.")
        return race, event, entry

    def _view(self, race: Race, event: Event, entry: WaitlistEntry, token: str) -> MyWaitlistEntry:
        line = self._store.line(entry.raceId, entry.eventId) if entry.state == "WAITING" else Line()
        place = position(entry.seq, line.head) if entry.state == "WAITING" and entry.seq else None
        return MyWaitlistEntry(
            raceId=race.raceId,
            eventId=event.eventId,
            raceName=race.name,
            eventName=event.name,
            state=entry.state,
            position=place,
            number=entry.seq,
            firstName=entry.firstName or None,
            waitlistToken=token,
            message=_MESSAGES[entry.state].format(position=place, event=event.name),
        )


_MESSAGES = {
    "PENDING": "Confirm your address from the email we sent to join the waitlist for {event}.",
    "WAITING": "You're on the waitlist for {event} at position {position}. We'll email you if a place is offered.",
    "LEFT": "You left the waitlist for {event}.",
    "REMOVED": "The organiser removed this entry from the waitlist for {event}.",
}
