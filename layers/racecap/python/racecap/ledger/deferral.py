"""A runner defers their place to the race's next edition (issue 41: "I'm injured, can I run
next year?").

* **Next edition as data**: copying a race (``setup.service.copy_race``) records the copy as the
  original's ``nextEdition`` (and the copy ``continues`` it). No next edition: no deferral.
* **Quoted** from the runner's link, under the director's policy (``deferralsUntil``, the last
  day; ``deferralFeeCents``, kept): the credit is what the entry paid (the entry payment and any
  payment beyond it: an upgrade, a transfer fee) less the fee, said before confirming.
* **Deferred** as a cancellation with no refund whose first write also records where the place
  went (``deferredTo``, the code, the credit) and makes the credit a *personal code* in the next
  edition: an AMOUNT code of the credit, one use, for this runner's address only
  (``StoredCode.forEmail``: the registration must use that address, as a waitlist offer's must).
  So the credit is applied at the next edition's card step as any code is (held with the place,
  given back if unpaid, changed after the card step), with no new path in the registration's
  hot path. The place frees here as a cancellation's does (to the waitlist's pool first); the
  money stays in this race's ledger (its entry payment, not refunded), where the director sees
  it beside the code; the runner gets the code by email instead of a refund email.

A repeat (a double click, a retry) finds the registration cancelled and answers with its code;
the code's key is the registration's, so two clicks never make two codes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, date, datetime

from racecap.aws.transactions import TransactItem
from racecap.codes.models import CodeTerms
from racecap.codes.store import StoredCode
from racecap.errors import Conflict, Forbidden
from racecap.ledger.cancellations import Cancellations, Deferred
from racecap.ledger.models import DeferralAnswer, DeferralQuote
from racecap.models import Actor
from racecap.money import in_units
from racecap.races.catalog import RaceDefinitions
from racecap.races.models import Race
from racecap.races.rules import today_in
from racecap.registration.links import RegistrationLinks
from racecap.registration.models import Registration, RegistrationPhase
from racecap.registration.store import RegistrationStore

CODE_PREFIX = "DEFER"


class DeferralNotAllowed(Forbidden):
    code = "DEFERRAL_NOT_ALLOWED"


class DeferralChanged(Conflict):
    """The credit is not the one the runner was shown (a refund, a fee change meanwhile)."""

    code = "QUOTE_CHANGED"


def deferral_code(registration_id: str) -> str:
    """The code a registration's deferral makes: one per registration (a repeat makes none more),
    unguessable from anything but the registration's own id."""
    return f"{CODE_PREFIX}-{hashlib.sha256(registration_id.encode()).hexdigest()[:12].upper()}"


class Deferrals:
    def __init__(
        self,
        links: RegistrationLinks,
        registrations: RegistrationStore,
        catalog: RaceDefinitions,
        cancellations: Cancellations,
        code_items: Callable[[StoredCode], list[TransactItem]],
        codes_made: Callable[[str], None],
    ) -> None:
        self._links = links
        self._regs = registrations
        self._catalog = catalog
        self._cancellations = cancellations
        self._code_items = code_items
        self._codes_made = codes_made  # the next race's code-use copy is built again with it

    def quote(self, link_token: str | None) -> DeferralQuote:
        reg = self._own(link_token)
        race, _ = self._catalog.definition(reg.raceId, fresh=True)  # a next edition just made counts
        return self._quote(reg, race)

    def defer(self, link_token: str | None, credit_cents: int) -> DeferralAnswer:
        reg = self._own(link_token)
        race, _ = self._catalog.definition(reg.raceId, fresh=True)  # a next edition just made counts
        if reg.deferredTo:
            return self._answer(reg, "Your place is deferred already: your code is in your email.")
        quote = self._quote(reg, race)
        if not quote.allowed or quote.nextRaceId is None:
            raise DeferralNotAllowed(quote.note)
        if quote.creditCents != credit_cents:
            raise DeferralChanged(f"The credit is now {_money(quote.creditCents, reg.currency)}: {quote.note}")
        code = deferral_code(reg.registrationId)
        stored = StoredCode(
            raceId=quote.nextRaceId,
            code=code,
            terms=CodeTerms(kind="AMOUNT", amountCents=quote.creditCents, note=f"Deferred from {race.name}"),
            maxUses=1,
            shards=[1],
            createdAt=datetime.now(UTC),
            forEmail=reg.email,
        )
        deferral = Deferred(
            sets={"deferredTo": quote.nextRaceId, "deferralCode": code, "deferralCreditCents": quote.creditCents},
            items=self._code_items(stored),
        )
        self._cancellations.cancel(
            Actor.runner(reg.registrationId), race, reg.registrationId, "deferred to the next edition", "NONE",
            None, reg.linkVersion or 0, deferral,
        )  # fmt: skip
        done = self._regs.get(reg.registrationId) or reg
        if not done.deferredTo:
            raise Conflict("Your registration changed meanwhile (cancelled or moved): nothing was deferred.")
        self._codes_made(done.deferredTo)
        return self._answer(done, "Deferred: your code for the next edition is on its way by email.")

    # -- parts ----------------------------------------------------------------------------------
    def _quote(self, reg: Registration, race: Race) -> DeferralQuote:
        policy = race.refundPolicy
        paid = reg.amountCents + (reg.ledgerExtraCents or 0)
        fee = min(policy.deferralFeeCents, paid)
        credit = paid - fee
        nxt = self._next(race)
        why = self._why_not(reg, race, nxt, credit)
        note = why or (
            f"Your place here is cancelled with no refund, and {_money(credit, reg.currency)} becomes a code for "
            f"{nxt.name if nxt else 'the next edition'} ({nxt.raceDate if nxt else ''}), for your address only"
            + (f" (the organiser keeps {_money(fee, reg.currency)})" if fee else "")
            + ". Use it when you register there."
        )
        return DeferralQuote(
            allowed=why is None,
            until=policy.deferralsUntil,
            nextRaceId=nxt.raceId if nxt else None,
            nextRaceName=nxt.name if nxt else None,
            nextRaceDate=nxt.raceDate if nxt else None,
            paidCents=paid,
            feeCents=fee,
            creditCents=credit,
            currency=reg.currency,
            note=note,
        )

    def _next(self, race: Race) -> Race | None:
        if not race.nextEdition:
            return None
        try:
            return self._catalog.definition(race.nextEdition)[0]
        except Exception:  # deleted, or not readable now: no deferral rather than a broken one
            return None

    @staticmethod
    def _why_not(reg: Registration, race: Race, nxt: Race | None, credit: int) -> str | None:
        if reg.status != RegistrationPhase.CONFIRMED:
            return "This registration is cancelled: there is no place to defer."
        until = race.refundPolicy.deferralsUntil
        if until is None:
            return "The organiser does not let runners defer their place."
        if today_in(race.timeZone) > date.fromisoformat(until):
            return f"Places could be deferred until {until}."
        if nxt is None:
            return "The race has no next edition yet: ask again once the organiser has set it up."
        if nxt.currency.lower() != reg.currency.lower():
            return "The next edition takes another currency: ask the organiser."
        if reg.teamMembers:
            return "A team's places are paid together: ask the organiser to defer them."
        if reg.ledgerRefundedCents or reg.ledgerPending:
            return "Part of this entry was refunded: ask the organiser to defer it."
        if reg.transferOffer or reg.pendingSwitch:
            return "Your place is being handed over or switched: finish or cancel that first."
        if credit <= 0:
            return "This entry has nothing to carry over (it was free, or the fee is all of it): cancel it instead."
        return None

    def _answer(self, reg: Registration, message: str) -> DeferralAnswer:
        return DeferralAnswer(
            registrationId=reg.registrationId,
            status=str(reg.status),
            nextRaceId=reg.deferredTo or "",
            code=reg.deferralCode or "",
            creditCents=reg.deferralCreditCents or 0,
            currency=reg.currency,
            message=message,
        )

    def _own(self, link_token: str | None) -> Registration:
        return self._links.registration(link_token, self._regs.get)


def _money(cents: int, currency: str) -> str:
    return f"{in_units(cents, currency)} {currency.upper()}"
