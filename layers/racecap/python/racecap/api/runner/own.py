"""A runner's own entry: "find my registration", and what the link in the email opens (see it,
cancel it under the race's refund policy). Every route but the first needs the link's token."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated, TypeVar

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from racecap.api.runner.common import PROVIDER_BUSY, client_of
from racecap.config import get_settings
from racecap.fairness.identity import OWN_REGISTRATION, REGISTRATION_HEADER, lower_headers
from racecap.http import NO_STORE
from racecap.ledger.models import DeferralAnswer, DeferralQuote, DeferralRequest, MyCancelRequest
from racecap.ledger.own_entry import CancelQuote, MyCancellation, MyRegistration
from racecap.ledger.wiring import deferrals, own_entry, switches, transfers
from racecap.observability import tracer
from racecap.registration.own_models import (
    DetailsEdit,
    EmailChangeConfirmation,
    EmailChanged,
    EmailChangeRequest,
    LinkAnswer,
    LinkRequest,
    SwitchAnswer,
    SwitchQuote,
    SwitchRequest,
    TransferAcceptance,
    TransferAnswer,
    TransferOfferView,
    TransferQuote,
    TransferToken,
)
from racecap.registration.wiring import details_edits, email_change, link_requests

router = Router()
_Paying = TypeVar("_Paying", TransferAnswer, SwitchAnswer)
caller = client_of(router)

LINK_SENT = (
    "If this address is registered for the race, a link to its registration is on its way to it. "
    "It can take a few minutes; check the spam folder too."
)
_LINK_ERRORS: dict[int, OpenAPIResponse] = {
    401: {"description": "INVALID_TOKEN (missing, altered or not a link), TOKEN_EXPIRED, or LINK_REVOKED"},
}


def _token() -> str | None:
    return lower_headers(router.current_event.raw_event).get(REGISTRATION_HEADER)


@router.post(
    "/api/races/<raceId>/registration-link",
    summary="Find my registration: the link to it, emailed to the registered address",
    description=(
        "Always answers 202 with the same words, whether or not the address is registered for the race (the "
        "same work is done either way): the link goes by email to the registered address only. Rate-limited "
        "per address, network and device (429 with Retry-After)."
    ),
    tags=["My registration"],
    responses={
        202: {"description": "Asked (a link is emailed if the address is registered)"},
        400: {"description": "VALIDATION_ERROR"},
        404: {"description": "RACE_NOT_FOUND"},
        429: {"description": "TOO_MANY_REQUESTS", "headers": {"Retry-After": {"description": "Seconds to wait"}}},
    },
)
@tracer.capture_method
def request_link(raceId: str, body: Annotated[LinkRequest, Body()]) -> Response[LinkAnswer]:
    client = caller()
    link_requests().request(raceId, body.email, client.address, client.device_id)
    return Response(202, content_types.APPLICATION_JSON, LinkAnswer(message=LINK_SENT), headers=NO_STORE)


@router.get(
    "/api/my/registration",
    summary="My registration: event, bib, status, payments and refunds, answers, and what I can still do",
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses=_LINK_ERRORS,
)
@tracer.capture_method
def my_registration() -> Response[MyRegistration]:
    return Response(200, content_types.APPLICATION_JSON, own_entry().view(_token()), headers=NO_STORE)


@router.patch(
    "/api/my/registration",
    summary="Correct my registration: name, date of birth, answers (until the organiser's edit cut-off)",
    description=(
        "Only the fields sent change. A date of birth is checked against the event's age rule on race day; answers "
        "against the event's questions as they stand. An option with limited stock changes only if the new one has "
        "stock left: the new unit is taken and the old one given back in one step."
    ),
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses={
        **_LINK_ERRORS,
        400: {"description": "VALIDATION_ERROR with fields (`dateOfBirth`, `answers.<questionId>`)"},
        403: {"description": "EDIT_NOT_ALLOWED: the organiser set no edit cut-off, or it has passed"},
        409: {"description": "OPTION_SOLD_OUT (`fields` names the answer; nothing changed), or CONFLICT"},
    },
)
@tracer.capture_method
def edit_my_registration(body: Annotated[DetailsEdit, Body()]) -> Response[MyRegistration]:
    token = _token()
    details_edits().edit(token, body)
    return Response(200, content_types.APPLICATION_JSON, own_entry().view(token), headers=NO_STORE)


@router.get(
    "/api/my/registration/cancellation",
    summary="What cancelling my registration now would refund, under the race's policy",
    description="The amount is `min(tier % x paid - fee, what is left)`, rounded down to the currency's unit; "
    "below the payment provider's minimum nothing is refunded, and `note` says so.",
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses=_LINK_ERRORS,
)
@tracer.capture_method
def my_cancel_quote() -> Response[CancelQuote]:
    return Response(200, content_types.APPLICATION_JSON, own_entry().quote(_token()), headers=NO_STORE)


@router.post(
    "/api/my/registration/cancellation",
    summary="Cancel my registration, refunded as the quote said",
    description=(
        "Send back the `amountCents` you were shown. Safe to repeat: one cancellation and one refund however many "
        "times it is sent; a repeat answers what the first did. A team member's refund goes to the card that "
        "paid (the captain's), and both are emailed."
    ),
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses={
        **_LINK_ERRORS,
        400: {"description": "VALIDATION_ERROR"},
        403: {"description": "CANCEL_NOT_ALLOWED: the race's policy does not let runners cancel (now)"},
        409: {"description": "QUOTE_CHANGED (nothing happened: see the new quote), or CONFLICT"},
        429: PROVIDER_BUSY,
    },
)
@tracer.capture_method
def cancel_my_registration(body: Annotated[MyCancelRequest, Body()]) -> Response[MyCancellation]:
    done = own_entry().cancel(_token(), body.amountCents)
    return Response(200, content_types.APPLICATION_JSON, done, headers=NO_STORE)


@router.post(
    "/api/my/registration/email",
    summary="Change my registration's email address: a link to confirm it goes to the new address first",
    description=(
        "Nothing changes until the new address's owner opens that link (within a day). The answer is the same "
        "whether or not the new address is registered for the race; confirming says so if it is."
    ),
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses={
        **_LINK_ERRORS,
        202: {"description": "The link is on its way to the new address"},
        400: {"description": "VALIDATION_ERROR"},
        409: {"description": "SAME_EMAIL (the registration's address already), or CONFLICT (cancelled)"},
        429: {"description": "TOO_MANY_REQUESTS", "headers": {"Retry-After": {"description": "Seconds to wait"}}},
    },
)
@tracer.capture_method
def change_my_email(body: Annotated[EmailChangeRequest, Body()]) -> Response[LinkAnswer]:
    email_change().request(_token(), body.email)
    answer = LinkAnswer(message="A link to confirm the new address is on its way to it; open it within a day.")
    return Response(202, content_types.APPLICATION_JSON, answer, headers=NO_STORE)


@router.post(
    "/api/my/registration/email/confirm",
    summary="Confirm a new address from the link sent to it: the registration moves to it",
    description=(
        "The race's email claim and the registration's address move in one step (one registration per email per "
        "race throughout); every earlier link to the registration stops working, and the answer carries the new "
        "one's token. Safe to repeat."
    ),
    tags=["My registration"],
    responses={
        400: {"description": "VALIDATION_ERROR"},
        401: {"description": "INVALID_TOKEN, TOKEN_EXPIRED, or LINK_REVOKED (the address changed since)"},
        409: {"description": "EMAIL_ALREADY_REGISTERED (the new address has a registration in this race), CONFLICT"},
    },
)
@tracer.capture_method
def confirm_my_email(body: Annotated[EmailChangeConfirmation, Body()]) -> Response[EmailChanged]:
    return Response(200, content_types.APPLICATION_JSON, email_change().confirm(body.token), headers=NO_STORE)


# -- handing the place to someone else (issue 41) ---------------------------------------------------
_OFFER_ERRORS: dict[int, OpenAPIResponse] = {
    400: {"description": "VALIDATION_ERROR"},
    401: {"description": "INVALID_TOKEN or TOKEN_EXPIRED (the offer's link)"},
    403: {"description": "TRANSFER_NOT_ALLOWED: the organiser's cut-off passed, or transfers are off"},
    409: {"description": "OFFER_GONE (withdrawn, replaced, taken, or the registration cancelled)"},
}


@router.get(
    "/api/my/registration/transfer",
    summary="Handing my place to someone else: allowed until when, the fee the new runner pays, any pending offer",
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses=_LINK_ERRORS,
)
@tracer.capture_method
def my_transfer_quote() -> Response[TransferQuote]:
    return Response(200, content_types.APPLICATION_JSON, transfers().quote(_token()), headers=NO_STORE)


@router.post(
    "/api/my/registration/transfer",
    summary="Offer my place to someone else: a link to accept it goes to their address",
    description=(
        "Nothing moves until they accept (and pay the organiser's transfer fee, if any): the place stays yours and "
        "you may withdraw the offer. A new offer replaces the pending one; only the newest link works."
    ),
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses={
        **_LINK_ERRORS,
        202: {"description": "The link is on its way to the new runner"},
        400: {"description": "VALIDATION_ERROR"},
        403: {"description": "TRANSFER_NOT_ALLOWED: transfers are off or the cut-off passed"},
        409: {"description": "CONFLICT (your own address, or the registration changed)"},
        429: {"description": "TOO_MANY_REQUESTS", "headers": {"Retry-After": {"description": "Seconds to wait"}}},
    },
)
@tracer.capture_method
def offer_my_place(body: Annotated[LinkRequest, Body()]) -> Response[LinkAnswer]:
    transfers().offer(_token(), body.email)
    answer = LinkAnswer(message="A link to take your place over is on its way to them; the place is yours until then.")
    return Response(202, content_types.APPLICATION_JSON, answer, headers=NO_STORE)


@router.delete(
    "/api/my/registration/transfer",
    summary="Withdraw my pending offer (its link stops working)",
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses={**_LINK_ERRORS, 409: {"description": "CONFLICT (the registration changed meanwhile)"}},
)
@tracer.capture_method
def withdraw_my_offer() -> Response[TransferQuote]:
    token = _token()
    transfers().withdraw(token)
    return Response(200, content_types.APPLICATION_JSON, transfers().quote(token), headers=NO_STORE)


@router.post(
    "/api/transfers/offer",
    summary="A place offered to me: the race, the event, the fee, until when",
    tags=["Transfers"],
    responses=_OFFER_ERRORS,
)
@tracer.capture_method
def transfer_offer(body: Annotated[TransferToken, Body()]) -> Response[TransferOfferView]:
    return Response(200, content_types.APPLICATION_JSON, transfers().view(body.token), headers=NO_STORE)


@router.post(
    "/api/transfers/accept",
    summary="Take over the place offered to me: my details, the event's questions and waiver, and the fee",
    description=(
        "Checked as a registration is (the event's age rule on race day, its questions as they stand, its waiver). "
        "With no fee the place is yours at once (TRANSFERRED, with the link token to your registration); with one, "
        "pay it with `clientSecret` (or send `paymentMethod` to confirm it here), then call /api/transfers/confirm. "
        "Safe to repeat."
    ),
    tags=["Transfers"],
    responses={
        **_OFFER_ERRORS,
        402: {"description": "PAYMENT_DECLINED: try another card"},
        409: {"description": "OFFER_GONE, EMAIL_ALREADY_REGISTERED (your address has a registration in the race), "
              "OPTION_SOLD_OUT (`fields` names the answer)"},
        429: PROVIDER_BUSY,
    },
)  # fmt: skip
@tracer.capture_method
def accept_transfer(body: Annotated[TransferAcceptance, Body()]) -> Response[TransferAnswer]:
    return Response(200, content_types.APPLICATION_JSON, _with_keys(transfers().accept(body)), headers=NO_STORE)


@router.post(
    "/api/transfers/confirm",
    summary="After paying the transfer fee in the browser: the place moves once the payment succeeded",
    tags=["Transfers"],
    responses={**_OFFER_ERRORS, 429: PROVIDER_BUSY},
)
@tracer.capture_method
def confirm_transfer(body: Annotated[TransferToken, Body()]) -> Response[TransferAnswer]:
    return Response(200, content_types.APPLICATION_JSON, _with_keys(transfers().confirm(body.token)), headers=NO_STORE)


# -- switching to another event of the race (issue 41) --------------------------------------------
_SWITCH_ERRORS: dict[int, OpenAPIResponse] = {
    **_LINK_ERRORS,
    403: {
        "description": "SWITCH_NOT_ALLOWED: switches are off, the cut-off passed, a team member's (the captain "
        "switches the whole team), a refunded one"
    },
}


@router.get(
    "/api/my/registration/switch",
    summary="Switching to another event: which events, what each would cost or refund now, until when",
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses=_SWITCH_ERRORS,
)
@tracer.capture_method
def my_switch_quote() -> Response[SwitchQuote]:
    return Response(200, content_types.APPLICATION_JSON, switches().quote(_token()), headers=NO_STORE)


@router.post(
    "/api/my/registration/switch",
    summary="Switch to another event: its place is held, any difference paid, then I am moved (new bib)",
    description=(
        "The target's place is held first (409 SOLD_OUT: nothing changed). Its questions and waiver are answered "
        "again. Dearer: pay the difference with `clientSecret` (or send `paymentMethod` to confirm it here), then "
        "call /api/my/registration/switch/confirm; the place stays held meanwhile. Cheaper: the difference is "
        "refunded to the card that paid. A difference under the provider's minimum charge is neither. Safe to "
        "repeat: a second call resumes the same switch. A team's captain switches the whole team (its places held "
        "together, each member's answers in `members`, the difference the team's); a team whose move would exceed "
        "one transaction is refused before anything is held."
    ),
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses={
        **_SWITCH_ERRORS,
        400: {"description": "VALIDATION_ERROR (`fields` names the answer, or `eventId`)"},
        402: {"description": "PAYMENT_DECLINED: try another card (your registration is unchanged)"},
        409: {
            "description": "SOLD_OUT (or its waitlist goes first), NOT_ENOUGH_PLACES (a team's), SWITCH_GONE, "
            "OPTION_SOLD_OUT, TEAM_SWITCH_TOO_LARGE"
        },
        429: PROVIDER_BUSY,
    },
)
@tracer.capture_method
def switch_my_event(body: Annotated[SwitchRequest, Body()]) -> Response[SwitchAnswer]:
    answer = switches().switch(_token(), body)
    return Response(200, content_types.APPLICATION_JSON, _with_keys(answer), headers=NO_STORE)


@router.post(
    "/api/my/registration/switch/confirm",
    summary="After paying the difference in the browser: I am moved once the payment succeeded",
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses={**_SWITCH_ERRORS, 409: {"description": "SWITCH_GONE, CONFLICT"}, 429: PROVIDER_BUSY},
)
@tracer.capture_method
def confirm_my_switch() -> Response[SwitchAnswer]:
    return Response(200, content_types.APPLICATION_JSON, _with_keys(switches().confirm(_token())), headers=NO_STORE)


@router.delete(
    "/api/my/registration/switch",
    summary="Give up a switch begun and not paid: the held place goes back",
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses=_SWITCH_ERRORS,
)
@tracer.capture_method
def give_up_my_switch() -> Response[SwitchQuote]:
    token = _token()
    switches().give_up(token)
    return Response(200, content_types.APPLICATION_JSON, switches().quote(token), headers=NO_STORE)


# -- deferring to the race's next edition (issue 41) -----------------------------------------------
@router.get(
    "/api/my/registration/deferral",
    summary="Deferring my place to next year: allowed until when, the next edition, my credit there",
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses=_LINK_ERRORS,
)
@tracer.capture_method
def my_deferral_quote() -> Response[DeferralQuote]:
    return Response(200, content_types.APPLICATION_JSON, deferrals().quote(_token()), headers=NO_STORE)


@router.post(
    "/api/my/registration/deferral",
    summary="Defer my place: cancelled here with no refund, my credit a personal code for the next edition",
    description=(
        "Send the quote's `creditCents` (409 QUOTE_CHANGED if it moved). The code is for this registration's "
        "address only, applied at the next edition's card step as any code is; it is also emailed. Safe to repeat."
    ),
    tags=["My registration"],
    security=OWN_REGISTRATION,
    responses={
        **_LINK_ERRORS,
        400: {"description": "VALIDATION_ERROR"},
        403: {"description": "DEFERRAL_NOT_ALLOWED: deferrals are off, the cut-off passed, no next edition yet"},
        409: {"description": "QUOTE_CHANGED (the credit moved), CONFLICT"},
        429: PROVIDER_BUSY,
    },
)
@tracer.capture_method
def defer_my_place(body: Annotated[DeferralRequest, Body()]) -> Response[DeferralAnswer]:
    answer = deferrals().defer(_token(), body.creditCents)
    return Response(200, content_types.APPLICATION_JSON, answer, headers=NO_STORE)


def _with_keys(answer: _Paying) -> _Paying:
    if answer.clientSecret:  # what the browser's card form needs, as a registration's answer carries
        settings = get_settings()
        answer.publishableKey = settings.payments_publishable_key
        answer.paymentsScript = settings.payments_script_url
    return answer
