"""Holding a place: the first write of a burst, and the one that enforces the cap.

The decision is a conditional write on a cap shard (see ``holds/store.py``), never the
cached ``spotsLeft``. Once an event is full a short-lived "sold out" flag answers the
rest of the burst from Redis, because every failed conditional write still costs a
write unit. Places that come back (released or expired holds) clear the flag.
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime, timedelta

from racecap.cache import Flags
from racecap.errors import (
    BallotOnly,
    Conflict,
    EventNotFound,
    HoldNotFound,
    NotEnoughPlaces,
    RaceNotFound,
    RegistrationClosed,
    SoldOut,
)
from racecap.holds.models import DONE_PHASES, PAID_PHASES, Hold, HoldCreated, HoldPhase, HoldView
from racecap.holds.snapshots import HoldSnapshots
from racecap.holds.store import HoldStore
from racecap.observability import logger, metrics
from racecap.places.rules import plan_team, shard_name
from racecap.pulse import HOLDS, SOLD_OUT, pulse
from racecap.races.catalog import RaceDefinitions, race_status, sold_out_flag
from racecap.races.models import Event, Race
from racecap.races.rules import check_team_size, rule_text

SOLD_OUT_FLAG_TTL = 5.0  # seconds; short, so places that come back are offered again soon


FULL_SHARD_MEMORY_S = 2.0


def new_hold_ids() -> tuple[str, str]:
    """A hold and its registration share one unguessable token (~128 bits)."""
    token = secrets.token_urlsafe(16)
    return f"hold_{token}", f"reg_{token}"


# ``secrets.token_urlsafe(16)``: 16 bytes are always 22 URL-safe characters.
TOKEN_LENGTH = 22


def hold_id_for(registration_id: str) -> str:
    """The hold a registration id came from: a team member's (``reg_<token>-<own>``) is the team's."""
    return "hold_" + registration_id.removeprefix("reg_")[:TOKEN_LENGTH]


def member_ids(registration_id: str, places: int) -> list[str]:
    """A team's registration ids, the captain's first. Each member's has its own unguessable
    part, so knowing one's own registration id tells nothing of a teammate's; only URL-safe
    characters, as everywhere an id goes (a link, an email's SES tags: letters, digits, _ and -)."""
    return [registration_id, *(f"{registration_id}-{secrets.token_urlsafe(9)}" for _ in range(places - 1))]


class HoldService:
    def __init__(
        self, catalog: RaceDefinitions, holds: HoldStore, cache: Flags, snapshots: HoldSnapshots | None = None
    ) -> None:
        self._catalog = catalog
        self._holds = holds
        self._cache = cache
        self._snapshots = snapshots  # the hold as created, for the registration call (``holds.snapshots``)
        # Per environment: shards recently found full are tried last (saves write units).
        self._full: dict[str, tuple[float, set[str]]] = {}

    def hold(
        self, race_id: str, event_id: str, now: datetime | None = None, limits: dict[str, int] | None = None
    ) -> HoldCreated:
        """Hold one place; ``limits`` are the client's hold-limit counters (``fairness.limits``)."""
        return hold_created(self.hold_place(race_id, event_id, now, limits))

    def hold_place(
        self,
        race_id: str,
        event_id: str,
        now: datetime | None = None,
        limits: dict[str, int] | None = None,
        *,
        guaranteed: bool = False,
    ) -> Hold:
        """The hold itself. ``guaranteed``: for a guaranteed-entry code (``codes.guaranteed``), which
        alone may hold a ballot event's place: one of those its ballot keeps, once it is drawn."""
        now = now or datetime.now(UTC)
        race, event = self._open_event(race_id, event_id, now, guaranteed=guaranteed)
        flag = sold_out_flag(race_id, event_id)
        if self._cache.has_flag(flag):
            metrics.add_metric(name="SoldOutFromCache", unit="Count", value=1)
            pulse.count(race_id, SOLD_OUT, event_id)
            raise SoldOut(f"{event.name} is sold out.")

        shards = [shard_name(n) for n in range(event.shards)]
        key = f"{race_id}#{event_id}"
        seen, full = self._full.get(key, (0.0, set()))
        if time.monotonic() - seen > FULL_SHARD_MEMORY_S:
            full = set()
        hold = new_hold(race, event, now, limits)
        if guaranteed and event.ballot.enabled:
            hold = hold.model_copy(update={"guaranteed": True})
        got = self._holds.claim(hold, shards, avoid=full)
        self._full[key] = (time.monotonic(), full)
        if got is None:
            self._sold_out(race_id, event_id, now)
            raise SoldOut(f"{event.name} is sold out.")
        if self._snapshots is not None:
            self._snapshots.keep(got)
        metrics.add_metric(name="HoldCreated", unit="Count", value=1)
        pulse.count(race_id, HOLDS, event_id)
        return got

    def hold_team(
        self,
        race_id: str,
        event_id: str,
        places: int,
        now: datetime | None = None,
        limits: dict[str, int] | None = None,
    ) -> HoldCreated:
        """Hold a team's ``places`` together, all or none, across the cap's shards. Too few
        left is the captain's answer (409 saying how many are), and the event is not flagged
        sold out: a smaller team or a single runner may still fit."""
        now = now or datetime.now(UTC)
        race, event = self._open_event(race_id, event_id, now)
        check_team_size(event, places)
        if self._cache.has_flag(sold_out_flag(race_id, event_id)):
            pulse.count(race_id, SOLD_OUT, event_id)
            raise SoldOut(f"{event.name} is sold out.")
        hold = new_hold(race, event, now, limits, places=places)
        got = self._holds.claim_team(hold, plan_team)
        if isinstance(got, int):
            metrics.add_metric(name="TeamTooLarge", unit="Count", value=1)
            if got == 0:
                self._sold_out(race_id, event_id, now)
                raise SoldOut(f"{event.name} is sold out.")
            raise NotEnoughPlaces(
                f"Only {got} place{'s' if got != 1 else ''} of {event.name} left: not enough for a team of {places}.",
                left=got,
            )
        metrics.add_metric(name="TeamHoldCreated", unit="Count", value=1)
        pulse.count(race_id, HOLDS, event_id, n=places)  # a team's places, each
        return hold_created(hold)

    def _sold_out(self, race_id: str, event_id: str, now: datetime) -> None:
        """Every shard refused: the flag that answers the next runners from cache (this write and
        the next are the only ones until it lapses), and the moment it first happened, kept once
        for the director (issue 42). A failure to keep the moment never fails the runner's answer."""
        self._cache.flag(sold_out_flag(race_id, event_id), SOLD_OUT_FLAG_TTL)
        metrics.add_metric(name="SoldOut", unit="Count", value=1)
        pulse.count(race_id, SOLD_OUT, event_id)
        try:
            if self._holds.mark_sold_out(race_id, event_id, now):
                logger.info("event sold out", extra={"raceId": race_id, "eventId": event_id, "at": now.isoformat()})
        except Exception as exc:
            logger.warning("the sold-out moment was not kept", extra={"eventId": event_id, "error": str(exc)})

    def _open_event(
        self, race_id: str, event_id: str, now: datetime, *, guaranteed: bool = False
    ) -> tuple[Race, Event]:
        try:
            race, event = self._open_event_as_seen(race_id, event_id, now, fresh=False)
        except (RaceNotFound, RegistrationClosed):
            # This environment's view of the race is up to a second old (its version stamp): a
            # window that opened or a race published since would be refused, as a runner the
            # opening queue has just admitted was. A refusal is only given on a fresh look (one
            # Redis read, on refusals alone).
            race, event = self._open_event_as_seen(race_id, event_id, now, fresh=True)
        if event.ballot.enabled and not guaranteed:  # its places go to the draw's winners, by offer
            raise BallotOnly(f"Places in {event.name} are drawn from the ballot's applications: apply instead.")
        return race, event

    def _open_event_as_seen(self, race_id: str, event_id: str, now: datetime, *, fresh: bool) -> tuple[Race, Event]:
        race, events = self._catalog.for_runners(race_id, fresh=fresh)
        event = next((e for e in events if e.eventId == event_id), None)
        if event is None:
            raise EventNotFound(f"Race {race_id} has no event {event_id}.")
        status = race_status(race, now)
        if status != "OPEN":
            when = "has not opened yet" if status == "NOT_YET_OPEN" else "is closed"
            raise RegistrationClosed(f"Registration for {race.name} {when}.")
        return race, event

    def view(self, hold_id: str, now: datetime | None = None) -> HoldView:
        """A hold as its link shows it on any device: the event, price and clock, and how far
        it got; no name, email or date of birth (the link is all it takes to read it)."""
        now = now or datetime.now(UTC)
        hold = self._holds.get(hold_id)
        if hold is None:
            raise HoldNotFound(f"No hold with id {hold_id}.")
        race, events = self._catalog.definition(hold.raceId)
        event = next((e for e in events if e.eventId == hold.eventId), None)
        if event is None:
            raise HoldNotFound(f"No hold with id {hold_id}.")
        unpaid = hold.status in (HoldPhase.HELD, HoldPhase.PAYING)
        status = "EXPIRED" if unpaid and hold.expired(now) else str(hold.status)
        return HoldView(
            holdId=hold.holdId,
            places=hold.places,
            status=status,  # type: ignore[arg-type]
            expiresAt=hold.expiresAt,
            detailsSent=hold.attempt is not None,
            raceId=race.raceId,
            raceName=race.name,
            raceDate=race.raceDate,
            timeZone=race.timeZone,
            eventId=event.eventId,
            eventName=event.name,
            priceCents=_held_price(hold, event),
            currency=hold.attempt.currency if hold.attempt else (hold.currency or event.currency),
            code=hold.code,
            listPriceCents=hold.listCents if hold.code else None,
            minAge=event.minAge,
            maxAge=event.maxAge,
            ageRule=rule_text(event.minAge, event.maxAge),
            registrationId=hold.registrationId if hold.status in DONE_PHASES else None,
        )

    def release(self, hold_id: str) -> None:
        """The runner gives the place back. Idempotent; a paid hold is not released here."""
        hold = self._holds.get(hold_id)
        if hold is None:
            raise HoldNotFound(f"No hold with id {hold_id}.")
        if hold.status in PAID_PHASES:
            raise Conflict("This place is paid for; ask the race director to cancel the registration.")
        if self._snapshots is not None:
            self._snapshots.forget(hold_id)
        if hold.status != HoldPhase.HELD:
            return
        freed = self._holds.release(hold, HoldPhase.RELEASED, waitlist=waitlisted(self._catalog, hold))
        if freed == "public":  # a place kept for the waitlist leaves the event sold out
            self._cache.clear_flag(sold_out_flag(hold.raceId, hold.eventId))
        if freed:
            metrics.add_metric(name="HoldReleased", unit="Count", value=1)


def waitlisted(catalog: RaceDefinitions, hold: Hold) -> bool:
    """Whether the hold's event has a waitlist switched on, from the definition in the cache
    (no read of its own): only then does a freed place look at the line (``places.returns``)."""
    if hold.guaranteed:  # a kept place goes back to the places kept for guaranteed entries
        return False
    try:
        _, events = catalog.definition(hold.raceId)
    except RaceNotFound:
        return False
    except Exception:
        # Unknown: look at the line (one read) rather than guess. With no line there, the place
        # goes to its shard as it always did; a sweep must not stop for a cache outage.
        logger.warning("race definition unavailable; reading the waitlist's line", extra={"raceId": hold.raceId})
        return True
    return any(e.eventId == hold.eventId and e.waitlist.enabled for e in events)


def new_hold(race: Race, event: Event, now: datetime, limits: dict[str, int] | None, places: int = 1) -> Hold:
    """A new hold of ``places`` places (a team's: one registration id per member), its price
    fixed now: a price edit or a new tier changes new holds only."""
    hold_id, registration_id = new_hold_ids()
    return Hold(
        holdId=hold_id,
        registrationId=registration_id,
        raceId=race.raceId,
        eventId=event.eventId,
        status=HoldPhase.HELD,
        createdAt=now,
        expiresAt=now + timedelta(minutes=race.holdMinutes),
        clientLimits=limits or {},
        amountCents=event.price_at(now),  # per place
        currency=event.currency,
        places=places,
        memberIds=member_ids(registration_id, places) if places > 1 else [],
    )


def hold_created(hold: Hold) -> HoldCreated:
    """The answer to a new hold (the public path's, a team's, a claimed waitlist offer's)."""
    price = hold.amountCents or 0
    return HoldCreated(
        holdId=hold.holdId,
        expiresAt=hold.expiresAt,
        raceId=hold.raceId,
        eventId=hold.eventId,
        priceCents=price,
        currency=hold.currency or "",
        places=hold.places,
        totalCents=price * hold.places if hold.is_team else None,
    )


def _held_price(hold: Hold, event: Event) -> int:
    """What the hold costs: the amount its details were sent with, else the price fixed when the
    place was held (holds from before that was recorded: the price in force then)."""
    if hold.attempt is not None and not hold.is_team:  # a team's attempt holds the team's total
        return hold.attempt.amountCents
    return hold.amountCents if hold.amountCents is not None else event.price_at(hold.createdAt)
