"""The payment provider's webhook (exempt from the per-address rate limit)."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router

from racecap.api.runner.common import PROVIDER_BUSY
from racecap.fairness.identity import lower_headers
from racecap.http import NO_STORE
from racecap.ledger.wiring import payment_events
from racecap.observability import tracer
from racecap.payments.models import WebhookAnswer

router = Router()

WEBHOOK_PATH = "/api/payments/webhook"


@router.post(
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
        429: PROVIDER_BUSY,
    },
)
@tracer.capture_method
def payment_webhook() -> Response[WebhookAnswer]:
    event = router.current_event
    payload = (event.body or "").encode("utf-8")
    signature = lower_headers(event.raw_event).get("stripe-signature")
    outcome = payment_events().receive(payload, signature)
    answer = WebhookAnswer(received=True, outcome=outcome)
    return Response(200, content_types.APPLICATION_JSON, answer, headers=NO_STORE)
