"""The runners of a race: the list with search, the CSV export, one registration, cancel, refund."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query

from racecap.api.admin.common import NOT_YOURS, SECURITY, as_json, csv_page, director_of, owner_of
from racecap.ledger.models import (
    OPEN_PHASES,
    CancellationView,
    CancelRequest,
    RefundRequest,
    RefundView,
    RegistrationDetail,
)
from racecap.ledger.wiring import cancellations, ledger
from racecap.observability import tracer
from racecap.participants.models import AnsweredPage
from racecap.participants.service import CURSOR_PATTERN, PAGE_MAX
from racecap.participants.wiring import participants

router = Router()
_director = director_of(router)
_owned = owner_of(router)


@router.get(
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
    return as_json(200, page)


@router.get(
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
    lines = participants().export_lines(race, events, cursor=cursor, include_cancelled=includeCancelled)
    path = f"/api/admin/races/{raceId}/registrations/export"
    query = {"includeCancelled": "true"} if includeCancelled else {}
    return csv_page(router, lines, path, f"{raceId}-registrations.csv", query)


# After the export's route: Powertools tries routes in order, and "export" is no registration id.
@router.get(
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
    return as_json(200, ledger().registration(race, registrationId))


@router.post(
    "/api/admin/races/<raceId>/registrations/<registrationId>/cancel",
    summary="Cancel a registration, with a refund: all that is left, none, or an amount",
    description="The place goes back to the pool and the runner gets an email. No body (or `{}`) refunds "
    "all that is left of the payment when the cancellation reserves it (after earlier refunds, and any made at "
    "the same moment); `refund: NONE` refunds nothing; `refund: AMOUNT` "
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
    return as_json(200, view)


@router.post(
    "/api/admin/races/<raceId>/registrations/<registrationId>/refunds",
    summary="Refund part of a registration's payment (the registration stays confirmed)",
    description="Send an `Idempotency-Key` header, one per refund you mean (the console makes one per refund "
    "dialog): repeating the request with it resumes or replays that refund, never a second one, and the same "
    "key with another amount is 409 IDEMPOTENCY_KEY_REUSED. Without the header each request is a new refund. "
    "The sum of refunds never exceeds the payment: a refund past what is left is 409 REFUND_TOO_LARGE and "
    "reaches no provider, however many clicks arrive at once. 201: the provider refunded it; 202: the refund "
    "is reserved and waits for the provider's last word (`PENDING`: no answer yet; `PROCESSING`: the card's "
    "bank has not confirmed), settled automatically within minutes. The answer shows the refund and the ledger.",
    tags=["Admin: participants"],
    security=SECURITY,
    responses={
        **NOT_YOURS,
        202: {"description": "Reserved; the provider's last word is not in yet (settled automatically)"},
        409: {
            "description": "REFUND_TOO_LARGE (more than is left), IDEMPOTENCY_KEY_REUSED, or the registration "
            "is not confirmed"
        },
        429: {
            "description": "The payment provider's request budget is spent for now: nothing was reserved or "
            "refunded; retry after Retry-After with the same Idempotency-Key"
        },
        502: {"description": "REFUND_FAILED: the provider refused; nothing was refunded"},
    },
)
@tracer.capture_method
def refund_registration(
    raceId: str,
    registrationId: str,
    body: Annotated[RefundRequest, Body()],
    idempotency_key: Annotated[
        str | None,
        Header(
            min_length=1,
            max_length=200,
            description="One per refund you mean (e.g. a UUID): a retry with it never refunds twice.",
        ),
    ] = None,
) -> Response[RefundView]:
    director, race, _ = _owned(raceId)
    view = ledger().refund(director, race, registrationId, body.amountCents, body.reason, idempotency_key)
    return as_json(202 if view.refund.status in OPEN_PHASES else 201, view)
