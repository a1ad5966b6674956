"""What race directors do to their races and events. The admin API and the demo seed go here.

Every change is one DynamoDB transaction with its audit entry, bumps the race's version
stamp (so every cached copy of the race is orphaned at once) and is checked against the
director: a race that is not theirs does not exist for them (404, never 403, so ids of
other directors' races are not confirmed).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any, Literal, cast

from pydantic import BaseModel, ValidationError

from racecap.audit.service import AuditEntries
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.config import ConfigurationError
from racecap.errors import (
    CapBelowTaken,
    Conflict,
    EventNotFound,
    RaceNotFound,
    TooManyEvents,
    ValidationFailed,
)
from racecap.models import YEARS, Director
from racecap.places.models import ShardChange
from racecap.places.returns import PlaceReturns
from racecap.places.rules import CapBelowPlacesTaken, plan_cap_change, pool_split, shards_for, split_cap
from racecap.places.store import Inventory
from racecap.races.catalog import RaceCatalog
from racecap.races.models import (
    BallotSettings,
    Event,
    EventChanges,
    Listing,
    Race,
    RaceChanges,
    RefundPolicy,
    WaitlistSettings,
)
from racecap.races.rules import (
    purge_due,
    team_range_problem,
)
from racecap.races.store import RaceStore
from racecap.setup.models import (
    _AGE_RULE_MESSAGE,
    CAP_CHANGE_TRIES,
    MAX_EVENTS,
    NULL_MESSAGE,
    AdminEventView,
    AdminRaceList,
    AdminRaceView,
    CopyRequest,
    EventDraft,
    EventPatch,
    PolicyFields,
    RaceDraft,
    RaceFields,
    RacePatch,
    _fields,
)
from racecap.setup.rules import (
    _a_year_later,
    _check_complete,
    _check_new_currency,
    _check_prices,
    _check_teams,
    _check_version,
    _prices,
    _summary,
    _tiers,
    new_id,
)
from racecap.window.service import WindowControl


def _outside_years() -> ValidationFailed:
    return ValidationFailed(
        f"The copy's dates would fall outside {YEARS}.",
        fields={"raceDate": f"Give a race date that keeps them in {YEARS}."},
    )


# -- the service ---------------------------------------------------------------------------
class RaceAdmin:
    def __init__(
        self,
        store: RaceStore,
        inventory: Inventory,
        *,
        transact: Callable[[list[TransactItem]], None] | None = None,
        audit: AuditEntries | None = None,
        catalog: RaceCatalog | None = None,
        window: WindowControl | None = None,
        returns: PlaceReturns | None = None,
    ) -> None:
        self._store = store
        # Where a raise's new places go when the event has a waitlist (None: all to the public).
        self._returns = returns
        self._inventory = inventory
        self._transact = transact
        self._audit = audit
        self._catalog = catalog
        self._window = window

    # Built with a store and inventory alone, an admin only creates races (the demo seed, the burst
    # tools); every other change needs the trail and the catalog's cache.
    @property
    def _trail(self) -> AuditEntries:
        if self._audit is None:
            raise ConfigurationError("this RaceAdmin was built without an audit trail")
        return self._audit

    @property
    def _races(self) -> RaceCatalog:
        if self._catalog is None:
            raise ConfigurationError("this RaceAdmin was built without the race catalog")
        return self._catalog

    # -- reading -----------------------------------------------------------------------
    def owned(self, director: Director, race_id: str) -> tuple[Race, list[Event]]:
        """The race and its events, read fresh, if ``director`` owns it; else RaceNotFound."""
        found = self._store.get_race(race_id)
        if found is None or found[0].ownerId != director.sub:
            raise RaceNotFound(f"No race with id {race_id}.")
        return found

    def list_races(self, director: Director) -> AdminRaceList:
        return AdminRaceList(races=[_summary(r) for r in self._store.list_by_owner(director.sub)])

    def view(self, race: Race, events: list[Event]) -> AdminRaceView:
        views = []
        for e in events:
            usage = self._inventory.usage(race.raceId, e.eventId)
            views.append(
                AdminEventView(
                    eventId=e.eventId,
                    name=e.name,
                    cap=e.cap,
                    priceCents=e.priceCents,
                    priceTiers=e.priceTiers,
                    priceNow=e.price_at(datetime.now(UTC)),
                    currency=e.currency,
                    shards=e.shards,
                    minAge=e.minAge,
                    maxAge=e.maxAge,
                    teamMinSize=e.teamMinSize,
                    teamMaxSize=e.teamMaxSize,
                    taken=usage.taken,
                    placesLeft=usage.left,
                    waitlist=e.waitlist,
                )
            )
        return AdminRaceView(
            **_summary(race).model_dump(),
            location=race.location,
            description=race.description,
            holdMinutes=race.holdMinutes,
            retentionDays=race.retentionDays,
            refundPolicy=race.refundPolicy,
            personalDataDeletedOn=purge_due(race).isoformat(),
            purgedAt=race.purgedAt,
            events=views,
        )

    def get(self, director: Director, race_id: str) -> AdminRaceView:
        return self.view(*self.owned(director, race_id))

    # -- creating --------------------------------------------------------------------------
    def create_race(
        self,
        owner_id: str,
        draft: RaceDraft,
        *,
        open_now: bool = False,
        director: Director | None = None,
        copied_from: str | None = None,
    ) -> Race:
        _check_prices(draft.currency, {f"events.{i}.{k}": p for i, e in enumerate(draft.events) for k, p in _prices(e)})
        _check_teams({f"events.{i}.": e for i, e in enumerate(draft.events)})
        tiers = [_tiers(e.priceTiers, draft.timeZone, f"events.{i}.priceTiers") for i, e in enumerate(draft.events)]
        if draft.listing != "DRAFT":
            _check_complete(draft, list(draft.events))
        race = Race(
            raceId=new_id("race"),
            ownerId=owner_id,
            **draft.model_dump(exclude={"events"}),
            registrationState="OPEN" if open_now else "SCHEDULED",
            continues=copied_from,
        )
        events = [
            Event(
                raceId=race.raceId,
                eventId=new_id("evt"),
                name=e.name,
                cap=e.cap,
                priceCents=e.priceCents,
                currency=draft.currency,
                shards=shards_for(e.cap),
                position=i,
                minAge=e.minAge,
                maxAge=e.maxAge,
                priceTiers=tiers[i],
                teamMinSize=e.teamMinSize,
                teamMaxSize=e.teamMaxSize,
                waitlist=WaitlistSettings.model_validate(e.waitlist.model_dump()),
            )
            for i, e in enumerate(draft.events)
        ]
        # Shards first: a race is only visible once every place it advertises exists.
        for e in events:
            self._inventory.create_event_shards(race.raceId, e.eventId, split_cap(e.cap, e.shards))
        also = []
        if director is not None and self._audit is not None:
            also.append(
                self._audit.item(
                    director,
                    race.raceId,
                    "race.create",
                    race.raceId,
                    name=race.name,
                    events=len(events),
                    **({"copiedFrom": copied_from} if copied_from else {}),
                )
            )
        self._store.create(race, events, also)
        if self._catalog is not None:
            self._catalog.invalidate_listing()  # the new race shows in the public list at once
        return race

    def add_event(self, director: Director, race_id: str, draft: EventDraft) -> AdminRaceView:
        race, events = self.owned(director, race_id)
        if len(events) >= MAX_EVENTS:
            raise TooManyEvents(f"A race has at most {MAX_EVENTS} events; this one has {len(events)}.")
        _check_prices(race.currency, dict(_prices(draft)))
        _check_teams({"": draft})
        event = Event(
            raceId=race_id,
            eventId=new_id("evt"),
            name=draft.name,
            cap=draft.cap,
            priceCents=draft.priceCents,
            currency=race.currency,
            shards=shards_for(draft.cap),
            position=max((e.position for e in events), default=-1) + 1,
            minAge=draft.minAge,
            maxAge=draft.maxAge,
            priceTiers=_tiers(draft.priceTiers, race.timeZone, "priceTiers"),
            teamMinSize=draft.teamMinSize,
            teamMaxSize=draft.teamMaxSize,
            waitlist=WaitlistSettings.model_validate(draft.waitlist.model_dump()),
        )
        self._inventory.create_event_shards(race_id, event.eventId, split_cap(event.cap, event.shards))
        try:
            self._run(
                [
                    self._store.put_event_item(event),
                    self._store.version_item(race),
                    self._trail.item(director, race_id, "event.create", event.eventId, **draft.model_dump()),
                ]
            )
        except ConditionFailed as exc:
            # The unused shards stay behind under an id nothing names: harmless.
            raise Conflict("The race was changed meanwhile; reload it and try again.") from exc
        return self._changed(director, race_id)

    # -- editing ---------------------------------------------------------------------------
    def update_race(self, director: Director, race_id: str, patch: RacePatch) -> AdminRaceView:
        race, events = self.owned(director, race_id)
        _check_version(race, patch.expectedVersion)
        asked = patch.model_dump(exclude_unset=True, exclude={"expectedVersion"})
        nulls = [k for k, v in asked.items() if v is None]
        if nulls:
            raise ValidationFailed(
                "Leave out a field to keep it; null is not a value.", fields=dict.fromkeys(nulls, "May not be null.")
            )
        current = RaceFields.model_construct(**{k: getattr(race, k) for k in RaceFields.model_fields})
        try:
            merged = RaceFields.model_validate({**current.model_dump(), **asked})
        except ValidationError as exc:
            raise ValidationFailed("Some fields are missing or invalid.", fields=_fields(exc)) from exc
        stored = {k: _as_stored(getattr(merged, k)) for k in asked}
        changes = cast(RaceChanges, {k: v for k, v in stored.items() if _plain(v) != _plain(getattr(race, k))})
        if not changes:
            return self.view(race, events)
        also: list[TransactItem] = []
        if "currency" in changes:
            taken = sum(self._inventory.usage(race_id, e.eventId, consistent=True).taken for e in events)
            if taken:
                raise Conflict(
                    f"{taken} places are taken at {race.currency} prices; the currency can no longer change."
                )
            _check_new_currency(changes["currency"], events)
            also += [self._store.update_event_item(e, {"currency": changes["currency"]}) for e in events]
        also.append(
            self._trail.item(
                director,
                race_id,
                "race.update",
                race_id,
                changes={k: {"from": _plain(getattr(race, k)), "to": _plain(v)} for k, v in changes.items()},
            )
        )
        updated = self._store.apply_update(race, changes, also)
        self._races.invalidate(race_id, updated.version)
        if self._window is not None and {"registrationOpensAt", "registrationClosesAt"} & changes.keys():
            self._window.follow_new_times(director, updated)
        return self.get(director, race_id)

    def update_event(self, director: Director, race_id: str, event_id: str, patch: EventPatch) -> AdminRaceView:
        asked: dict[str, Any] = patch.model_dump(
            exclude_unset=True, exclude={"expectedVersion", "noMaxAge", "priceTiers", "noTeams"}
        )
        nulls = [k for k, v in asked.items() if v is None]
        if nulls:
            raise ValidationFailed(
                "Leave out a field to keep it; null is not a value.", fields=dict.fromkeys(nulls, "May not be null.")
            )
        if patch.noMaxAge:
            if "maxAge" in asked:
                raise ValidationFailed("Send maxAge or noMaxAge, not both.", fields={"noMaxAge": "Not with maxAge."})
            asked["maxAge"] = None
        if patch.waitlist is not None:
            # The whole setting replaces the one before (fields left out take their defaults):
            # the stored map is always complete.
            asked["waitlist"] = WaitlistSettings.model_validate(patch.waitlist.model_dump()).model_dump()
        if patch.noTeams:
            if {"teamMinSize", "teamMaxSize"} & asked.keys():
                raise ValidationFailed("Send team sizes or noTeams, not both.", fields={"noTeams": "Not with sizes."})
            asked |= {"teamMinSize": None, "teamMaxSize": None}
        for _ in range(CAP_CHANGE_TRIES):
            race, events = self.owned(director, race_id)
            _check_version(race, patch.expectedVersion)
            if patch.priceTiers is not None:
                _check_prices(
                    race.currency, {f"priceTiers.{i}.priceCents": t.priceCents for i, t in enumerate(patch.priceTiers)}
                )
                asked["priceTiers"] = [
                    t.model_dump(mode="json") for t in _tiers(patch.priceTiers, race.timeZone, "priceTiers")
                ]
            event = next((e for e in events if e.eventId == event_id), None)
            if event is None:
                raise EventNotFound(f"Race {race_id} has no event {event_id}.")
            current = {
                **event.model_dump(mode="json", include={"priceTiers"}),
                **event.model_dump(exclude={"priceTiers"}),
            }
            changes = cast(EventChanges, {k: v for k, v in asked.items() if current[k] != v})
            if not changes:
                return self.view(race, events)
            if "priceCents" in changes:
                _check_prices(race.currency, {"priceCents": changes["priceCents"]})
            low, high = changes.get("minAge", event.minAge), changes.get("maxAge", event.maxAge)
            if high is not None and low > high:
                raise ValidationFailed(
                    _AGE_RULE_MESSAGE, fields={"maxAge" if "maxAge" in changes else "minAge": _AGE_RULE_MESSAGE}
                )
            problem = team_range_problem(
                changes.get("teamMinSize", event.teamMinSize),
                changes.get("teamMaxSize", event.teamMaxSize),
                changes.get("cap", event.cap),
            )
            if problem:
                raise ValidationFailed(next(iter(problem.values())), fields=problem)
            shard_items: list[TransactItem] = []
            kept: dict[str, int] = {}
            if "cap" in changes:
                usage = self._inventory.usage(race_id, event_id, consistent=True)
                try:
                    plan = plan_cap_change(usage.shards, changes["cap"], shards_for(changes["cap"]))
                except CapBelowPlacesTaken as exc:
                    raise CapBelowTaken(
                        f"{exc.taken} places of {event.name} are already taken (held, paid or confirmed); "
                        f"the cap cannot go below {exc.taken}.",
                        fields={"cap": f"At least {exc.taken}."},
                    ) from exc
                kept, line_items = self._kept_for_line(race_id, event, changes["cap"] - event.cap, plan)
                shard_items = [
                    *(
                        self._inventory.cap_change_items(race_id, event_id, plan, pooled=kept)
                        if kept
                        else self._inventory.cap_change_items(race_id, event_id, plan)
                    ),
                    *line_items,
                ]
                added = sum(1 for c in plan if c.old_cap is None)
                if added:  # new shards exist only once the event names them (same transaction)
                    changes["shards"] = len(usage.shards) + added
            details = {k: {"from": current.get(k), "to": v} for k, v in changes.items()}
            try:
                self._run(
                    [
                        self._store.update_event_item(event, changes),
                        self._store.version_item(race),
                        self._trail.item(director, race_id, "event.update", event_id, changes=details),
                        *shard_items,
                    ]
                )
            except ConditionFailed:
                continue  # a hold, or another edit, moved something we read: read again
            if changes.get("cap", 0) > event.cap + sum(kept.values()):  # some went to the public
                self._races.places_came_back(race_id, event_id)
            return self._changed(director, race_id)
        raise Conflict("The event kept changing while we tried to save; please retry.")

    def _kept_for_line(
        self, race_id: str, event: Event, raised_by: int, plan: list[ShardChange]
    ) -> tuple[dict[str, int], list[TransactItem]]:
        """A raise on an event whose waitlist has runners waiting: as many new places as they need
        go to the line's pool in the same transaction (one write of its counter), taken on the
        shards that grew; the rest to the public. With nobody waiting, a check that this is still
        so (a runner confirming meanwhile fails the edit, which reads again). No waitlist: nothing."""
        if raised_by <= 0 or not event.waitlist.enabled or self._returns is None:
            return {}, []
        line = self._returns.line(race_id, event.eventId)
        want = min(raised_by, line.waiting - line.pool) if line.wants_places else 0
        if want <= 0:
            return {}, [self._returns.wants_nothing(race_id, event.eventId)]
        kept = pool_split(plan, want)
        return kept, [self._returns.pool_item(race_id, event.eventId, kept)]

    def copy_race(self, director: Director, race_id: str, request: CopyRequest) -> Race:
        """Next year's edition: the race's settings and events (places, prices, age rules), its
        dates moved together to the new race date; a new draft, with no registrations."""
        race, events = self.owned(director, race_id)
        # As in a patch: a field left out takes its default; sent as null it is refused (the
        # document shows no null), not read as "left out".
        nulls = [k for k, v in request.model_dump(exclude_unset=True).items() if v is None]
        if nulls:
            raise ValidationFailed(NULL_MESSAGE, fields=dict.fromkeys(nulls, "May not be null."))
        old_day = date.fromisoformat(race.raceDate)
        try:
            new_day = date.fromisoformat(request.raceDate) if request.raceDate else _a_year_later(old_day)
        except ValueError as exc:  # a year after 9999: a race stored before dates had bounds
            raise _outside_years() from exc
        if new_day < datetime.now(UTC).date():
            raise ValidationFailed(
                "The new edition's date has passed.", fields={"raceDate": "Give a race date from today on."}
            )
        shift = new_day - old_day
        fields = {k: _plain(getattr(race, k)) for k in RaceFields.model_fields if k != "listing"}
        fields["refundPolicy"] = race.refundPolicy.shifted(shift.days).model_dump()  # its days move with the race
        try:
            draft = RaceDraft.model_validate(
                {
                    **fields,
                    "name": request.name or race.name,
                    "raceDate": new_day.isoformat(),
                    "registrationOpensAt": race.registrationOpensAt + shift,
                    "registrationClosesAt": race.registrationClosesAt + shift,
                    "listing": "DRAFT",
                    "events": [
                        {
                            "name": e.name,
                            "cap": e.cap,
                            "priceCents": e.priceCents,
                            "minAge": e.minAge,
                            "priceTiers": [
                                {"startsAt": t.startsAt + shift, "priceCents": t.priceCents} for t in e.priceTiers
                            ],
                            # The setting comes along; the list itself (its runners) does not.
                            "waitlist": e.waitlist.model_dump(),
                        }
                        | ({"maxAge": e.maxAge} if e.maxAge is not None else {})
                        | (
                            {"teamMinSize": e.teamMinSize, "teamMaxSize": e.teamMaxSize}
                            if e.teamMinSize is not None and e.teamMaxSize is not None
                            else {}
                        )
                        for e in events
                    ],
                }
            )
        except ValidationError as exc:  # a shifted time past the years (racecap.models.YEARS) names its field
            raise ValidationFailed("The copy would not be a valid race.", fields=_fields(exc)) from exc
        except OverflowError as exc:  # shifted past year 9999: a race stored before dates had bounds
            raise _outside_years() from exc
        copy = self.create_race(director.sub, draft, director=director, copied_from=race_id)
        # The next edition is data (issue 41, deferrals): the newest copy is where a deferring
        # runner's credit goes. A version bump like any edit, so a cached definition reloads.
        updated = self._store.update_race(race_id, {"nextEdition": copy.raceId})
        if self._catalog is not None:
            self._catalog.invalidate(race_id, updated.version)
        return copy

    # -- publishing ------------------------------------------------------------------------
    def publish(
        self, director: Director, race_id: str, listing: Literal["UNLISTED", "LISTED"], expected: int | None = None
    ) -> AdminRaceView:
        """Open the race to runners (by its link, or also on the race list), once it is complete."""
        race, events = self.owned(director, race_id)
        _check_version(race, expected)
        if race.listing == listing:
            return self.view(race, events)
        _check_complete(race, events)
        return self._relist(director, race, listing)

    def unpublish(self, director: Director, race_id: str, expected: int | None = None) -> AdminRaceView:
        """Back to a draft, closed to runners: only while no runner holds or has a place."""
        race, events = self.owned(director, race_id)
        _check_version(race, expected)
        if race.is_draft:
            return self.view(race, events)
        taken = sum(self._inventory.usage(race_id, e.eventId, consistent=True).taken for e in events)
        if taken:
            places = "1 place is" if taken == 1 else f"{taken} places are"
            raise Conflict(
                f"{places} held or taken: the race can no longer be a draft. "
                "Publish it UNLISTED to take it off the race list."
            )
        return self._relist(director, race, "DRAFT")

    def _relist(self, director: Director, race: Race, listing: Listing) -> AdminRaceView:
        audit = self._trail.item(
            director, race.raceId, "race.publish" if listing != "DRAFT" else "race.unpublish", race.raceId,
            changes={"listing": {"from": race.listing, "to": listing}},
        )  # fmt: skip
        updated = self._store.apply_update(race, {"listing": listing}, [audit])
        self._races.invalidate(race.raceId, updated.version)
        self._races.invalidate_listing()
        return self.get(director, race.raceId)

    # -- helpers ---------------------------------------------------------------------------
    def set_ballot(
        self, director: Director, race_id: str, event_id: str, decide: Callable[[Race, Event], BallotSettings]
    ) -> tuple[Race, Event]:
        """The event's ballot as ``decide`` makes it from the race and event read now (the ballot's
        rules live in ``racecap.ballot.admin``), versioned and audited; read again if an edit won."""
        for _ in range(CAP_CHANGE_TRIES):
            race, events = self.owned(director, race_id)
            event = next((e for e in events if e.eventId == event_id), None)
            if event is None:
                raise EventNotFound(f"Race {race_id} has no event {event_id}.")
            settings = decide(race, event)
            stored = settings.model_dump(mode="json")
            # The draw's line is the event's waitlist, the winners' days to pay its offer window.
            line = WaitlistSettings(enabled=True, offerWindowHours=settings.payDays * 24).model_dump()
            if stored == event.ballot.model_dump(mode="json") and line == event.waitlist.model_dump():
                return race, event
            try:
                self._run(
                    [
                        self._store.update_event_item(event, {"ballot": stored, "waitlist": line}),
                        self._store.version_item(race),
                        self._trail.item(director, race_id, "event.ballot", event_id, ballot=stored),
                    ]
                )
            except ConditionFailed:
                continue
            race, events = self.owned(director, race_id)
            self._races.invalidate(race_id, race.version)
            return race, next(e for e in events if e.eventId == event_id)
        raise Conflict("The event kept changing while we tried to save; please retry.")

    def _run(self, items: list[TransactItem]) -> None:
        if self._transact is None:
            raise RuntimeError("RaceAdmin was built without a transaction runner")
        self._transact(items)

    def _changed(self, director: Director, race_id: str) -> AdminRaceView:
        race, events = self.owned(director, race_id)
        self._races.invalidate(race_id, race.version)
        return self.view(race, events)


def _as_stored(value: Any) -> Any:
    """A validated field as the race stores it (the refund policy as the race's own model)."""
    if isinstance(value, PolicyFields):
        return RefundPolicy.model_validate(value.model_dump())
    return value


def _plain(value: Any) -> Any:
    """A field as the audit trail and a comparison take it: a model as its JSON values."""
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value
