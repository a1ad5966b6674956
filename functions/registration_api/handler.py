"""RegistrationApi: hold a place, register and pay, release a hold, poll the outcome;
get a device token, and wait in a race's opening queue; the payment provider's webhooks."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse, OpenAPIResponseHeader
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.codes.models import ApplyCode
from racecap.codes.wiring import discounts
from racecap.config import get_settings
from racecap.fairness.identity import (
    HOLDS_SECURITY,
    NEEDS_DEVICE,
    READS_QUEUE_TOKEN,
    DeviceView,
    lower_headers,
    new_device_token,
)
from racecap.fairness.limits import client_limits
from racecap.fairness.queue import ChallengeView, EnterRequest, NowServingView, QueueView
from racecap.fairness.wiring import client, opening_queue, runner_rate_limit, signer
from racecap.holds.models import HoldCreated, HoldView, TeamHoldRequest
from racecap.holds.wiring import hold_service
from racecap.http import NO_STORE, make_resolver
from racecap.ledger.models import WebhookAnswer
from racecap.ledger.wiring import payment_events
from racecap.observability import logger, metrics, tracer
from racecap.registration.models import (
    RegistrationAccepted,
    RegistrationRequest,
    RegistrationStatus,
    TeamRegistrationRequest,
)
from racecap.registration.wiring import registration_service

WEBHOOK_PATH = "/api/payments/webhook"

settings = get_settings()  # validate the environment at cold start, not mid-burst
# The queue's shared figure: about a second at the edge (blueprint.CACHE_BEHAVIOURS), like
# the queue state's own cache (racecap.fairness.queue.STATE_TTL).
SHARED_1S = {"Cache-Control": "public, max-age=1"}
app = make_resolver(rate_limit=runner_rate_limit, rate_exempt=(WEBHOOK_PATH,))


@app.post(
    "/api/races/<raceId>/events/<eventId>/holds",
    summary="Hold one place for the race's hold window",
    tags=["Registration"],
    security=HOLDS_SECURITY,
    responses={
        201: {
            "description": "Held",
            "links": {
                "Register": {
                    "operationId": "register_api_holds__holdId__registration_post",
                    "parameters": {"holdId": "$response.body#/holdId"},
                },
                "Release": {
                    "operationId": "release_hold_api_holds__holdId__delete",
                    "parameters": {"holdId": "$response.body#/holdId"},
                },
            },
        },
        409: {"description": "SOLD_OUT or REGISTRATION_CLOSED"},
        401: {"description": "INVALID_TOKEN, TOKEN_EXPIRED (device or admission token)"},
        403: {"description": "QUEUE_ADMISSION_REQUIRED (the race's queue is on), TOKEN_NOT_YOURS"},
        404: {"description": "RACE_NOT_FOUND or EVENT_NOT_FOUND"},
        429: {"description": "TOO_MANY_HOLDS (device or address at its limit) or TOO_MANY_REQUESTS; see Retry-After"},
    },
)
@tracer.capture_method
def create_hold(raceId: str, eventId: str) -> Response[HoldCreated]:
    held = hold_service().hold(raceId, eventId, limits=_hold_limits(raceId))
    return Response(201, content_types.APPLICATION_JSON, held, headers=NO_STORE)


def _client() -> Any:
    return client(lower_headers(app.current_event.raw_event))


def _hold_limits(race_id: str) -> dict[str, int]:
    """The caller's hold-limit counters, once the race's queue (when on) has admitted it."""
    who = _client()
    return client_limits(race_id, who, opening_queue().admit_hold(race_id, who))


@app.post(
    "/api/device",
    summary="A signed device token (the site asks once, on its first visit)",
    description="Send it as `X-Racecap-Device` on later calls: the queue and the per-device hold limit key on it.",
    tags=["Fairness"],
)
@tracer.capture_method
def device_token() -> Response[DeviceView]:
    _, token = new_device_token(signer())
    return Response(201, content_types.APPLICATION_JSON, DeviceView(deviceToken=token), headers=NO_STORE)


@app.post(
    "/api/races/<raceId>/queue/challenge",
    summary="A proof-of-work challenge for joining the race's queue",
    tags=["Fairness"],
    security=NEEDS_DEVICE,
    responses={401: {"description": "DEVICE_TOKEN_REQUIRED, INVALID_TOKEN"}, 404: {"description": "RACE_NOT_FOUND"}},
)
@tracer.capture_method
def queue_challenge(raceId: str) -> Response[ChallengeView]:
    return Response(201, content_types.APPLICATION_JSON, opening_queue().challenge(raceId, _client()), headers=NO_STORE)


@app.post(
    "/api/races/<raceId>/queue",
    summary="Join the race's opening queue with a solved challenge",
    description="One place per device: joining again (a refresh, a second tab) returns the same place.",
    tags=["Fairness"],
    security=NEEDS_DEVICE,
    responses={
        401: {"description": "DEVICE_TOKEN_REQUIRED, INVALID_TOKEN"},
        403: {"description": "PROOF_OF_WORK_REFUSED (missing, wrong or reused proof), TOKEN_NOT_YOURS"},
        404: {"description": "RACE_NOT_FOUND"},
    },
)
@tracer.capture_method
def join_queue(raceId: str, body: Annotated[EnterRequest, Body()]) -> Response[QueueView]:
    view = opening_queue().enter(raceId, _client(), body)
    return _queue_response(view)


@app.get(
    "/api/races/<raceId>/queue",
    summary="Your place in the race's queue (send X-Racecap-Queue), or your admission",
    description="`Retry-After` says when to poll again: rarely while far from the front, often near it.",
    tags=["Fairness"],
    security=READS_QUEUE_TOKEN,
    responses={
        401: {"description": "DEVICE_TOKEN_REQUIRED, INVALID_TOKEN, TOKEN_EXPIRED"},
        403: {"description": "TOKEN_NOT_YOURS"},
        404: {"description": "RACE_NOT_FOUND"},
    },
)
@tracer.capture_method
def queue_place(raceId: str) -> Response[QueueView]:
    return _queue_response(opening_queue().poll(raceId, _client()))


@app.get(
    "/api/races/<raceId>/queue/now-serving",
    summary="How far admission has got: the same answer for everyone, cached for a second",
    description="A waiting runner's position is their `number` minus `nowServing`. Cached at the edge "
    "(CloudFront; nginx locally) for about a second, so polling it costs the origin nothing per runner.",
    tags=["Fairness"],
    responses={404: {"description": "RACE_NOT_FOUND"}},
)
@tracer.capture_method
def queue_now_serving(raceId: str) -> Response[NowServingView]:
    return Response(200, content_types.APPLICATION_JSON, opening_queue().now_serving(raceId), headers=SHARED_1S)


def _queue_response(view: QueueView) -> Response[QueueView]:
    headers = {**NO_STORE, **({"Retry-After": str(view.retryAfterSeconds)} if view.retryAfterSeconds else {})}
    return Response(200, content_types.APPLICATION_JSON, view, headers=headers)


@app.get(
    "/api/holds/<holdId>",
    summary="A hold, as its link shows it on any device",
    description="The event, the price held, the clock, and how far it got (details sent, paid). Never the "
    "runner's name, email or date of birth.",
    tags=["Registration"],
    responses={404: {"description": "HOLD_NOT_FOUND"}},
)
@tracer.capture_method
def get_hold(holdId: str) -> Response[HoldView]:
    return Response(200, content_types.APPLICATION_JSON, hold_service().view(holdId), headers=NO_STORE)


@app.delete(
    "/api/holds/<holdId>",
    summary="Give a held place back",
    tags=["Registration"],
    responses={
        204: {"description": "Released"},
        404: {"description": "HOLD_NOT_FOUND"},
        409: {"description": "CONFLICT: the place is paid for (the director cancels a registration)"},
    },
)
@tracer.capture_method
def release_hold(holdId: str) -> Response[None]:
    hold_service().release(holdId)
    return Response(204, headers=NO_STORE)


_BUSY_CODE: OpenAPIResponse = {
    "description": "TOO_MANY_REQUESTS: on the card step, the payment provider is busy or not answering; the "
    "code change is kept and a retry finishes it. Retry after Retry-After.",
    "headers": {"Retry-After": {"description": "Seconds to wait"}},
}


@app.put(
    "/api/holds/<holdId>/code",
    summary="Apply a discount code to a held place",
    description="Until the place is paid. One code per place: a second replaces the first. "
    "The code's use is taken now, atomically with the hold, and given back if the hold expires or is "
    "released unpaid. On the card step (details sent) the hold's one PaymentIntent is changed to the new "
    "amount; if the runner paid meanwhile the code is refused (409) and its use given back. A code making "
    "a paying place free is refused: such a code is applied before the details are sent. The answer is the "
    "hold with its new price.",
    tags=["Registration"],
    responses={
        400: {"description": "CODE_INVALID: the discounted price is below what the payment provider can charge"},
        404: {"description": "HOLD_NOT_FOUND, or CODE_UNKNOWN: no such code for this race"},
        409: {
            "description": "CODE_NOT_YET_VALID, CODE_EXPIRED, CODE_USED_UP, CODE_NOT_FOR_EVENT, CODE_TOO_LATE "
            "(paid, paid meanwhile, or free on the card step), or CONFLICT (the details are being processed)"
        },
        410: {"description": "HOLD_EXPIRED"},
        429: _BUSY_CODE,
    },
)
@tracer.capture_method
def apply_code(holdId: str, body: Annotated[ApplyCode, Body()]) -> Response[HoldView]:
    discounts().apply(holdId, body.code)
    return Response(200, content_types.APPLICATION_JSON, hold_service().view(holdId), headers=NO_STORE)


@app.delete(
    "/api/holds/<holdId>/code",
    summary="Remove the discount code from a held place",
    description="Its use is given back and the place costs its held price again (on the card step: the "
    "hold's PaymentIntent's amount too). Harmless without a code.",
    tags=["Registration"],
    responses={
        404: {"description": "HOLD_NOT_FOUND"},
        409: {"description": "CODE_TOO_LATE: the place is paid, or was paid meanwhile; CONFLICT"},
        410: {"description": "HOLD_EXPIRED"},
        429: _BUSY_CODE,
    },
)
@tracer.capture_method
def remove_code(holdId: str) -> Response[HoldView]:
    discounts().remove(holdId)
    return Response(200, content_types.APPLICATION_JSON, hold_service().view(holdId), headers=NO_STORE)


_CONFIRM_LINK = {
    "Confirm": {
        "operationId": "confirm_payment_api_holds__holdId__payment_confirm_post",
        "parameters": {"holdId": "$request.path.holdId"},
    }
}
_OUTCOME_LINK = {
    "Outcome": {
        "operationId": "registration_status_api_registrations__registrationId__get",
        "parameters": {"registrationId": "$response.body#/registrationId"},
    }
}
_FIRST_CHECK: dict[str, OpenAPIResponseHeader] = {
    "Retry-After": {"description": "While QUEUED: seconds until it is likely confirmed (the writer's backlog)"}
}
_BUSY: OpenAPIResponse = {
    "description": "TOO_MANY_REQUESTS: the payment provider's request budget is spent for now, or it is not "
    "answering; the place stays held. Retry after Retry-After.",
    "headers": {"Retry-After": {"description": "Seconds to wait"}},
}


@app.post(
    "/api/races/<raceId>/events/<eventId>/teams",
    summary="Hold a team's places together: all of them or none",
    description=(
        "For an event with team entries (`teamMinSize`..`teamMaxSize` on the race page): `places` places are "
        "taken in one step across the event's cap, or none is. Fewer left than the team needs is a 409 "
        "`NOT_ENOUGH_PLACES` saying how many are; the event is not sold out for that. A team hold counts as "
        "one hold of the device and as all its places against the address's ceiling. Send every member's "
        "details next (POST /api/holds/{holdId}/team)."
    ),
    tags=["Registration"],
    security=HOLDS_SECURITY,
    responses={
        201: {
            "description": "Held",
            "links": {
                "RegisterTeam": {
                    "operationId": "register_team_api_holds__holdId__team_post",
                    "parameters": {"holdId": "$response.body#/holdId"},
                },
            },
        },
        400: {"description": "VALIDATION_ERROR: `places` outside the event's team sizes, or no team entries"},
        409: {"description": "NOT_ENOUGH_PLACES, SOLD_OUT or REGISTRATION_CLOSED"},
        401: {"description": "INVALID_TOKEN, TOKEN_EXPIRED (device or admission token)"},
        403: {"description": "QUEUE_ADMISSION_REQUIRED (the race's queue is on), TOKEN_NOT_YOURS"},
        404: {"description": "RACE_NOT_FOUND or EVENT_NOT_FOUND"},
        429: {"description": "TOO_MANY_HOLDS (device or address at its limit) or TOO_MANY_REQUESTS; see Retry-After"},
    },
)
@tracer.capture_method
def create_team_hold(raceId: str, eventId: str, body: Annotated[TeamHoldRequest, Body()]) -> Response[HoldCreated]:
    held = hold_service().hold_team(raceId, eventId, body.places, limits=_hold_limits(raceId))
    return Response(201, content_types.APPLICATION_JSON, held, headers=NO_STORE)


@app.post(
    "/api/holds/<holdId>/team",
    summary="A team's details, the captain first: claim every email, get the team's one payment",
    description=(
        "Every member is checked as a runner would be (the event's age rule, questions, waiver; a 400 names "
        "`members.<i>.<field>`), then every member's email is claimed in one step: if one is registered already, "
        "a 409 names that member, nothing is charged and the team keeps its places. One PaymentIntent covers "
        "the team (each member's registration carries an equal share); answered as a single registration is. "
        "Once paid, every member gets their own registration, bib and confirmation email."
    ),
    tags=["Registration"],
    responses={
        200: {"description": "Payment required: confirm it with `clientSecret`", "links": _CONFIRM_LINK},
        202: {"description": "Paid and queued (the captain's registration id)", "headers": _FIRST_CHECK},
        400: {"description": "VALIDATION_ERROR with fields (`members.<i>.<field>`)"},
        402: {"description": "PAYMENT_DECLINED (with `paymentMethod`); the places stay held"},
        409: {
            "description": "EMAIL_ALREADY_REGISTERED (`fields` names the member), CONFLICT (a single place's "
            "hold, or a payment with other details in progress), PAYMENT_REFUSED or OPTION_SOLD_OUT",
        },
        410: {"description": "HOLD_EXPIRED"},
        404: {"description": "HOLD_NOT_FOUND"},
        429: _BUSY,
    },
)
@tracer.capture_method
def register_team(holdId: str, body: Annotated[TeamRegistrationRequest, Body()]) -> Response[RegistrationAccepted]:
    return _accepted(registration_service().register_team(holdId, body))


@app.post(
    "/api/holds/<holdId>/registration",
    summary="The runner's details: claim the email, get the hold's payment to confirm",
    description=(
        "Claims the email for the race, then answers with the hold's one PaymentIntent "
        "(`clientSecret`, for Stripe.js's `confirmPayment`) and the amount, from the server's price. "
        "Repeating the call (a retry, a second tab, after a decline) returns the same intent. "
        "With `paymentMethod` (a `pm_…` id) the intent is confirmed here instead. "
        "Once paid: `QUEUED` (202)."
    ),
    tags=["Registration"],
    responses={
        200: {"description": "Payment required: confirm it with `clientSecret`", "links": _CONFIRM_LINK},
        202: {"description": "Paid and queued", "links": _OUTCOME_LINK, "headers": _FIRST_CHECK},
        400: {"description": "VALIDATION_ERROR with fields (a bad answer: `answers.<questionId>`)"},
        402: {"description": "PAYMENT_DECLINED (with `paymentMethod`); the place stays held"},
        409: {
            "description": "EMAIL_ALREADY_REGISTERED, CONFLICT: a payment with other details is in progress, "
            "or the same call is still being processed, or PAYMENT_REFUSED: the payment provider refused to "
            "take this event's payment at all (nothing charged, the place stays held), or OPTION_SOLD_OUT: "
            "an option the answers chose has none left (`fields` names the answer; the place stays held)",
            "headers": {"Retry-After": {"description": "While the same call is still being processed"}},
        },
        410: {"description": "HOLD_EXPIRED"},
        404: {"description": "HOLD_NOT_FOUND"},
        429: _BUSY,
    },
)
@tracer.capture_method
def register(holdId: str, body: Annotated[RegistrationRequest, Body()]) -> Response[RegistrationAccepted]:
    # No idempotency record: the same call repeated (a double click, a retry after a lost
    # response) is safe by the hold's state machine (registration.service's doc).
    return _accepted(registration_service().register(holdId, body))


def _accepted(result: RegistrationAccepted) -> Response[RegistrationAccepted]:
    """Paid (202, with when to check first) or the card step (200, with what the card form needs)."""
    status = 202 if result.status in ("QUEUED", "CONFIRMED") else 200
    if status == 200:  # what the site's card form needs: public configuration, not secrets
        result.publishableKey = settings.payments_publishable_key
        result.paymentsScript = settings.payments_script_url
    return Response(status, content_types.APPLICATION_JSON, result, headers=_queued_headers(result))


def _queued_headers(result: RegistrationAccepted) -> dict[str, str]:
    """A queued registration's answer says when the waiting screen should first check."""
    if result.status != "QUEUED":
        return NO_STORE
    return {**NO_STORE, "Retry-After": str(registration_service().first_wait())}


@app.post(
    "/api/holds/<holdId>/payment/confirm",
    summary="After the browser confirmed the hold's payment: register if it succeeded",
    description=(
        "The server asks the payment provider; the browser's word is never taken for it. "
        "Safe to repeat: one registration, whichever of this call and the provider's webhook comes first."
    ),
    tags=["Registration"],
    responses={
        202: {"description": "Paid and queued (or already confirmed)", "links": _OUTCOME_LINK, "headers": _FIRST_CHECK},
        402: {"description": "PAYMENT_DECLINED (or 3-D Secure failed); the place stays held: try another card"},
        404: {"description": "HOLD_NOT_FOUND"},
        409: {
            "description": "PAYMENT_PENDING (3-D Secure or the bank still deciding; see Retry-After), "
            "PAYMENT_NOT_STARTED (send the details first), or CONFLICT",
            "headers": {"Retry-After": {"description": "When PAYMENT_PENDING: when to ask again"}},
        },
        410: {"description": "HOLD_EXPIRED (the payment was cancelled with the hold)"},
        429: _BUSY,
    },
)
@tracer.capture_method
def confirm_payment(holdId: str) -> Response[RegistrationAccepted]:
    result = registration_service().confirm(holdId)
    return Response(202, content_types.APPLICATION_JSON, result, headers=_queued_headers(result))


@app.post(
    "/api/holds/<holdId>/payment",
    summary="The card step of a hold whose details were sent (a link opened on another device)",
    description="Answers with the hold's one PaymentIntent (`clientSecret`) without the runner's details; "
    "QUEUED or CONFIRMED (202) when it is already paid.",
    tags=["Registration"],
    responses={
        200: {"description": "Payment required: confirm it with `clientSecret`", "links": _CONFIRM_LINK},
        202: {"description": "Already paid", "links": _OUTCOME_LINK, "headers": _FIRST_CHECK},
        404: {"description": "HOLD_NOT_FOUND"},
        409: {"description": "PAYMENT_NOT_STARTED: the details were not sent yet"},
        410: {"description": "HOLD_EXPIRED"},
        429: _BUSY,
    },
)
@tracer.capture_method
def payment_step(holdId: str) -> Response[RegistrationAccepted]:
    result = registration_service().payment_step(holdId)
    return _accepted(result)


@app.post(
    WEBHOOK_PATH,
    summary="The payment provider's signed events (Stripe webhooks)",
    description=(
        "Verifies `Stripe-Signature` (HMAC-SHA256, timestamp within 5 minutes), applies each event once "
        "by the state it describes, and answers 2xx only once the effect is durable. Handles "
        "payment_intent.succeeded, payment_intent.payment_failed, charge.refunded, charge.dispute.created."
    ),
    tags=["Payments"],
    responses={
        200: {"description": "Applied (or a duplicate, or an event type Racecap does not use)"},
        400: {"description": "INVALID_SIGNATURE: missing, wrong or too old Stripe-Signature; nothing changed"},
        503: {
            "description": "NOT_YET: the registration the event is about is still being written; deliver again",
            "headers": {"Retry-After": {"description": "Seconds to wait"}},
        },
        429: _BUSY,
    },
)
@tracer.capture_method
def payment_webhook() -> Response[WebhookAnswer]:
    event = app.current_event
    payload = (event.body or "").encode("utf-8")
    signature = lower_headers(event.raw_event).get("stripe-signature")
    outcome = payment_events().receive(payload, signature)
    answer = WebhookAnswer(received=True, outcome=outcome)
    return Response(200, content_types.APPLICATION_JSON, answer, headers=NO_STORE)


@app.get(
    "/api/registrations/<registrationId>",
    summary="The outcome of a registration",
    description="While QUEUED, `Retry-After` is the time the writer still needs for it, from its real backlog: "
    "1 s when it is idle, never more than the paper's back-off (10, 20, 40, then 60 s), and that back-off once "
    "a registration is well past its estimate.",
    tags=["Registration"],
    responses={
        200: {
            "description": "The registration's state",
            "headers": {"Retry-After": {"description": "While QUEUED: seconds until it is likely confirmed (1-60)"}},
        },
        404: {"description": "REGISTRATION_NOT_FOUND"},
    },
)
@tracer.capture_method
def registration_status(registrationId: str) -> Response[RegistrationStatus]:
    status, retry = registration_service().status(registrationId)
    headers = {**NO_STORE, **({"Retry-After": str(retry)} if retry else {})}
    return Response(200, content_types.APPLICATION_JSON, status, headers=headers)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
