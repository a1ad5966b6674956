"""Offers of the places the line's pool keeps (issue 40, slice 2): made in order, claimed by link.

* **The batch** (``OfferBatch.run``) runs in the hold sweeper's invocation, right after the
  expired holds gave their places back (so a place an expiry pooled is offered in the same run),
  on the sweeper's schedule: offers out (a sparse index) that expired, or whose runner registered
  another way meanwhile, end and their places go back to the pool; then, for each line with work,
  while the pool has a place and someone waits, the next WAITING entry by number gets an offer,
  in one transaction (head moves, pool -1, offered +1, the entry OFFERED, the OFFER written), and
  an email with the claim link (a ballot's group is one such ticket, offered whole or passed over
  whole while it does not fit: ``_next_ticket``); pooled places nobody waits for go back to the shards (the
  public); a line with nothing left leaves the index.
* **The claim** (``OfferClaims.claim``): the link's signed ``wto`` token names the offer. Claimed
  in its window, the place becomes the runner's hold through a path of its own: the shard already
  counts it, so nothing is taken from the public, and no queue, device or hold limit applies (the
  place in line was the limit). The price is the tier in force at the claim. The registration then
  must use the offered address (``registration.service``) and is paid as usual; the hold expiring
  unpaid sends the place back to the pool (``places.returns``), not to the public.
* **Too late, declined, useless**: an offer claimed after its window answers 410 and ends, one
  declined ends, one whose runner registered another way ends (at the claim, or at the batch's
  next run: nothing is added to the registration path); each time the place goes back to the
  pool and the next runner is offered it at once. After registration closed: 409.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from racecap.aws.queues import MessageQueue
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.emails.models import EmailMessage
from racecap.errors import (
    Conflict,
    EmailAlreadyRegistered,
    EventNotFound,
    OfferExpired,
    OfferGone,
    RegistrationClosed,
    WaitlistEntryNotFound,
)
from racecap.fairness.tokens import InvalidToken, Signer
from racecap.holds.models import Hold, HoldCreated, HoldPhase
from racecap.holds.service import hold_created, new_hold_ids
from racecap.observability import logger, metrics
from racecap.races.catalog import RaceDefinitions, race_status
from racecap.races.models import Event, Race
from racecap.waitlist.closing import WaitlistClosing
from racecap.waitlist.models import Line, Offer, OfferView, WaitlistEntry
from racecap.waitlist.rules import iso
from racecap.waitlist.store import WaitlistStore

OFFER_KIND = "waitlist-offer"
# Offers made per line per run at most (each is a transaction and an email): a cap raise of
# thousands is offered over a few runs rather than in one long invocation.
OFFERS_PER_RUN = 200
# Waiting runners read ahead when the next is in a ballot's group: enough to pass over a few
# groups that do not fit the places pooled now (a group is at most an event's largest team).
LOOKAHEAD = 25


def tickets_in_line(entries: list[WaitlistEntry]) -> list[list[WaitlistEntry]]:
    """Waiting entries in line order as the draw's tickets: a runner alone, or a group's runners
    (the line puts them side by side; one who left is simply not among them)."""
    tickets: list[list[WaitlistEntry]] = []
    for entry in entries:
        if entry.groupId is not None and tickets and tickets[-1][0].groupId == entry.groupId:
            tickets[-1].append(entry)
        else:
            tickets.append([entry])
    return tickets


class OfferedHolds(Protocol):
    """The hold store's part in a claim (``holds.store.DynamoHolds``)."""

    def offered_hold_item(self, hold: Hold) -> TransactItem: ...

    def get(self, hold_id: str) -> Hold | None: ...


class OfferBatch:
    def __init__(
        self,
        store: WaitlistStore,
        catalog: RaceDefinitions,
        emails: MessageQueue,
        signer: Callable[[], Signer],
        site_url: str,
        window_s: int = 0,
        came_back: Callable[[str, str], None] | None = None,
        closing: WaitlistClosing | None = None,
        registered: Callable[[str, str], bool] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._catalog = catalog
        self._emails = emails
        self._registered = registered  # (raceId, email): the address holds the race's email claim
        self._closing = closing  # a line with work found after registration closed is closed here
        self._signer = signer
        self._site = site_url.rstrip("/")
        self._window_s = window_s  # a test stage's override of every event's window (0: the event's)
        self._came_back = came_back  # places back to the public: clear the sold-out flag and the page
        self._clock = clock

    def run(self) -> dict[str, int]:
        """One pass over every line with work; counts of what it did."""
        counts = {"expired": 0, "useless": 0, "offered": 0, "returned": 0}
        now = iso(self._clock())
        for offer in self._store.expired_offers(now):
            counts["expired"] += self.end(offer, "EXPIRED")
        if self._registered is not None:
            for offer in self._store.offers_out(now):
                if self._registered(offer.raceId, offer.email):
                    # They registered another way (the public sale, a transfer): the place is
                    # passed on now, not when their window runs out.
                    counts["useless"] += self.end(offer, "USELESS")
        for race_id, event_id in self._store.with_work():
            try:
                made, returned = self.offer_event(race_id, event_id)
            except Exception:
                logger.exception("waitlist offers failed for an event", extra={"raceId": race_id, "eventId": event_id})
                continue
            counts["offered"] += made
            counts["returned"] += returned
        for name, value in counts.items():
            if value:
                metrics.add_metric(name=f"WaitlistOffers{name.title()}", unit="Count", value=value)
        return counts

    def end(self, offer: Offer, state: str) -> bool:
        try:
            self._store.end_offer(offer, state, iso(self._clock()))  # type: ignore[arg-type]
        except ConditionFailed:
            return False  # claimed or ended meanwhile
        return True

    def offer_event(self, race_id: str, event_id: str) -> tuple[int, int]:
        """Offer the pooled places of one event to the next runners; give back what nobody waits for."""
        try:
            race, events = self._catalog.definition(race_id)
        except Exception:
            race, events = None, []
        event = next((e for e in events if e.eventId == event_id), None)
        made = 0
        for _ in range(OFFERS_PER_RUN):
            line = self._store.line(race_id, event_id)
            if line.closed or line.pool <= 0 or line.waiting <= 0 or race is None or event is None:
                break
            if race_status(race, datetime.fromtimestamp(self._clock(), UTC)) == "CLOSED":
                # Closed by the clock with no window task to say so (or the task's close failed).
                if self._closing is not None:
                    self._closing.close(race_id, event_id)
                return made, 0
            if race_status(race, datetime.fromtimestamp(self._clock(), UTC)) != "OPEN":
                break
            ticket = self._next_ticket(race_id, event_id, line.pool)
            if not ticket:
                break  # the index lags a confirmation (the next run sees it), or no group waiting fits
            if self._offer_ticket(race, event, line, ticket):
                made += len(ticket)
        returned = self._give_back_surplus(race_id, event_id)
        line = self._store.line(race_id, event_id)
        if line.pool <= 0 and line.offered <= 0:
            self._store.rest(race_id, event_id)
        return made, returned

    def _next_ticket(self, race_id: str, event_id: str, pool: int) -> list[WaitlistEntry]:
        """The next runners to offer places to: the first WAITING entry, alone; or, if a ballot drew
        it in a group (``groupId``: its runners side by side in the line), that group's waiting
        runners together, as the draw did: a group larger than the places pooled now is passed over
        whole and the walk goes on (``ballot.draw.winners``' rule), and being ahead, it is offered
        first once enough places are pooled. Plain waitlists read one entry, as before."""
        first = self._store.next_waiting(race_id, event_id, 1)
        if not first or first[0].groupId is None:
            return first
        ahead = self._store.next_waiting(race_id, event_id, LOOKAHEAD)
        tickets = tickets_in_line(ahead)
        if len(ahead) == LOOKAHEAD and tickets[-1][0].groupId is not None:
            tickets.pop()  # its group may have runners past what was read
        return next((t for t in tickets if len(t) <= pool), [])

    def _offer_ticket(self, race: Race, event: Event, line: Line, ticket: list[WaitlistEntry]) -> bool:
        shards = [s for s, k in sorted(line.pool_by_shard.items()) for _ in range(max(0, k))][: len(ticket)]
        if len(shards) < len(ticket) or any(e.seq is None for e in ticket):
            return False
        now = self._clock()
        window = self._window_s or event.waitlist.offerWindowHours * 3600
        expires = min(now + window, race.registrationClosesAt.timestamp())
        price = event.price_at(datetime.fromtimestamp(now, UTC))
        offers = [
            Offer(
                entryId=entry.entryId,
                raceId=race.raceId,
                eventId=event.eventId,
                state="OFFERED",
                seq=entry.seq or 0,  # never 0: a ticket's entries are checked for numbers above
                shard=shard,
                email=entry.email,
                firstName=entry.firstName,
                offeredAt=iso(now),
                expiresAt=iso(expires),
                priceCents=price,
            )
            for entry, shard in zip(ticket, shards, strict=True)
        ]
        try:
            self._store.offer(line, list(zip(ticket, offers, strict=True)))
        except ConditionFailed:
            return False  # the line or an entry moved: read again
        for entry, offer in zip(ticket, offers, strict=True):
            self._send(race, event, entry, offer, expires)
        return True

    def _send(self, race: Race, event: Event, entry: WaitlistEntry, offer: Offer, expires: float) -> None:
        token = self._signer().sign(
            "wto", {"r": race.raceId, "e": event.eventId, "i": entry.entryId, "exp": int(expires) + 86400}
        )
        self._emails.send(
            EmailMessage(
                kind=OFFER_KIND,
                dedupKey=f"{OFFER_KIND}:{entry.entryId}",
                to=entry.email,
                data={
                    "firstName": entry.firstName,
                    "raceName": race.name,
                    "eventName": event.name,
                    "entryId": entry.entryId,
                    "claimUrl": f"{self._site}/#/waitlist/offer/{token}",
                    "expiresAt": offer.expiresAt,
                    "priceCents": offer.priceCents,
                    "currency": event.currency,
                    **({"ballot": True} if entry.ballotApplicationId else {}),
                },
            )
        )
        where = {"raceId": race.raceId, "eventId": event.eventId, "number": entry.seq}
        logger.info("waitlist place offered", extra=where)

    def _give_back_surplus(self, race_id: str, event_id: str) -> int:
        """Pooled places beyond the runners waiting (a team's places, someone who left) go back to
        the public: the line as read, else the next run."""
        line = self._store.line(race_id, event_id)
        surplus = line.pool - (0 if line.closed else line.waiting)
        if surplus <= 0:
            return 0
        takes: dict[str, int] = {}
        for shard, k in sorted(line.pool_by_shard.items()):
            take = min(k, surplus - sum(takes.values()))
            if take > 0:
                takes[shard] = take
        try:
            self._store.give_back(race_id, event_id, line, takes)
        except ConditionFailed:
            return 0
        if self._came_back is not None:
            self._came_back(race_id, event_id)
        return sum(takes.values())


class OfferClaims:
    """The runner's side of an offer: see it, claim it (a hold of their own), decline it."""

    def __init__(
        self,
        store: WaitlistStore,
        catalog: RaceDefinitions,
        holds: OfferedHolds,
        batch: OfferBatch,
        signer: Callable[[], Signer],
        registered: Callable[[str, str], bool],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._catalog = catalog
        self._holds = holds
        self._batch = batch
        self._signer = signer
        self._registered = registered  # (raceId, email): the address holds the race's email claim
        self._clock = clock

    def view(self, token: str) -> OfferView:
        race, event, offer = self._offer(token)
        return self._view(race, event, offer)

    def claim(self, token: str) -> HoldCreated:
        for _ in range(3):
            race, event, offer = self._offer(token)
            if offer.state == "CLAIMED" and offer.holdId:
                hold = self._holds.get(offer.holdId)
                if hold is not None:
                    return hold_created(hold)  # a repeat answers the same hold
            now = self._clock()
            at = datetime.fromtimestamp(now, UTC)
            if race_status(race, at) != "OPEN":
                raise RegistrationClosed(
                    f"Registration for {race.name} has closed: the offer can no longer be claimed."
                )
            if offer.state != "OFFERED":
                raise OfferGone(_GONE.get(offer.state, "This offer has ended."))
            if iso(now) >= offer.expiresAt:
                self._pass_on(offer, "EXPIRED")
                raise OfferExpired("This offer's time ran out, and the place went to the next runner in line.")
            if self._registered(race.raceId, offer.email):
                self._pass_on(offer, "USELESS")
                raise EmailAlreadyRegistered(f"{offer.email} is already registered for {race.name}.")
            hold_id, registration_id = new_hold_ids()
            hold = Hold(
                holdId=hold_id,
                registrationId=registration_id,
                raceId=race.raceId,
                eventId=event.eventId,
                status=HoldPhase.HELD,
                createdAt=at,
                expiresAt=min(at + timedelta(minutes=race.holdMinutes), race.registrationClosesAt),
                shard=offer.shard,
                amountCents=event.price_at(at),  # the tier in force at the claim
                currency=event.currency,
                offerEntry=offer.entryId,
                offerEmail=offer.email,
            )
            try:
                self._store.claim_offer(offer, iso(now), iso(now), self._holds.offered_hold_item(hold))
            except ConditionFailed:
                continue  # declined, expired or claimed meanwhile: read it again
            metrics.add_metric(name="WaitlistOfferClaimed", unit="Count", value=1)
            return hold_created(hold)
        raise Conflict("The offer kept changing; please retry.")

    def decline(self, token: str) -> None:
        """The runner passes the place on: the next in line is offered it at once (safe to repeat)."""
        _, _, offer = self._offer(token)
        if offer.state == "OFFERED":
            self._pass_on(offer, "DECLINED")

    def _pass_on(self, offer: Offer, state: str) -> None:
        if self._batch.end(offer, state):
            self._batch.offer_event(offer.raceId, offer.eventId)

    def _offer(self, token: str) -> tuple[Race, Event, Offer]:
        claims = self._signer().verify("wto", token or "", now=self._clock())
        race_id, event_id, entry_id = claims.get("r"), claims.get("e"), claims.get("i")
        if not (isinstance(race_id, str) and isinstance(event_id, str) and isinstance(entry_id, str)):
            raise InvalidToken("The link to your offer is malformed.")
        race, events = self._catalog.for_runners(race_id, fresh=True)
        event = next((e for e in events if e.eventId == event_id), None)
        if event is None:
            raise EventNotFound(f"Race {race_id} has no event {event_id}.")
        offer = self._store.get_offer(race_id, event_id, entry_id)
        if offer is None:
            raise WaitlistEntryNotFound("This link no longer leads to an offer.")
        return race, event, offer

    def _view(self, race: Race, event: Event, offer: Offer) -> OfferView:
        now = self._clock()
        closed = race_status(race, datetime.fromtimestamp(now, UTC)) != "OPEN"
        state = offer.state
        if state == "OFFERED" and closed:
            message = "Registration has closed: this offer can no longer be claimed."
        elif state == "OFFERED" and iso(now) >= offer.expiresAt:
            message = "This offer's time ran out."
        else:
            message = _MESSAGES.get(state, "")
        return OfferView(
            raceId=race.raceId,
            eventId=event.eventId,
            raceName=race.name,
            eventName=event.name,
            state=state,
            expiresAt=offer.expiresAt,
            priceCents=event.price_at(datetime.fromtimestamp(now, UTC)),
            currency=event.currency,
            holdId=offer.holdId,
            message=message.format(event=event.name),
        )


_GONE = {
    "EXPIRED": "This offer's time ran out, and the place went to the next runner in line.",
    "DECLINED": "You passed this place on to the next runner in line.",
    "USELESS": "You registered another way, so the place went to the next runner in line.",
    "CLOSED": "The waitlist has closed.",
}
_MESSAGES = {
    "OFFERED": "A place in {event} is yours if you claim it before it expires.",
    "CLAIMED": "You claimed this place: register and pay before your hold runs out.",
    **_GONE,
}
