"""AdminApi: race directors manage their races — behind the JWT authorizer (Cognito on AWS).

Every route first finds the calling director's race (another director's race answers
404 as if it did not exist), then makes one call into the logic layer.
"""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

import base64
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Field
from racecap.audit.models import AuditPage
from racecap.audit.service import CURSOR_PATTERN as AUDIT_CURSOR
from racecap.audit.wiring import audit_trail
from racecap.auth import director_from_claims
from racecap.codes.models import BulkCodesRequest, CodeDraft, CodeList, CodeView
from racecap.codes.wiring import codes_admin
from racecap.config import get_settings
from racecap.errors import EventNotFound
from racecap.fairness.queue import FairnessPatch, FairnessView
from racecap.fairness.wiring import opening_queue
from racecap.http import NO_STORE, make_resolver
from racecap.ledger.models import CancellationView, CancelRequest, RefundRequest, RefundView, RegistrationDetail
from racecap.ledger.wiring import cancellations, ledger
from racecap.models import Director
from racecap.observability import logger, metrics, tracer
from racecap.participants.models import AnsweredPage
from racecap.participants.service import CURSOR_PATTERN, PAGE_MAX, build_export_page
from racecap.participants.wiring import participants
from racecap.questions.models import QuestionSetDraft, QuestionSetView
from racecap.questions.wiring import questions
from racecap.races.models import Event, Race
from racecap.setup.models import (
    MAX_EVENTS,
    AdminRaceList,
    AdminRaceView,
    CopyRequest,
    EventDraft,
    EventPatch,
    PublishRequest,
    RaceDraft,
    RacePatch,
    UnpublishRequest,
)
from racecap.setup.wiring import race_admin
from racecap.stats.models import RaceStatsView
from racecap.stats.wiring import race_stats
from racecap.window.models import WindowView
from racecap.window.wiring import window_control

get_settings()  # validate the environment at cold start
app = make_resolver()
SECURITY: list[dict[str, list[str]]] = [{"director": []}]
NOT_YOURS: dict[int, OpenAPIResponse] = {404: {"description": "RACE_NOT_FOUND: no such race, or not yours"}}


def _director() -> Director:
    return director_from_claims(app.current_event.request_context.authorizer.jwt_claim)


def _owned(race_id: str) -> tuple[Director, Race, list[Event]]:
    director = _director()
    race, events = race_admin().owned(director, race_id)
    return director, race, events


def _json(status: int, body: Any) -> Response[Any]:
    return Response(status, content_types.APPLICATION_JSON, body, headers=NO_STORE)


# -- races and events -------------------------------------------------------------------------
@app.get("/api/admin/races", summary="Your races", tags=["Admin: races"], security=SECURITY)
@tracer.capture_method
def list_races() -> Response[AdminRaceList]:
    return _json(200, race_admin().list_races(_director()))


@app.post(
    "/api/admin/races",
    summary="Create a race with its events",
    description="A new race is a draft, closed to runners, until you publish it (or create it UNLISTED or "
    "LISTED, if it is complete). Registration stays closed until you schedule the window or open it now.",
    tags=["Admin: races"],
    security=SECURITY,
    responses={201: {"description": "Created"}, 400: {"description": "VALIDATION_ERROR with fields"}},
)
@tracer.capture_method
def create_race(body: Annotated[RaceDraft, Body()]) -> Response[AdminRaceView]:
    director = _director()
    race = race_admin().create_race(director.sub, body, director=director)
    return _json(201, race_admin().get(director, race.raceId))


@app.get(
    "/api/admin/races/<raceId>",
    summary="One of your races",
    tags=["Admin: races"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def get_race(raceId: str) -> Response[AdminRaceView]:
    return _json(200, race_admin().get(_director(), raceId))


@app.patch(
    "/api/admin/races/<raceId>",
    summary="Edit a race",
    description="Send only the fields to change. New registration times also move a scheduled window.",
    tags=["Admin: races"],
    security=SECURITY,
    responses={**NOT_YOURS, 400: {"description": "VALIDATION_ERROR"}, 409: {"description": "CONFLICT"}},
)
@tracer.capture_method
def edit_race(raceId: str, body: Annotated[RacePatch, Body()]) -> Response[AdminRaceView]:
    return _json(200, race_admin().update_race(_director(), raceId, body))


@app.post(
    "/api/admin/races/<raceId>/events",
    summary="Add an event to a race",
    description=f"A race has at most {MAX_EVENTS} events (409 TOO_MANY_EVENTS beyond).",
    tags=["Admin: races"],
    security=SECURITY,
    responses={
        **NOT_YOURS,
        201: {"description": "Created"},
        400: {"description": "VALIDATION_ERROR with fields (priceCents under the provider's minimum)"},
        409: {"description": "TOO_MANY_EVENTS or CONFLICT"},
    },
)
@tracer.capture_method
def add_event(raceId: str, body: Annotated[EventDraft, Body()]) -> Response[AdminRaceView]:
    return _json(201, race_admin().add_event(_director(), raceId, body))


@app.patch(
    "/api/admin/races/<raceId>/events/<eventId>",
    summary="Edit an event: name, price, cap",
    description="Raising the cap adds places at once; lowering it below the places taken is refused "
    "(409 CAP_BELOW_TAKEN).",
    tags=["Admin: races"],
    security=SECURITY,
    responses={
        **NOT_YOURS,
        400: {"description": "VALIDATION_ERROR with fields (priceCents under the provider's minimum)"},
        409: {"description": "CAP_BELOW_TAKEN or CONFLICT"},
    },
)
@tracer.capture_method
def edit_event(raceId: str, eventId: str, body: Annotated[EventPatch, Body()]) -> Response[AdminRaceView]:
    return _json(200, race_admin().update_event(_director(), raceId, eventId, body))


@app.post(
    "/api/admin/races/<raceId>/copy",
    summary="Copy a race: next year's edition as a new draft",
    description="Settings and events (places, prices, age rules) are copied; the race date moves to `raceDate` "
    "(default: a year later) and the registration window with it. No registrations come along.",
    tags=["Admin: races"],
    security=SECURITY,
    responses={**NOT_YOURS, 201: {"description": "The new draft"}, 400: {"description": "VALIDATION_ERROR"}},
)
@tracer.capture_method
def copy_race(raceId: str, body: Annotated[CopyRequest | None, Body()] = None) -> Response[AdminRaceView]:
    director = _director()
    copy = race_admin().copy_race(director, raceId, body or CopyRequest())
    return _json(201, race_admin().get(director, copy.raceId))


@app.post(
    "/api/admin/races/<raceId>/publish",
    summary="Publish a race: open by its link (UNLISTED) or also on the race list (LISTED)",
    description="Checks the race is ready for runners first: 409 RACE_INCOMPLETE with `fields` naming what is "
    "missing. Repeating it changes nothing.",
    tags=["Admin: races"],
    security=SECURITY,
    responses={**NOT_YOURS, 409: {"description": "RACE_INCOMPLETE (fields say what is missing), or CONFLICT"}},
)
@tracer.capture_method
def publish_race(raceId: str, body: Annotated[PublishRequest | None, Body()] = None) -> Response[AdminRaceView]:
    asked = body or PublishRequest()
    return _json(200, race_admin().publish(_director(), raceId, asked.listing, asked.expectedVersion))


@app.post(
    "/api/admin/races/<raceId>/unpublish",
    summary="Back to a draft, closed to runners (only while no place is held or taken)",
    tags=["Admin: races"],
    security=SECURITY,
    responses={**NOT_YOURS, 409: {"description": "CONFLICT: places are held or taken (make it UNLISTED instead)"}},
)
@tracer.capture_method
def unpublish_race(raceId: str, body: Annotated[UnpublishRequest | None, Body()] = None) -> Response[AdminRaceView]:
    return _json(200, race_admin().unpublish(_director(), raceId, body.expectedVersion if body else None))


# -- the registration window ----------------------------------------------------------------------
@app.get(
    "/api/admin/races/<raceId>/window",
    summary="The registration window and its workflow",
    tags=["Admin: window"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def get_window(raceId: str) -> Response[WindowView]:
    _, race, _ = _owned(raceId)
    return _json(200, window_control().view(race))


WINDOW_ACTIONS = {
    "schedule": "Follow the race's times: warm up 10 minutes ahead, open and close on time",
    "open": "Open registration now; it still closes at registrationClosesAt",
    "close": "Close registration now (schedule again to resume the planned times)",
}


def _window_action(action: Literal["schedule", "open", "close"], race_id: str) -> Response[WindowView]:
    director, race, _ = _owned(race_id)
    control = window_control()
    do = {"schedule": control.schedule, "open": control.open_now, "close": control.close_now}[action]
    return _json(200, do(director, race))


@app.post(
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


@app.post(
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


@app.post(
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


# -- live stats, participants, refunds, audit ----------------------------------------------------------
class StatsWithQueue(RaceStatsView):
    fairness: FairnessView = Field(description="The opening queue (length, admitted, rate, wait) and hold limits.")


@app.get(
    "/api/admin/races/<raceId>/stats",
    summary="Live figures per event",
    description="Cap, held, queued, confirmed, places left, money, and confirmations per minute. "
    "Up to two seconds old.",
    tags=["Admin: participants"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def stats(raceId: str, minutes: Annotated[int, Query(ge=1, le=1440)] = 60) -> Response[StatsWithQueue]:
    _, race, events = _owned(raceId)
    figures = race_stats().stats(race, events, minutes)
    return _json(200, StatsWithQueue(**figures.model_dump(), fairness=opening_queue().view(raceId)))


# -- fairness: hold limits, the opening queue ----------------------------------------------------------
@app.get(
    "/api/admin/races/<raceId>/fairness",
    summary="Hold limits, proof-of-work and the opening queue's settings and figures",
    tags=["Admin: fairness"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def get_fairness(raceId: str) -> Response[FairnessView]:
    _owned(raceId)
    return _json(200, opening_queue().view(raceId))


@app.patch(
    "/api/admin/races/<raceId>/fairness",
    summary="Switch the opening queue on or off; set the admission rate, hold limits, proof-of-work difficulty",
    description="Send `expectedVersion` (the view's `version`): settings changed meanwhile answer 409 CONFLICT "
    "with the current version, and nothing changes.",
    tags=["Admin: fairness"],
    security=SECURITY,
    responses={**NOT_YOURS, 409: {"description": "CONFLICT: the settings changed since expectedVersion"}},
)
@tracer.capture_method
def edit_fairness(raceId: str, body: Annotated[FairnessPatch, Body()]) -> Response[FairnessView]:
    director, _, _ = _owned(raceId)
    return _json(200, opening_queue().configure(raceId, body, director))


@app.post(
    "/api/admin/races/<raceId>/queue/pause",
    summary="Pause admission from the queue (everyone keeps their place)",
    tags=["Admin: fairness"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def pause_queue(raceId: str) -> Response[FairnessView]:
    director, _, _ = _owned(raceId)
    return _json(200, opening_queue().pause(raceId, director))


@app.post(
    "/api/admin/races/<raceId>/queue/resume",
    summary="Resume admission from the queue at the set rate",
    tags=["Admin: fairness"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def resume_queue(raceId: str) -> Response[FairnessView]:
    director, _, _ = _owned(raceId)
    return _json(200, opening_queue().resume(raceId, director))


@app.get(
    "/api/admin/races/<raceId>/registrations",
    summary="Registrations, paginated, with search",
    description="`q`: a bib number, a whole email address, or words matched against names and email. "
    "A word search reads a bounded slice per call and may return fewer than `limit` rows with a `nextCursor`.",
    tags=["Admin: participants"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def list_registrations(
    raceId: str,
    q: Annotated[str | None, Query(max_length=200)] = None,
    eventId: Annotated[str | None, Query(max_length=100)] = None,
    status: Annotated[Literal["CONFIRMED", "CANCELLING", "CANCELLED"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 50,
    cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN)] = None,
) -> Response[AnsweredPage]:
    _, race, events = _owned(raceId)
    page = participants().page(race, events, q=q, event_id=eventId, status=status, limit=limit, cursor=cursor)
    return _json(200, page)


@app.get(
    "/api/admin/races/<raceId>/registrations/export",
    summary="Registrations as CSV",
    description="Send `Accept-Encoding: gzip` (`curl --compressed`): one response then carries about 100,000 "
    'rows. A larger export comes in pages: follow `Link: rel="next"` (or pass `X-Next-Cursor` as '
    "`cursor`); later pages have no header line, so they append to the same file.",
    tags=["Admin: participants"],
    security=SECURITY,
    responses={**NOT_YOURS, 200: {"description": "CSV", "content": {"text/csv": {"schema": {"type": "string"}}}}},
)
@tracer.capture_method
def export_registrations(
    raceId: str,
    cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN)] = None,
    includeCancelled: Annotated[bool, Query()] = False,
) -> Response[str]:
    _, race, events = _owned(raceId)
    accepts = app.current_event.headers.get("accept-encoding", "")
    deadline_s = app.lambda_context.get_remaining_time_in_millis() / 1000
    lines = participants().export_lines(race, events, cursor=cursor, include_cancelled=includeCancelled)
    page = build_export_page(lines, gzip="gzip" in accepts.lower(), remaining_s=deadline_s)
    headers = {
        **NO_STORE,
        "Content-Disposition": f'attachment; filename="{raceId}-registrations.csv"',
        "X-Export-Lines": str(page.lines),
    }
    if page.gzipped:
        headers["Content-Encoding"] = "gzip"
    if page.next_cursor:
        query = urlencode({"cursor": page.next_cursor} | ({"includeCancelled": "true"} if includeCancelled else {}))
        headers["X-Next-Cursor"] = page.next_cursor
        headers["Link"] = f'</api/admin/races/{raceId}/registrations/export?{query}>; rel="next"'
    body = page.body if isinstance(page.body, str) else base64.b64encode(page.body).decode()
    response = Response(200, "text/csv; charset=utf-8", body, headers=headers)
    response.base64_encoded = page.gzipped  # already encoded: validation sees plain ASCII text
    return response


# After the export's route: Powertools tries routes in order, and "export" is no registration id.
@app.get(
    "/api/admin/races/<raceId>/registrations/<registrationId>",
    summary="One registration: the runner, its state and bib, and its payments and refunds",
    description="`ledger` lists the entry payment and every refund (amount, reason, who, when), oldest first, "
    "with what is left to refund.",
    tags=["Admin: participants"],
    security=SECURITY,
    responses={404: {"description": "RACE_NOT_FOUND (no such race, or not yours) or REGISTRATION_NOT_FOUND"}},
)
@tracer.capture_method
def get_registration(raceId: str, registrationId: str) -> Response[RegistrationDetail]:
    _, race, _ = _owned(raceId)
    return _json(200, ledger().registration(race, registrationId))


@app.post(
    "/api/admin/races/<raceId>/registrations/<registrationId>/cancel",
    summary="Cancel a registration, with a refund: all that is left, none, or an amount",
    description="The place goes back to the pool and the runner gets an email. No body (or `{}`) refunds "
    "all that is left of the payment after earlier refunds; `refund: NONE` refunds nothing; `refund: AMOUNT` "
    "refunds `amountCents`, within what is left (more is 409 REFUND_TOO_LARGE and changes nothing). "
    "The answer says what was refunded. Repeating the call is harmless: one refund, one email "
    "(`changed: false`), with the choice made by the first call.",
    tags=["Admin: participants"],
    security=SECURITY,
    responses={
        **NOT_YOURS,
        409: {"description": "REFUND_TOO_LARGE (more than is left), or the registration cannot be cancelled"},
        429: {"description": "The payment provider is not answering; retry (the cancellation is pending)"},
        502: {"description": "REFUND_FAILED: the provider refused; nothing changed"},
    },
)
@tracer.capture_method
def cancel_registration(
    raceId: str, registrationId: str, body: Annotated[CancelRequest | None, Body()] = None
) -> Response[CancellationView]:
    director, race, _ = _owned(raceId)
    body = body or CancelRequest()
    view = cancellations().cancel(director, race, registrationId, body.reason, body.refund, body.amountCents)
    return _json(200, view)


@app.post(
    "/api/admin/races/<raceId>/registrations/<registrationId>/refunds",
    summary="Refund part of a registration's payment (the registration stays confirmed)",
    description="Each call is its own refund, with its own idempotency key at the provider. The sum of "
    "refunds never exceeds the payment: a refund past what is left is 409 REFUND_TOO_LARGE and reaches "
    "no provider, however many clicks arrive at once. The answer shows the refund and the ledger.",
    tags=["Admin: participants"],
    security=SECURITY,
    responses={
        **NOT_YOURS,
        409: {"description": "REFUND_TOO_LARGE (more than is left), or the registration is not confirmed"},
        429: {"description": "The payment provider is not answering; the refund is pending (its amount reserved)"},
        502: {"description": "REFUND_FAILED: the provider refused; nothing was refunded"},
    },
)
@tracer.capture_method
def refund_registration(
    raceId: str, registrationId: str, body: Annotated[RefundRequest, Body()]
) -> Response[RefundView]:
    director, race, _ = _owned(raceId)
    return _json(201, ledger().refund(director, race, registrationId, body.amountCents, body.reason))


# -- registration questions ----------------------------------------------------------------------
def _owned_event(race_id: str, event_id: str) -> tuple[Director, Race, Event]:
    director, race, events = _owned(race_id)
    event = next((e for e in events if e.eventId == event_id), None)
    if event is None:
        raise EventNotFound(f"Race {race_id} has no event {event_id}.")
    return director, race, event


NO_EVENT: dict[int, OpenAPIResponse] = {404: {"description": "RACE_NOT_FOUND (or not yours), EVENT_NOT_FOUND"}}


@app.get(
    "/api/admin/races/<raceId>/events/<eventId>/questions",
    summary="The event's registration questions as runners are asked them now",
    tags=["Admin: questions"],
    security=SECURITY,
    responses=NO_EVENT,
)
@tracer.capture_method
def get_questions(raceId: str, eventId: str) -> Response[QuestionSetView]:
    _, race, event = _owned_event(raceId, eventId)
    return _json(200, questions().view(race, event))


@app.put(
    "/api/admin/races/<raceId>/events/<eventId>/questions",
    summary="Save the event's questions as a new version",
    description="Send the whole set: your questions in order and the built-ins to ask. Each save is the "
    "next version; registrations keep the version they answered. With `expectedVersion`, a save built "
    "on an older version is refused (409).",
    tags=["Admin: questions"],
    security=SECURITY,
    responses={
        **NO_EVENT,
        400: {"description": "VALIDATION_ERROR with fields (e.g. questions.2.options)"},
        409: {"description": "CONFLICT: another save came first"},
    },
)
@tracer.capture_method
def save_questions(raceId: str, eventId: str, body: Annotated[QuestionSetDraft, Body()]) -> Response[QuestionSetView]:
    director, race, event = _owned_event(raceId, eventId)
    return _json(200, questions().save(director, race, event, body))


@app.get(
    "/api/admin/races/<raceId>/events/<eventId>/questions/<version>",
    summary="One saved version of the event's questions (what older registrations answered)",
    tags=["Admin: questions"],
    security=SECURITY,
    responses={404: {"description": "RACE_NOT_FOUND, EVENT_NOT_FOUND or QUESTIONS_VERSION_NOT_FOUND"}},
)
@tracer.capture_method
def get_questions_version(
    raceId: str, eventId: str, version: Annotated[int, Path(ge=1, le=1_000_000)]
) -> Response[QuestionSetView]:
    _, race, event = _owned_event(raceId, eventId)
    return _json(200, questions().view(race, event, version))


@app.get(
    "/api/admin/races/<raceId>/codes",
    summary="The race's discount codes, with the uses taken",
    tags=["Admin: codes"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def list_codes(raceId: str) -> Response[CodeList]:
    return _json(200, codes_admin().list(_director(), raceId))


@app.post(
    "/api/admin/races/<raceId>/codes",
    summary="Make a discount code",
    description="A percentage or an amount off the held price, for the race or listed events, valid from/to "
    "(times without an offset are the race's), with a maximum number of uses enforced under bursts. "
    "Codes are compared in capitals.",
    tags=["Admin: codes"],
    security=SECURITY,
    responses={**NOT_YOURS, 409: {"description": "CODE_EXISTS: the race has that code"}},
)
@tracer.capture_method
def create_code(raceId: str, body: Annotated[CodeDraft, Body()]) -> Response[CodeView]:
    return _json(201, codes_admin().create(_director(), raceId, body))


@app.post(
    "/api/admin/races/<raceId>/codes/bulk",
    summary="Make N single-use codes (a sponsor's batch), answered as CSV",
    tags=["Admin: codes"],
    security=SECURITY,
    responses={**NOT_YOURS, 201: {"description": "CSV", "content": {"text/csv": {"schema": {"type": "string"}}}}},
)
@tracer.capture_method
def bulk_codes(raceId: str, body: Annotated[BulkCodesRequest, Body()]) -> Response[str]:
    codes = codes_admin().bulk(_director(), raceId, body)
    csv = "code\r\n" + "".join(f"{c}\r\n" for c in codes)  # letters, digits and '-': nothing to quote
    headers = {**NO_STORE, "Content-Disposition": f'attachment; filename="{raceId}-{body.prefix}-codes.csv"'}
    return Response(201, "text/csv; charset=utf-8", csv, headers=headers)


@app.get(
    "/api/admin/races/<raceId>/audit",
    summary="Who changed what, when — newest first",
    tags=["Admin: races"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def audit(
    raceId: str,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=400, pattern=AUDIT_CURSOR)] = None,
) -> Response[AuditPage]:
    _owned(raceId)
    return _json(200, audit_trail().page(raceId, limit, cursor))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
