"""The registration window: its state and workflow, schedule, open now, close now."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from racecap.api.admin.common import NOT_YOURS, SECURITY, as_json, director_of, owner_of
from racecap.observability import tracer
from racecap.waitlist.wiring import waitlist_closing
from racecap.window.models import WindowView
from racecap.window.wiring import window_control

router = Router()
_director = director_of(router)
_owned = owner_of(router)


# -- the registration window ----------------------------------------------------------------------
@router.get(
    "/api/admin/races/<raceId>/window",
    summary="The registration window and its workflow",
    tags=["Admin: window"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def get_window(raceId: str) -> Response[WindowView]:
    _, race, _ = _owned(raceId)
    return as_json(200, window_control().view(race))


WINDOW_ACTIONS = {
    "schedule": "Follow the race's times: warm up 10 minutes ahead, open and close on time",
    "open": "Open registration now; it still closes at registrationClosesAt",
    "close": "Close registration now (schedule again to resume the planned times)",
}


def _window_action(action: Literal["schedule", "open", "close"], race_id: str) -> Response[WindowView]:
    director, race, events = _owned(race_id)
    control = window_control()
    do = {"schedule": control.schedule, "open": control.open_now, "close": control.close_now}[action]
    view = do(director, race)
    if action == "close":  # every event's waitlist closes with registration (safe to repeat)
        waitlist_closing().closed(race.raceId, events)
    return as_json(200, view)


@router.post(
    "/api/admin/races/<raceId>/window/schedule",
    summary=WINDOW_ACTIONS["schedule"],
    description="Idempotent: repeating it while the same schedule runs changes nothing (`changed: false`).",
    tags=["Admin: window"],
    security=SECURITY,
    responses={**NOT_YOURS, 409: {"description": "CONFLICT: the closing time has passed"}},
)
@tracer.capture_method
def schedule_window(raceId: str) -> Response[WindowView]:
    return _window_action("schedule", raceId)


@router.post(
    "/api/admin/races/<raceId>/window/open",
    summary=WINDOW_ACTIONS["open"],
    description="Idempotent. Stops the scheduled workflow and starts one that only closes on time.",
    tags=["Admin: window"],
    security=SECURITY,
    responses={**NOT_YOURS, 409: {"description": "CONFLICT: the closing time has passed"}},
)
@tracer.capture_method
def open_window(raceId: str) -> Response[WindowView]:
    return _window_action("open", raceId)


@router.post(
    "/api/admin/races/<raceId>/window/close",
    summary=WINDOW_ACTIONS["close"],
    description="Idempotent. Stops the workflow; places held keep their hold time.",
    tags=["Admin: window"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def close_window(raceId: str) -> Response[WindowView]:
    return _window_action("close", raceId)
