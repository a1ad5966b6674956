"""An event's waitlist, for its director: the list with places and states, removing someone, closing
the list, releasing places to it; and every list of the race as CSV."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from racecap.api.admin.common import NOT_YOURS, SECURITY, as_json, csv_page, owner_of
from racecap.errors import EventNotFound
from racecap.http import NO_STORE
from racecap.observability import tracer
from racecap.participants.service import CURSOR_PATTERN
from racecap.participants.wiring import waitlist_export
from racecap.races.models import Event
from racecap.setup.models import EventPatch
from racecap.setup.wiring import race_admin
from racecap.waitlist.models import AdminWaitlistView, WaitlistRelease
from racecap.waitlist.wiring import waitlist_admin

router = Router()
_owned = owner_of(router)


def _event(events: list[Event], race_id: str, event_id: str) -> Event:
    event = next((e for e in events if e.eventId == event_id), None)
    if event is None:
        raise EventNotFound(f"Race {race_id} has no event {event_id}.")
    return event


@router.get(
    "/api/admin/races/<raceId>/events/<eventId>/waitlist",
    summary="The event's waitlist: its settings, length, and every entry with its place and state",
    tags=["Admin: waitlist"],
    security=SECURITY,
    responses={404: {"description": "RACE_NOT_FOUND (no such race, or not yours), EVENT_NOT_FOUND"}},
)
@tracer.capture_method
def get_waitlist(raceId: str, eventId: str) -> Response[AdminWaitlistView]:
    _, _, events = _owned(raceId)
    return as_json(200, waitlist_admin().view(raceId, _event(events, raceId, eventId)))


@router.delete(
    "/api/admin/races/<raceId>/events/<eventId>/waitlist/entries/<entryId>",
    summary="Remove someone from the event's waitlist (audited by entry id, never by address)",
    description="The address cannot join this event's list again. Safe to repeat.",
    tags=["Admin: waitlist"],
    security=SECURITY,
    responses={
        **NOT_YOURS,
        204: {"description": "Removed"},
        404: {"description": "RACE_NOT_FOUND, EVENT_NOT_FOUND, WAITLIST_ENTRY_NOT_FOUND"},
    },
)
@tracer.capture_method
def remove_from_waitlist(raceId: str, eventId: str, entryId: str) -> Response[None]:
    director, _, events = _owned(raceId)
    waitlist_admin().remove(director, raceId, _event(events, raceId, eventId).eventId, entryId)
    return Response(204, headers=NO_STORE)


@router.post(
    "/api/admin/races/<raceId>/events/<eventId>/waitlist/close",
    summary="Close the event's waitlist: no more offers; offered and kept places go back on sale",
    description=(
        "Offers not yet claimed end and their places, with every place kept for the line, go back to the "
        "public at once; every runner still waiting gets one email saying the list has closed. A place already "
        "claimed stays its runner's. Registration closing does the same. Safe to repeat; audited."
    ),
    tags=["Admin: waitlist"],
    security=SECURITY,
    responses={**NOT_YOURS, 404: {"description": "RACE_NOT_FOUND, EVENT_NOT_FOUND"}},
)
@tracer.capture_method
def close_waitlist(raceId: str, eventId: str) -> Response[AdminWaitlistView]:
    director, _, events = _owned(raceId)
    return as_json(200, waitlist_admin().close(director, raceId, _event(events, raceId, eventId)))


@router.post(
    "/api/admin/races/<raceId>/events/<eventId>/waitlist/release",
    summary="Release N more places to the event's waitlist: the cap goes up, the line is offered them first",
    description=(
        "The same as raising the cap by N: as many of the new places as runners wait for (beyond places already "
        "kept for them) go to the line and are offered in order at the sweeper's next run; any more go on sale. "
        "Audited as the event's edit."
    ),
    tags=["Admin: waitlist"],
    security=SECURITY,
    responses={
        **NOT_YOURS,
        400: {"description": "VALIDATION_ERROR"},
        404: {"description": "RACE_NOT_FOUND, EVENT_NOT_FOUND"},
        409: {"description": "CONFLICT: the event kept changing; retry"},
    },
)
@tracer.capture_method
def release_to_waitlist(
    raceId: str, eventId: str, body: Annotated[WaitlistRelease, Body()]
) -> Response[AdminWaitlistView]:
    director, _, events = _owned(raceId)
    event = _event(events, raceId, eventId)
    race_admin().update_event(director, raceId, eventId, EventPatch(cap=event.cap + body.places))
    _, _, events = _owned(raceId)
    return as_json(200, waitlist_admin().view(raceId, _event(events, raceId, eventId)))


@router.get(
    "/api/admin/races/<raceId>/waitlist/export",
    summary="Every event's waitlist as CSV: each entry with its number, place, state and offer",
    description="One row per entry, event by event in line order (join number, then the entries still to "
    "confirm): the runner, when they joined and confirmed, and their offer's state with when it was made, "
    "until when it stood, and when it was claimed or ended. The stats' waitlist figures are counts of these "
    "columns (`state` WAITING; `offerState` OFFERED, CLAIMED, EXPIRED). Paged like the registrations' export: "
    'send `Accept-Encoding: gzip`; follow `Link: rel="next"` (or pass `X-Next-Cursor` as `cursor`).',
    tags=["Admin: waitlist"],
    security=SECURITY,
    responses={**NOT_YOURS, 200: {"description": "CSV", "content": {"text/csv": {"schema": {"type": "string"}}}}},
)
@tracer.capture_method
def export_waitlist(raceId: str, cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN)] = None) -> Response[str]:
    _, race, events = _owned(raceId)
    lines = waitlist_export().lines(race, events, cursor=cursor)
    return csv_page(router, lines, f"/api/admin/races/{raceId}/waitlist/export", f"{raceId}-waitlist.csv")
