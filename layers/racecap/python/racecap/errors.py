"""Domain exceptions: what can go wrong, in the runner's and director's words.

Each carries the contract's error code and HTTP status, so the mapping to HTTP lives in
exactly one place (``racecap.http``). Exception *class names* are also the contract with
Step Functions (ASL ``ErrorEquals``), so don't rename them lightly.
"""

from __future__ import annotations


class DomainError(Exception):
    code = "ERROR"
    status = 400

    def __init__(self, message: str, *, fields: dict[str, str] | None = None, retry_after: int | None = None):
        super().__init__(message)
        self.message = message
        self.fields = fields
        self.retry_after = retry_after


class ValidationFailed(DomainError):
    code, status = "VALIDATION_ERROR", 400


class FieldErrors(ValueError):
    """A model validator's check across fields that names each field it faults (pydantic places
    a model's own error at no field): the 400's ``fields`` carry these names instead of "body",
    so a form shows each error beside its control."""

    def __init__(self, message: str, fields: dict[str, str]) -> None:
        super().__init__(message)
        self.fields = fields


class NotFound(DomainError):
    code, status = "NOT_FOUND", 404


class RaceNotFound(NotFound):
    code = "RACE_NOT_FOUND"


class EventNotFound(NotFound):
    code = "EVENT_NOT_FOUND"


class HoldNotFound(NotFound):
    code = "HOLD_NOT_FOUND"


class RegistrationNotFound(NotFound):
    code = "REGISTRATION_NOT_FOUND"


class SoldOut(DomainError):
    code, status = "SOLD_OUT", 409


class NotEnoughPlaces(DomainError):
    """Fewer places are left than a team needs; nothing was taken (the event is not sold out)."""

    code, status = "NOT_ENOUGH_PLACES", 409

    def __init__(self, message: str, *, left: int) -> None:
        super().__init__(message)
        self.left = left


class RegistrationClosed(DomainError):
    code, status = "REGISTRATION_CLOSED", 409


class EmailAlreadyRegistered(DomainError):
    code, status = "EMAIL_ALREADY_REGISTERED", 409


class HoldExpired(DomainError):
    code, status = "HOLD_EXPIRED", 410


class PaymentDeclined(DomainError):
    code, status = "PAYMENT_DECLINED", 402


class PaymentRefused(DomainError):
    """The payment provider refused to create the payment at all (not a card's decline): the
    runner cannot fix it by retrying or with another card; the organiser must."""

    code, status = "PAYMENT_REFUSED", 409


class Conflict(DomainError):
    code, status = "CONFLICT", 409


class OptionSoldOut(Conflict):
    """An option with stock (a T-shirt size) the runner chose has none left; nothing was taken."""

    code = "OPTION_SOLD_OUT"


class PaymentPending(DomainError):
    """The payment is not decided yet (3-D Secure, a bank still processing): ask again."""

    code, status = "PAYMENT_PENDING", 409


class PaymentNotStarted(DomainError):
    code, status = "PAYMENT_NOT_STARTED", 409


class InvalidSignature(DomainError):
    code, status = "INVALID_SIGNATURE", 400


class Busy(DomainError):
    """Back-pressure: the runner should retry after ``retry_after`` seconds."""

    code, status = "TOO_MANY_REQUESTS", 429


class TooManyHolds(DomainError):
    """One client (device, admission or address) already holds its limit of a race's places."""

    code, status = "TOO_MANY_HOLDS", 429


class Unauthorized(DomainError):
    code, status = "UNAUTHORIZED", 401


class Forbidden(DomainError):
    code, status = "FORBIDDEN", 403


class CapBelowTaken(Conflict):
    code = "CAP_BELOW_TAKEN"


class RaceIncomplete(Conflict):
    """Publishing a race that runners could not yet register for: ``fields`` says what is missing."""

    code = "RACE_INCOMPLETE"


class TooManyEvents(Conflict):
    """The race already has the most events one race may have: the request was valid, the
    race's state refuses it (a schema cannot say how many events a race has)."""

    code = "TOO_MANY_EVENTS"


class RefundFailed(DomainError):
    """The payment provider refused the refund; nothing changed on our side."""

    code, status = "REFUND_FAILED", 502


class CodeError(DomainError):
    """A discount code a runner cannot use (racecap.codes); the subclass's code says why."""

    code, status = "CODE_INVALID", 400


class CodeUnknown(CodeError):
    code, status = "CODE_UNKNOWN", 404


class CodeKept(CodeError):
    """A guaranteed entry's place keeps its guaranteed-entry code (only another one replaces it)."""

    code, status = "CODE_REQUIRED", 409


class CodeNotYetValid(CodeError):
    code, status = "CODE_NOT_YET_VALID", 409


class CodeExpired(CodeError):
    code, status = "CODE_EXPIRED", 409


class CodeUsedUp(CodeError):
    code, status = "CODE_USED_UP", 409


class CodeNotForEvent(CodeError):
    code, status = "CODE_NOT_FOR_EVENT", 409


class CodeTooLate(CodeError):
    code, status = "CODE_TOO_LATE", 409


class CodeTaken(Conflict):
    code = "CODE_EXISTS"


class WaitlistClosed(DomainError):
    """The event takes no joins on its waitlist: the director has not switched it on (or has
    switched it off), or registration is not open."""

    code, status = "WAITLIST_CLOSED", 409


class WaitlistFull(DomainError):
    """The director's cap on the waitlist's length is reached; nothing was written."""

    code, status = "WAITLIST_FULL", 409


class NotSoldOut(DomainError):
    """Places are still on sale: hold one instead of joining the waitlist."""

    code, status = "NOT_SOLD_OUT", 409


class OfferExpired(DomainError):
    """A waitlist offer claimed after its window: the place went to the next runner in line."""

    code, status = "OFFER_EXPIRED", 410


class OfferGone(DomainError):
    """A waitlist offer that was declined, passed on or closed: nothing to claim."""

    code, status = "OFFER_GONE", 410


class WaitlistEntryNotFound(NotFound):
    code = "WAITLIST_ENTRY_NOT_FOUND"


class BallotClosed(Conflict):
    """The event's ballot takes no applications (or confirmations, or withdrawals) now: it has
    none, its window has not opened, or it has closed."""

    code = "BALLOT_CLOSED"


class BallotStarted(Conflict):
    """The ballot's window opened: its settings are what applicants were told, fixed."""

    code = "BALLOT_STARTED"


class BallotApplied(Conflict):
    """A group's address has an application in this race's ballot already (one per address)."""

    code = "BALLOT_ALREADY_APPLIED"


class BallotOnly(Conflict):
    """The event's places are drawn from a ballot's applications: none is held first-come."""

    code = "BALLOT_ONLY"


class KeptPlacesNotOpen(Conflict):
    """A guaranteed entry on a ballot event before its draw: until the draw has moved the winners'
    places, every place but the kept ones may still be drawn."""

    code = "KEPT_PLACES_NOT_OPEN"


class BallotNotDrawn(NotFound):
    """No draw published for this event: it has no ballot, or its draw has not run yet."""

    code = "BALLOT_NOT_DRAWN"


class BallotApplicationNotFound(NotFound):
    code = "BALLOT_APPLICATION_NOT_FOUND"


class SeedRefused(Conflict):
    """A ballot's revealed seed whose SHA-256 is not the commitment published before the window
    opened: drawing with it would be a draw nobody could hold the race to, so nothing is drawn."""

    code = "SEED_REFUSED"
