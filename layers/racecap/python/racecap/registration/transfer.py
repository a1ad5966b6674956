"""A runner hands their place to someone else (issue 41: transfer).

1. **Offered** from the registration's link (``registration.links``), before the race's
   ``refundPolicy.transfersUntil``: the registration records the pending offer (its number,
   the new address, when) and a link goes *to the new address* (a ``trf`` token naming the
   registration and the offer's number; it lives until the cut-off, at most a week). Nothing
   else changes: the place is still the first runner's, who may withdraw the offer or make
   another (each one replaces the last: only the newest link works).
2. **Accepted** by the new runner from that link: their name, date of birth (the event's age
   rule on race day), the event's questions as they stand now and its waiver, as a registration
   asks them. With no transfer fee the place moves at once; with one, the fee is a payment of
   its own (purpose ``transfer_fee``, one PaymentIntent per offer) and the place moves once it
   has succeeded: on the accept call (a card confirmed on the server), the confirm call after
   the browser's payment, or the provider's webhook, whichever comes first.
3. **Moved** in one transaction or not at all: the race's email claim (the new address claimed
   only if free, the old one deleted only if it is this registration's: one registration per
   email per race throughout), the registration's runner *replaced* (the old runner's name,
   date of birth, answers and waiver are not kept, on the registration nor on the hold's
   record of the attempt), its links revoked, options with stock swapped as an edit swaps them
   (``registration.edits``), the offer consumed, the trail's entry (the runner as actor, no
   address). The bib and the entry payment stay: a later refund of the entry goes to the card
   that paid it, the fee's to the new runner's.

A transfer raced against a cancellation (or a second acceptance): the move is conditional on
the registration still being confirmed with this offer pending, so exactly one wins. A fee
paid for a transfer that lost is refunded from the ledger (keyed on the offer: once).
The new runner gets a confirmation of their own (``transfer-confirmed``, keyed on the
registration and link version: the audit counts it apart from the first confirmation); the
first runner a notice (``transferred-away``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol

from racecap.audit.service import AuditTrail
from racecap.aws.queues import MessageQueue
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.emails.models import EmailMessage
from racecap.errors import Busy, Conflict, EmailAlreadyRegistered, Forbidden, PaymentDeclined, PaymentRefused
from racecap.fairness.tokens import InvalidToken, Signer
from racecap.holds.models import Hold
from racecap.models import Actor, normalize_email
from racecap.money import in_units
from racecap.observability import logger
from racecap.payments.calls import confirm_on_server, provider_call, waiting
from racecap.payments.port import (
    IntentStatus,
    NewIntent,
    PaymentIntent,
    PaymentProvider,
    PaymentRejected,
)
from racecap.questions.models import StockedChoice, StoredAnswers, WaiverAcceptance
from racecap.races.catalog import RaceDefinitions
from racecap.races.models import Event, Race
from racecap.races.rules import age_on, check_age, today_in
from racecap.registration.edits import MAX_TRIES, plan_stock
from racecap.registration.links import Buckets, RegistrationLinks
from racecap.registration.models import Registration, RegistrationPhase, RunnerDetails
from racecap.registration.own_models import TransferAcceptance, TransferAnswer, TransferOfferView, TransferQuote
from racecap.registration.status import StatusSnapshots

OFFER_KIND = "transfer-offer"  # the email to the new address, with the link to accept
CONFIRMED_KIND = "transfer-confirmed"  # the new runner's confirmation (a kind and key of its own)
AWAY_KIND = "transferred-away"  # the notice to the first runner
PURPOSE = "transfer_fee"
# An offer's link lives until the cut-off's end, and at most this long.
OFFER_DAYS = 7
# Each registration may offer this many times at once, then once a minute: a link holder
# cannot use Racecap to mail arbitrary addresses.
OFFER_BURST = 3


class TransferNotAllowed(Forbidden):
    code = "TRANSFER_NOT_ALLOWED"


class OfferGone(Conflict):
    """The link names an offer withdrawn, replaced, or already taken."""

    code = "OFFER_GONE"


class TransferRegistrations(Protocol):
    def get(self, registration_id: str, consistent: bool = True) -> Registration | None: ...

    def set_transfer_offer(
        self, reg: Registration, offer: dict[str, Any] | None, *, made: int | None = None, expect: int | None = None
    ) -> None: ...

    def transfer_items(self, reg: Registration, n: int, person: dict[str, Any], now: str) -> list[TransactItem]: ...


class TransferAnswers(Protocol):
    def check(self, race_id: str, event_id: str, answers: Any) -> StoredAnswers | None: ...

    def stocked(self, race_id: str, event_id: str, answered: StoredAnswers) -> list[StockedChoice]: ...

    def accept_waiver(
        self, race_id: str, event_id: str, version: int | None, given: WaiverAcceptance | None, age: int, now: datetime
    ) -> str | None: ...


class TransferHolds(Protocol):
    def get(self, hold_id: str) -> Hold | None: ...


class FeeRefunds(Protocol):
    """The ledger's refund of a fee whose transfer lost (``Ledger.refund_lost_fee``)."""

    def refund_lost_fee(self, reg: Registration, intent: PaymentIntent, key: str) -> None: ...


def mask(email: str) -> str:
    name, _, domain = email.partition("@")
    return f"{name[:1]}***@{domain}"


def offer_number(reg: Registration) -> int | None:
    offer = reg.transferOffer or {}
    n = offer.get("n")
    return int(n) if isinstance(n, int | float) else None


class Transfers:
    def __init__(
        self,
        links: RegistrationLinks,
        signer: Callable[[], Signer],
        registrations: TransferRegistrations,
        holds: TransferHolds,
        catalog: RaceDefinitions,
        answers: TransferAnswers | None,
        payments: PaymentProvider,
        emails: MessageQueue,
        buckets: Buckets,
        audit: AuditTrail,
        transact: Callable[[list[TransactItem]], None],
        inventory_table: str,
        statuses: StatusSnapshots | None = None,
        fees: FeeRefunds | None = None,
        record: Callable[[PaymentIntent], str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._links = links
        self._signer = signer
        self._regs = registrations
        self._holds = holds
        self._catalog = catalog
        self._answers = answers
        self._payments = payments
        self._emails = emails
        self._buckets = buckets
        self._audit = audit
        self._transact = transact
        self._inv = inventory_table
        self._statuses = statuses
        self._fees = fees
        self._record = record  # Ledger.record_payment: the fee in the registration's ledger
        self._clock = clock

    # -- the first runner, from their link -----------------------------------------------------
    def quote(self, link_token: str | None) -> TransferQuote:
        reg = self._own(link_token)
        race, _ = self._race_event(reg)
        why = self._why_not(reg, race)
        policy = race.refundPolicy
        offer = reg.transferOffer or {}
        cents = self._fee(reg, race)
        fee = (
            f"The new runner pays a {in_units(cents, reg.currency)} {reg.currency.upper()} transfer fee. "
            if cents
            else "There is no transfer fee. "
        )
        note = why or (
            f"{fee}They accept from a link sent to them; until then the place is yours and you may withdraw the offer. "
            "Once they accept, your registration (and its bib) is theirs, and your link stops working."
        )
        return TransferQuote(
            allowed=why is None,
            until=policy.transfersUntil,
            feeCents=cents,
            currency=reg.currency,
            refundable=policy.transferredRefundable,
            pendingTo=mask(str(offer["to"])) if offer.get("to") else None,
            pendingSince=str(offer["at"]) if offer.get("at") else None,
            note=note,
        )

    def offer(self, link_token: str | None, new_email: str) -> None:
        reg = self._own(link_token)
        email = normalize_email(new_email)
        race, event = self._race_event(reg)
        why = self._why_not(reg, race)
        if why is not None:
            raise TransferNotAllowed(why)
        if email == reg.email:
            raise Conflict("That is this registration's own address: name the runner taking the place over.")
        wait = self._buckets.take(f"trf:{reg.registrationId}").retry_after_s
        if wait:
            raise Busy("You offered the place a moment ago; ask again later.", retry_after=wait)
        n = (reg.offersMade or 0) + 1
        now = datetime.now(UTC)
        try:
            self._regs.set_transfer_offer(reg, {"n": n, "to": email, "at": now.isoformat()}, made=n)
        except ConditionFailed as exc:
            raise Conflict("Your registration changed meanwhile; reload it and try again.") from exc
        until = race.refundPolicy.transfersUntil or race.raceDate
        end = datetime.combine(date.fromisoformat(until) + timedelta(days=1), datetime.min.time(), UTC)
        expires = min(end.timestamp() + 86400, self._clock() + OFFER_DAYS * 86400)  # the zone's day may end later
        token = self._signer().sign("trf", {"r": reg.registrationId, "n": n, "exp": int(expires)})
        self._emails.send(
            EmailMessage(
                kind=OFFER_KIND,
                dedupKey=f"{OFFER_KIND}:{reg.registrationId}:{n}",
                to=email,
                data={
                    "fromFirstName": reg.firstName,
                    "raceName": reg.raceName,
                    "eventName": event.name,
                    "raceDate": reg.raceDate,
                    "registrationId": reg.registrationId,
                    "feeCents": self._fee(reg, race),
                    "currency": reg.currency,
                    "until": until,
                    "acceptUrl": self._links.transfer_url(token),
                },
            )
        )
        self._audit_only(reg, "registration.transfer.offered", offer=n)

    def withdraw(self, link_token: str | None) -> None:
        reg = self._own(link_token)
        if not reg.transferOffer:
            return  # nothing pending: the same answer as a withdrawal (a second click)
        try:
            self._regs.set_transfer_offer(reg, None)
        except ConditionFailed as exc:
            raise Conflict("Your registration changed meanwhile; reload it and try again.") from exc
        intent_id = (reg.transferOffer or {}).get("intentId")
        if intent_id:
            # The new runner had begun paying the fee: their intent is cancelled so it cannot be
            # paid now; if it was paid meanwhile, the provider's word refunds it (``fee_paid``).
            try:
                self._payments.cancel_intent(str(intent_id), idempotency_key=f"cancel-{intent_id}")
            except Exception as exc:  # paid, processing or unreachable: fee_paid settles it
                logger.info("a withdrawn offer's fee intent was not cancelled", extra={"error": str(exc)})
        self._audit_only(reg, "registration.transfer.withdrawn", offer=offer_number(reg))

    # -- the new runner, from the offer's link -----------------------------------------------
    def view(self, offer_token: str) -> TransferOfferView:
        reg, _ = self._offered(offer_token)
        race, event = self._race_event(reg)
        why = self._why_not(reg, race)
        if why is not None:
            raise TransferNotAllowed(why)
        policy = race.refundPolicy
        fee = self._fee(reg, race)
        note = (
            f"You pay a {in_units(fee, reg.currency)} {reg.currency.upper()} transfer fee to take this place over."
            if fee
            else "Taking this place over costs nothing."
        )
        return TransferOfferView(
            raceId=reg.raceId,
            raceName=reg.raceName,
            raceDate=reg.raceDate,
            eventId=reg.eventId,
            eventName=event.name,
            email=str((reg.transferOffer or {}).get("to", "")),
            fromFirstName=reg.firstName,
            feeCents=fee,
            currency=reg.currency,
            until=policy.transfersUntil or race.raceDate,
            refundable=policy.transferredRefundable,
            note=note,
        )

    def accept(self, body: TransferAcceptance) -> TransferAnswer:
        reg, n = self._read(body.token)
        done = self._done_for(reg, n)
        if done is not None:
            return done  # a second click, a retry: the place moved already
        self._pending(reg, n)
        offer = dict(reg.transferOffer or {})
        race, event = self._race_event(reg)
        why = self._why_not(reg, race)
        if why is not None:
            raise TransferNotAllowed(why)
        email = str(offer.get("to", ""))
        details = RunnerDetails.model_validate(
            {"email": email, "firstName": body.firstName, "lastName": body.lastName,
             "dateOfBirth": body.dateOfBirth.isoformat(), "answers": body.answers,
             "waiver": body.waiver.model_dump(mode="json") if body.waiver else None}
        )  # fmt: skip
        person = self._person(reg, race, event, details)
        fee = self._fee(reg, race)
        if fee == 0:
            moved = self._move(reg, n, person)
            return self._transferred(moved, "The place is yours: a confirmation is on its way to you.")
        intent = self._fee_intent(reg, n, offer, person, fee)
        if body.paymentMethod and intent.status in (IntentStatus.REQUIRES_PAYMENT_METHOD,
                                                    IntentStatus.REQUIRES_CONFIRMATION):  # fmt: skip
            intent = self._confirm_fee(reg, intent, body.paymentMethod)
        return self._after_payment(reg.registrationId, n, intent, report_decline=bool(body.paymentMethod))

    def confirm(self, offer_token: str) -> TransferAnswer:
        """After the browser paid the fee: the place moves if the payment succeeded."""
        reg, n = self._read(offer_token)
        rid = reg.registrationId
        if (reg.transferOffer or {}).get("n") != n:
            done = self._done_for(reg, n)
            if done is not None:
                return done
            raise OfferGone("This offer was withdrawn or replaced; ask the runner for a new link.")
        intent_id = (reg.transferOffer or {}).get("intentId")
        if not intent_id:
            raise Conflict("Nothing to confirm yet: send your details first.")
        intent = provider_call(lambda: self._payments.retrieve_intent(str(intent_id)), reg.holdId)
        return self._after_payment(rid, n, intent, report_decline=False)

    def fee_paid(self, intent: PaymentIntent) -> str:
        """The provider's word that a transfer fee succeeded (webhook, reconciliation): the place
        moves if the offer still stands, else the fee is refunded. "moved", "already", "refunded"."""
        rid = intent.metadata.get("registrationId", "")
        n_text = intent.metadata.get("transfer", "")
        reg = self._regs.get(rid) if rid else None
        if reg is None or not n_text.isdigit():
            return "orphan"  # money for no registration of ours: the caller refunds it
        n = int(n_text)
        if self._record is not None:
            recorded = self._record(intent)  # in the ledger first: a refund of it has a payment to go back to
            if recorded == "orphan":
                return "orphan"
        if self._done_for(reg, n) is not None:
            return "already"
        offer = reg.transferOffer or {}
        if offer.get("n") == n and offer.get("intentId") == intent.id and reg.status == RegistrationPhase.CONFIRMED:
            try:
                self._move(reg, n, dict(offer["person"]))
                return "moved"
            except (Conflict, EmailAlreadyRegistered):
                pass  # lost (cancelled, replaced, the address registered meanwhile): the fee goes back
        again = self._regs.get(rid) or reg
        if self._done_for(again, n) is not None:
            return "already"
        self._refund_fee(again, intent, n)
        return "refunded"

    # -- the steps -------------------------------------------------------------------------------
    def _person(self, reg: Registration, race: Race, event: Event, details: RunnerDetails) -> dict[str, Any]:
        """The new runner as the registration will keep them, checked as a registration checks."""
        check_age(race, event, details.dateOfBirth)
        person: dict[str, Any] = {
            "email": details.email,
            "firstName": details.firstName,
            "lastName": details.lastName,
            "dateOfBirth": details.dateOfBirth.isoformat(),
        }
        if self._answers is None:
            return person
        stored = self._answers.check(reg.raceId, reg.eventId, details.answers)
        if stored is not None:
            person["answers"], person["questionsVersion"] = stored.to_json(), stored.questionsVersion
        age = age_on(details.dateOfBirth, date.fromisoformat(race.raceDate))
        version = stored.questionsVersion if stored else None
        waiver = self._answers.accept_waiver(reg.raceId, reg.eventId, version, details.waiver, age, datetime.now(UTC))
        if waiver is not None:
            person["waiver"] = waiver
        return person

    def _move(self, reg: Registration, n: int, person: dict[str, Any]) -> Registration:
        stored = StoredAnswers.of(person.get("answers"), person.get("questionsVersion"))
        chosen = self._answers.stocked(reg.raceId, reg.eventId, stored) if self._answers and stored else []
        hold = self._holds.get(reg.holdId)
        if hold is None or hold.attempt is None:
            raise Conflict("This registration's payment record is gone; contact the organiser.")
        now = datetime.now(UTC).isoformat()
        full: set[str] = set()
        for _ in range(MAX_TRIES):
            plan = plan_stock(self._inv, hold, reg, chosen, full, person=_attempt_person(person))
            audit = self._audit.item(
                Actor.runner(reg.registrationId), reg.raceId, "registration.transferred", reg.registrationId,
                eventId=reg.eventId, bib=reg.bib, offer=n, transfers=(reg.transfers or 0) + 1,
            )  # fmt: skip
            move_items = self._regs.transfer_items(reg, n, person, now)
            items = [*move_items, audit, *plan.stock, *plan.record]
            try:
                self._transact(items)
                break
            except ConditionFailed as exc:
                first = len(move_items) + 1  # the units taken follow the move's items and the trail's
                full_at = [i - first for i in exc.indexes if first <= i < first + len(plan.taken)]
                if full_at:
                    full.add(plan.taken[full_at[0]])
                    continue
                return self._lost(reg, n, exc)
        else:
            raise Conflict("The options kept filling up while we moved the place; please try again.")
        if self._statuses is not None:
            self._statuses.forget(reg.registrationId)  # the waiting screen's snapshot names the runner
        moved = self._regs.get(reg.registrationId) or reg
        self._tell(reg, moved)
        return moved

    def _lost(self, reg: Registration, n: int, exc: ConditionFailed) -> Registration:
        again = self._regs.get(reg.registrationId)
        if again is not None and self._done_for(again, n) is not None:
            return again  # a concurrent acceptance of the same offer did it
        if 0 in exc.indexes:
            raise EmailAlreadyRegistered(
                "This address is registered for the race already: a runner has one registration per race."
            ) from exc
        if again is not None and again.status != RegistrationPhase.CONFIRMED:
            raise OfferGone("This registration was cancelled meanwhile: there is no place to take over.") from exc
        raise OfferGone("This offer was withdrawn or replaced; ask the runner for a new link.") from exc

    def _done_for(self, reg: Registration, n: int) -> TransferAnswer | None:
        """The answer of offer ``n`` when it moved the place already (a second click, a retry)."""
        if reg.lastTransfer != n or reg.status != RegistrationPhase.CONFIRMED:
            return None
        return self._transferred(reg, "The place is yours already: your confirmation is on its way.")

    def _transferred(self, reg: Registration, message: str) -> TransferAnswer:
        token = self._links.token(reg.registrationId, reg.linkVersion or 0, reg.raceDate)
        return TransferAnswer(
            registrationId=reg.registrationId, status="TRANSFERRED", bib=reg.bib, linkToken=token, message=message
        )

    def _fee_intent(
        self, reg: Registration, n: int, offer: dict[str, Any], person: dict[str, Any], fee: int
    ) -> PaymentIntent:
        intent_id = offer.get("intentId")
        if intent_id:
            intent = provider_call(lambda: self._payments.retrieve_intent(str(intent_id)), reg.holdId)
        else:
            try:
                intent = provider_call(
                    lambda: self._payments.create_intent(
                        NewIntent(
                            amount_cents=fee,
                            currency=reg.currency,
                            metadata={
                                "purpose": PURPOSE,
                                "registrationId": reg.registrationId,
                                "raceId": reg.raceId,
                                "eventId": reg.eventId,
                                "transfer": str(n),
                            },
                            description=f"{reg.raceName}: transfer fee",
                        ),
                        idempotency_key=f"transfer-fee-{reg.registrationId}-{n}",
                    ),
                    reg.holdId,
                )
            except PaymentRejected as exc:
                raise PaymentRefused(
                    f"The payment service cannot take this transfer fee ({exc.code}); nothing was charged."
                ) from exc
        # The new runner's details wait on the offer for the payment (the webhook moves the
        # place from them); a second send replaces them, conditioned on the offer still standing.
        try:
            self._regs.set_transfer_offer(reg, {**offer, "person": person, "intentId": intent.id}, expect=n)
        except ConditionFailed as exc:
            raise OfferGone("This offer was withdrawn or replaced; ask the runner for a new link.") from exc
        return intent

    def _confirm_fee(self, reg: Registration, intent: PaymentIntent, payment_method: str) -> PaymentIntent:
        return confirm_on_server(
            self._payments, intent, payment_method, reg.holdId, "That card was not accepted: try another card."
        )

    def _after_payment(self, rid: str, n: int, intent: PaymentIntent, *, report_decline: bool) -> TransferAnswer:
        if intent.status == IntentStatus.SUCCEEDED:
            outcome = self.fee_paid(intent)
            reg = self._regs.get(rid)
            if outcome in ("moved", "already") and reg is not None:
                return self._transferred(reg, "The place is yours: a confirmation is on its way to you.")
            raise OfferGone(
                "The place could not be handed over (the registration was cancelled or the offer replaced "
                "meanwhile): your transfer fee is refunded."
            )
        if report_decline and intent.status == IntentStatus.REQUIRES_PAYMENT_METHOD and intent.decline_code:
            raise PaymentDeclined("Your card was declined: try another card.")
        status = waiting(intent)
        return TransferAnswer(
            registrationId=rid,
            status=status,
            clientSecret=intent.client_secret,
            amountCents=intent.amount_cents,
            currency=intent.currency,
            message="Pay the transfer fee to take the place over.",
        )

    def _refund_fee(self, reg: Registration, intent: PaymentIntent, n: int) -> None:
        if self._fees is None:
            raise RuntimeError("Transfers were built without the ledger's fee refunds")
        self._fees.refund_lost_fee(reg, intent, f"transfer-fee-back-{reg.registrationId}-{n}")

    def _tell(self, before: Registration, after: Registration) -> None:
        rid, version = after.registrationId, after.linkVersion or 0
        self._emails.send(
            EmailMessage(
                kind=CONFIRMED_KIND,
                dedupKey=f"{CONFIRMED_KIND}:{rid}:v{version}",
                to=after.email,
                data={
                    "firstName": after.firstName,
                    "lastName": after.lastName,
                    "raceName": after.raceName,
                    "eventName": after.eventName,
                    "bib": after.bib,
                    "registrationId": rid,
                    "amountCents": after.amountCents,
                    "currency": after.currency,
                    "raceDate": after.raceDate,
                    "linkVersion": version,
                },
            )
        )
        self._emails.send(
            EmailMessage(
                kind=AWAY_KIND,
                dedupKey=f"{AWAY_KIND}:{rid}:v{version}",
                to=before.email,
                data={"firstName": before.firstName, "raceName": before.raceName, "registrationId": rid},
            )
        )

    # -- reads and rules ---------------------------------------------------------------------
    def _own(self, link_token: str | None) -> Registration:
        return self._links.registration(link_token, self._regs.get)

    def _offered(self, offer_token: str) -> tuple[Registration, int]:
        """The registration offer ``offer_token`` names, while that offer is the pending one."""
        reg, n = self._read(offer_token)
        return self._pending(reg, n), n

    def _read(self, offer_token: str) -> tuple[Registration, int]:
        claims = self._signer().verify("trf", offer_token, now=self._clock())
        rid, n = _claims(claims)
        reg = self._regs.get(rid)
        if reg is None or reg.purgedAt:
            raise InvalidToken("This link no longer leads to a registration.")
        return reg, n

    @staticmethod
    def _pending(reg: Registration, n: int) -> Registration:
        if (reg.transferOffer or {}).get("n") != n:
            raise OfferGone("This offer was withdrawn, replaced or taken already; ask the runner for a new link.")
        if reg.status != RegistrationPhase.CONFIRMED:
            raise OfferGone("This registration was cancelled: there is no place to take over.")
        return reg

    def _race_event(self, reg: Registration) -> tuple[Race, Event]:
        race, events = self._catalog.definition(reg.raceId)
        event = next((e for e in events if e.eventId == reg.eventId), None)
        if event is None:
            raise Conflict("The registration's event no longer exists; contact the organiser.")
        return race, event

    @staticmethod
    def _fee(reg: Registration, race: Race) -> int:
        """The fee the new runner pays: none for a free entry (it has no payment for the fee's
        ledger to join; the organiser gave the place away already)."""
        return race.refundPolicy.transferFeeCents if reg.chargeId else 0

    def _why_not(self, reg: Registration, race: Race) -> str | None:
        if reg.status != RegistrationPhase.CONFIRMED:
            return "This registration is cancelled: there is no place to hand over."
        until = race.refundPolicy.transfersUntil
        if until is None:
            return "The organiser does not let runners hand their place to someone else."
        if reg.pendingSwitch:
            return "You are switching to another event: finish or cancel the switch first."
        if today_in(race.timeZone) > date.fromisoformat(until):
            return f"Places could be handed over until {until}."
        return None

    def _audit_only(self, reg: Registration, action: str, **details: Any) -> None:
        self._transact([self._audit.item(Actor.runner(reg.registrationId), reg.raceId, action, reg.registrationId,
                                         eventId=reg.eventId, **details)])  # fmt: skip


def _claims(claims: dict[str, Any]) -> tuple[str, int]:
    rid, n = claims.get("r"), claims.get("n")
    if not isinstance(rid, str) or not rid or not isinstance(n, int):
        raise InvalidToken("The link to take this place over is malformed.")
    return rid, n


def _attempt_person(person: dict[str, Any]) -> dict[str, Any]:
    """What the hold's record of the attempt keeps of its runner: replaced, not kept."""
    return {k: person.get(k) for k in ("email", "firstName", "lastName", "dateOfBirth", "answers",
                                       "questionsVersion", "waiver")}  # fmt: skip
