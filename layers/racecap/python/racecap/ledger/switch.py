"""A runner switches to another event of the race (issue 41: switch): "can I do the half instead?".

1. **Quoted** from the registration's link: every other event, priced for this runner *now* (its
   tier today, their discount code if it covers that event, else none, said before confirming),
   and the difference: a dearer event's is paid, a cheaper one's refunded, one under the payment
   provider's minimum charge neither (said too). An event with runners on its waitlist is not
   offered (they go first), nor one that is sold out.
2. **Held**: the target's place is taken first, by a hold of the switch's own kind (``switchOf``:
   no email claim, no client limit) recorded on the registration as its ``pendingSwitch``. Sold
   out: 409 and nothing changed. The target's questions and waiver are asked again (its own).
3. **Paid**, when dearer: the difference is a payment of its own (purpose ``upgrade``, one
   PaymentIntent per switch), on the request (a card confirmed on the server), after the
   browser's payment (``confirm``), or by the provider's webhook or the reconciliation — whichever
   comes first. While the runner's bank asks for 3-D Secure the sweeper extends the hold once, as
   it does a registration's; a declined card changes nothing (the place stays held to try another).
4. **Moved** in one transaction or not at all: the target's bib counter (a new bib there, so
   bibs stay 1..N per event), the registration (its event, bib, shard, answers; a cheaper event's
   refund reserved in its ledger), a SWITCHED record of the entry it left (its old bib stays
   counted there), the switch's hold done, the email's claim, the old place freed (to its
   waitlist's pool first, ``places.returns``), option stock given back there and taken here (the
   entry hold's record of it follows), both events' counters, the trail's entry (the runner as
   actor). Then the refund is asked for (the sweeper asks again if the provider does not answer:
   it is reserved, never lost) and the upgrade recorded in the ledger.

The registration keeps its id: its link, its ledger (the entry payment, any fee, refunds) and
the email's claim name it, so none of them moves; the entry it left is the new record. A switch
raced against a cancellation or a transfer of the same entry: the move's condition (confirmed,
in its old event, this switch pending) lets exactly one win, and an upgrade paid for a switch
that lost is refunded from the ledger (keyed on the switch: once).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from racecap.audit.service import AuditTrail
from racecap.aws.queues import MessageQueue
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.cache import Flags
from racecap.codes.models import CodeTerms
from racecap.codes.service import discounted
from racecap.emails.models import EmailMessage
from racecap.errors import Conflict, PaymentDeclined, PaymentRefused, SoldOut, ValidationFailed
from racecap.holds.models import Hold, HoldPhase
from racecap.holds.service import SOLD_OUT_FLAG_TTL, new_hold, waitlisted
from racecap.ledger.service import Ledger
from racecap.ledger.switch_ports import (
    SWITCH_JOB,
    SwitchGone,
    SwitchHolds,
    SwitchNotAllowed,
    SwitchStore,
    TeamSwitchTooLarge,
    answers_for,
    reserved_refund,
    switch_refund_key,
)
from racecap.ledger.team_switch import TeamMoves
from racecap.models import Actor
from racecap.money import in_units, minimum_charge
from racecap.observability import logger, metrics
from racecap.payments.calls import confirm_on_server, provider_call, waiting
from racecap.payments.port import IntentStatus, NewIntent, PaymentIntent, PaymentProvider, PaymentRejected
from racecap.places.returns import PlaceReturns
from racecap.places.rules import shard_name
from racecap.questions.models import StoredAnswers
from racecap.races.catalog import RaceDefinitions, sold_out_flag
from racecap.races.models import Event, Race
from racecap.races.rules import today_in
from racecap.registration.edits import MAX_TRIES, plan_stock
from racecap.registration.links import RegistrationLinks
from racecap.registration.models import Registration, RegistrationPhase
from racecap.registration.own_models import SwitchAnswer, SwitchQuote, SwitchRequest, SwitchTarget
from racecap.registration.status import StatusSnapshots
from racecap.registration.store import SwitchMove
from racecap.registration.transfer import TransferAnswers

PURPOSE = "upgrade"
CONFIRMED_KIND = "switch-confirmed"


class Switches:
    def __init__(
        self,
        links: RegistrationLinks,
        registrations: SwitchStore,
        holds: SwitchHolds,
        catalog: RaceDefinitions,
        answers: TransferAnswers | None,
        codes: Callable[[str, str], CodeTerms | None],
        payments: PaymentProvider,
        emails: MessageQueue,
        audit: AuditTrail,
        transact: Callable[[list[TransactItem]], None],
        inventory_table: str,
        returns: PlaceReturns,
        ledger: Ledger,
        flags: Flags,
        statuses: StatusSnapshots | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._links = links
        self._regs = registrations
        self._holds = holds
        self._catalog = catalog
        self._answers = answers
        self._codes = codes
        self._payments = payments
        self._emails = emails
        self._audit = audit
        self._transact = transact
        self._inv = inventory_table
        self._returns = returns
        self._ledger = ledger
        self._flags = flags
        self._statuses = statuses
        self._clock = clock
        self._team = TeamMoves(
            registrations, holds, catalog, answers, audit, transact, inventory_table, returns, ledger, flags,
            statuses, ask_refund=self._ask_refund, tell=self._tell,
        )  # fmt: skip

    # -- the runner, from their link -------------------------------------------------------------
    def quote(self, link_token: str | None) -> SwitchQuote:
        reg = self._own(link_token)
        race, events = self._catalog.definition(reg.raceId)
        team = self._team.members(reg)
        why = self._why_not(reg, race, team)
        now = datetime.now(UTC)
        pending = reg.pendingSwitch or {}
        targets = [
            self._target(reg, team, e, now, held=e.eventId == pending.get("eventId"))
            for e in events
            if e.eventId != reg.eventId
        ]
        note = why or (
            "Choose the event to switch to: a dearer one's difference is paid now, a cheaper one's refunded to "
            "the card that paid. Your new event's questions are asked again, and you get a new bib there."
            if targets
            else "This race has no other event to switch to."
        )
        return SwitchQuote(
            allowed=why is None and bool(targets),
            until=race.refundPolicy.switchesUntil,
            currentEventId=reg.eventId,
            pendingEventId=str(pending["eventId"]) if pending.get("eventId") else None,
            targets=targets,
            note=note,
            team=self._team.roster(team) if team else None,
        )

    def switch(self, link_token: str | None, body: SwitchRequest) -> SwitchAnswer:
        reg = self._own(link_token)
        race, events = self._catalog.definition(reg.raceId)
        done = self._done(reg, body.eventId)
        if done is not None:
            return done  # a second click after it moved
        team = self._team.members(reg)
        why = self._why_not(reg, race, team)
        if why is not None:
            raise SwitchNotAllowed(why)
        target = next((e for e in events if e.eventId == body.eventId), None)
        if target is None or target.eventId == reg.eventId:
            raise ValidationFailed(
                "Choose another event of this race to switch to.", fields={"eventId": "Not another event of this race."}
            )
        said = self._team.takes_team(target, team) if team else None
        if said is not None:
            raise SwitchNotAllowed(said)
        if team:
            people = self._team.people(race, target, team, body)
            self._team.check_fits(team, target, people)
            chosen: dict[str, Any] = {"people": people}
        else:
            chosen = {"person": self._person(reg, race, target, body)}
        pending = dict(reg.pendingSwitch or {})
        hold = self._holds.get(str(pending["holdId"])) if pending.get("eventId") == target.eventId else None
        if hold is not None and team and pending.get("members") != [m.registrationId for m in team]:
            hold = None  # the team changed since its places were held: hold them again
        if hold is None or hold.status != HoldPhase.HELD:
            if pending:
                self._give_up(reg, pending)
                reg = self._regs.get(reg.registrationId) or reg
            pending, hold = self._hold(reg, race, target, team)
        if team:
            _, pay, refunds, _ = self._team.difference(team, hold.amountCents or 0)
            refund = sum(refunds.values())
            chosen["refunds"] = refunds
        else:
            _, pay, refund, _ = self._difference(reg, target, hold.amountCents or 0)
        # The difference as the runner was told it: the move refunds this, whatever a code does later.
        pending |= chosen | {"refundCents": refund}
        try:
            self._regs.set_pending_switch(reg, pending, hold=hold.holdId)
        except ConditionFailed as exc:
            raise SwitchGone("Your registration changed meanwhile; reload it and try again.") from exc
        if pay == 0:
            moved = self._move(reg, hold, pending)
            return self._switched(moved, refund, "You are in your new event: a confirmation is on its way.")
        intent = self._upgrade_intent(reg, hold, pending, pay)
        if body.paymentMethod and intent.status in (IntentStatus.REQUIRES_PAYMENT_METHOD,
                                                    IntentStatus.REQUIRES_CONFIRMATION):  # fmt: skip
            intent = self._confirm_upgrade(reg, intent, body.paymentMethod)
        return self._after_payment(reg, target, intent, report_decline=bool(body.paymentMethod))

    def confirm(self, link_token: str | None) -> SwitchAnswer:
        """After the browser paid the difference: the registration moves if the payment succeeded."""
        reg = self._own(link_token)
        pending = reg.pendingSwitch or {}
        if not pending.get("intentId"):
            if reg.switchedAt and reg.status == RegistrationPhase.CONFIRMED:
                return self._switched(reg, 0, "You are in your new event: a confirmation is on its way.")  # a repeat
            raise Conflict("No switch is waiting for its payment: choose the event again.")
        _, events = self._catalog.definition(reg.raceId)
        target = next((e for e in events if e.eventId == pending.get("eventId")), None)
        if target is None:
            raise SwitchGone("The event you were switching to no longer exists.")
        intent = provider_call(lambda: self._payments.retrieve_intent(str(pending["intentId"])), str(pending["holdId"]))
        return self._after_payment(reg, target, intent, report_decline=False)

    def give_up(self, link_token: str | None) -> None:
        """The runner changed their mind before paying: the held place goes back."""
        reg = self._own(link_token)
        if reg.pendingSwitch:
            self._give_up(reg, dict(reg.pendingSwitch))

    def upgrade_paid(self, intent: PaymentIntent) -> str:
        """The provider's word that an upgrade succeeded (webhook, reconciliation, the sweeper):
        the registration moves if its switch still stands, else the upgrade is refunded.
        "moved", "already", "refunded", "orphan"."""
        rid = intent.metadata.get("registrationId", "")
        hold_id = intent.metadata.get("switchHold", "")
        reg = self._regs.get(rid) if rid else None
        if reg is None or not hold_id:
            return "orphan"
        recorded = self._ledger.record_payment(intent)  # first: a refund of it has a payment to go back to
        if recorded == "orphan":
            return "orphan"
        hold = self._holds.get(hold_id)
        if hold is not None and hold.status == HoldPhase.CONFIRMED:
            return "already"
        pending = reg.pendingSwitch or {}
        if hold is not None and pending.get("holdId") == hold_id and reg.status == RegistrationPhase.CONFIRMED:
            try:
                self._move(reg, hold, dict(pending))
                return "moved"
            except Conflict:
                pass  # lost (cancelled, transferred, the hold gone): the upgrade goes back
        again = self._holds.get(hold_id)
        if again is not None and again.status == HoldPhase.CONFIRMED:
            return "already"
        self._ledger.refund_lost_fee(
            self._regs.get(rid) or reg, intent, f"upgrade-back-{hold_id}", reason="the switch did not happen"
        )
        return "refunded"

    def settle_expired(self, hold: Hold, now: datetime) -> str | None:
        """The sweeper's turn at a switch's hold past its time: its upgrade paid → the switch
        moves (or the upgrade goes back); the bank asking for 3-D Secure → extended once; else the
        intent is cancelled and the place goes back."""
        if hold.intentId:
            intent = self._payments.retrieve_intent(hold.intentId)
            if intent.status == IntentStatus.REQUIRES_ACTION and not hold.extended:
                return "waiting" if self._holds.extend_switch(hold, now + timedelta(minutes=5)) else None
            if intent.status not in (IntentStatus.SUCCEEDED, IntentStatus.CANCELED):
                try:
                    intent = self._payments.cancel_intent(intent.id, idempotency_key=f"cancel-{intent.id}")
                except PaymentRejected:
                    intent = self._payments.retrieve_intent(intent.id)  # paid meanwhile, or processing
            if intent.status == IntentStatus.SUCCEEDED:
                return "recovered" if self.upgrade_paid(intent) == "moved" else None
            if intent.status != IntentStatus.CANCELED:
                return "waiting"
        freed = self._holds.release(hold, HoldPhase.EXPIRED, now=now, waitlist=waitlisted(self._catalog, hold))
        return "released" if freed is not None else None

    # -- the steps ---------------------------------------------------------------------------------
    def _hold(
        self, reg: Registration, race: Race, target: Event, team: list[Registration] | None
    ) -> tuple[dict[str, Any], Hold]:
        if self._waitlist_first(reg.raceId, target):
            raise SoldOut(f"{target.name} is full and its waitlist goes first: your registration is unchanged.")
        pending: dict[str, Any] = {"n": (reg.switches or 0) + 1}
        if team:
            got = self._team.hold(reg, race, target, team)
            pending["members"] = [m.registrationId for m in team]
        else:
            # A hold as the public path makes it (its price fixed now), naming the registration switching.
            fresh = new_hold(race, target, datetime.now(UTC), None)
            hold = fresh.model_copy(update={"registrationId": reg.registrationId, "switchOf": reg.registrationId})
            claimed = self._holds.claim(hold, [shard_name(n) for n in range(target.shards)])
            if claimed is None:
                self._flags.flag(sold_out_flag(reg.raceId, target.eventId), SOLD_OUT_FLAG_TTL)
                raise SoldOut(f"{target.name} is sold out: your registration is unchanged.")
            got = claimed
        pending |= {"holdId": got.holdId, "eventId": target.eventId}
        try:
            self._regs.set_pending_switch(reg, pending)
        except ConditionFailed as exc:
            self._holds.release(got, HoldPhase.RELEASED, waitlist=target.waitlist.enabled)
            raise SwitchGone("Your registration changed meanwhile; reload it and try again.") from exc
        return pending, got

    def _give_up(self, reg: Registration, pending: dict[str, Any]) -> None:
        hold = self._holds.get(str(pending.get("holdId", "")))
        try:
            self._regs.set_pending_switch(reg, None, hold=str(pending.get("holdId", "")))
        except ConditionFailed:
            return  # moved or given up meanwhile
        if pending.get("intentId"):
            try:
                self._payments.cancel_intent(str(pending["intentId"]), idempotency_key=f"cancel-{pending['intentId']}")
            except Exception as exc:  # paid meanwhile: upgrade_paid refunds it (the switch is no longer pending)
                logger.info("a given-up switch's upgrade was not cancelled", extra={"error": str(exc)})
        if hold is not None and hold.status == HoldPhase.HELD:
            self._holds.release(hold, HoldPhase.RELEASED, waitlist=waitlisted(self._catalog, hold))

    def _person(self, reg: Registration, race: Race, target: Event, body: SwitchRequest) -> dict[str, Any]:
        return answers_for(self._answers, reg, race, target, body.answers, body.waiver)

    def _difference(self, reg: Registration, target: Event, list_cents: int) -> tuple[int, int, int, str]:
        """(price, to pay, to refund, the code's word): the target's price for this runner (their
        code's discount when it covers the target), and the difference with what they paid;
        one under the provider's minimum charge is neither charged nor refunded."""
        price, said = list_cents, ""
        if reg.code:
            terms = self._codes(reg.raceId, reg.code)
            if terms is not None and (not terms.eventIds or target.eventId in terms.eventIds):
                price = discounted(list_cents, reg.currency, terms)
                said = f"Your code {reg.code} applies. "
            else:
                said = f"Your code {reg.code} does not cover {target.name}: its full price applies. "
        diff = price - reg.amountCents
        least = minimum_charge(reg.currency) or 1
        pay = diff if diff >= least else 0
        refund = -diff if -diff >= least else 0
        if diff and not pay and not refund:
            said += (
                f"The difference ({in_units(abs(diff), reg.currency)}) is under the smallest payment: none is made. "
            )
        return price, pay, refund, said

    def _upgrade_intent(self, reg: Registration, hold: Hold, pending: dict[str, Any], pay: int) -> PaymentIntent:
        intent_id = pending.get("intentId")
        if intent_id:
            return provider_call(lambda: self._payments.retrieve_intent(str(intent_id)), hold.holdId)
        try:
            intent = provider_call(
                lambda: self._payments.create_intent(
                    NewIntent(
                        amount_cents=pay,
                        currency=reg.currency,
                        metadata={
                            "purpose": PURPOSE,
                            "registrationId": reg.registrationId,
                            "raceId": reg.raceId,
                            "eventId": hold.eventId,
                            "switchHold": hold.holdId,
                        },
                        description=f"{reg.raceName}: switch to another event",
                    ),
                    idempotency_key=f"upgrade-{hold.holdId}",
                ),
                hold.holdId,
            )
        except PaymentRejected as exc:
            raise PaymentRefused(
                f"The payment service cannot take this payment ({exc.code}); nothing was charged."
            ) from exc
        # On the hold (the sweeper asks for it there) and on the pending switch (the confirm call).
        self._holds.set_switch_intent(hold, intent.id)
        try:
            self._regs.set_pending_switch(reg, {**pending, "intentId": intent.id}, hold=hold.holdId)
        except ConditionFailed as exc:
            raise SwitchGone("Your registration changed meanwhile; reload it and try again.") from exc
        return intent

    def _confirm_upgrade(self, reg: Registration, intent: PaymentIntent, payment_method: str) -> PaymentIntent:
        return confirm_on_server(
            self._payments,
            intent,
            payment_method,
            reg.holdId,
            "That card was not accepted: try another card. Your registration is unchanged.",
        )

    def _after_payment(
        self, reg: Registration, target: Event, intent: PaymentIntent, *, report_decline: bool
    ) -> SwitchAnswer:
        if intent.status == IntentStatus.SUCCEEDED:
            outcome = self.upgrade_paid(intent)
            moved = self._regs.get(reg.registrationId)
            if outcome in ("moved", "already") and moved is not None:
                return self._switched(moved, 0, "You are in your new event: a confirmation is on its way.")
            raise SwitchGone(
                "The switch could not be made (your registration changed, or the held place ran out): "
                "the difference you paid is refunded."
            )
        if report_decline and intent.status == IntentStatus.REQUIRES_PAYMENT_METHOD and intent.decline_code:
            raise PaymentDeclined("Your card was declined: try another card. Your registration is unchanged.")
        status = waiting(intent)
        return SwitchAnswer(
            registrationId=reg.registrationId,
            status=status,
            eventId=target.eventId,
            clientSecret=intent.client_secret,
            amountCents=intent.amount_cents,
            currency=intent.currency,
            message=f"Pay the difference to switch to {target.name}; the place is held for you meanwhile.",
        )

    def _move(self, reg: Registration, hold: Hold, pending: dict[str, Any]) -> Registration:
        if reg.teamMembers:
            return self._team.move(reg, hold, pending)
        _, events = self._catalog.definition(reg.raceId)
        target = next((e for e in events if e.eventId == hold.eventId), None)
        old_event = next((e for e in events if e.eventId == reg.eventId), None)
        entry_hold = self._holds.get(reg.holdId)
        if target is None or entry_hold is None or entry_hold.attempt is None:
            raise SwitchGone("This registration's records are incomplete; contact the organiser.")
        person = dict(pending.get("person") or {"answers": None, "questionsVersion": None, "waiver": None})
        stored = StoredAnswers.of(person.get("answers"), person.get("questionsVersion"))
        chosen = self._answers.stocked(reg.raceId, target.eventId, stored) if self._answers and stored else []
        refund = int(pending["refundCents"]) if "refundCents" in pending else None
        if refund is None:
            _, _, refund, _ = self._difference(reg, target, hold.amountCents or 0)
        n = int(pending.get("n") or (reg.switches or 0) + 1)
        now = datetime.now(UTC).isoformat()
        record_id = f"{reg.registrationId}-s{n}"
        full: set[str] = set()
        shard = reg.shard or entry_hold.shard
        for _ in range(MAX_TRIES * 2):
            place = self._returns.give_back(
                reg.raceId, reg.eventId, {shard: 1}, waitlist=bool(old_event and old_event.waitlist.enabled)
            )
            follows = {"eventId": target.eventId, "shard": hold.shard}  # the entry hold's record follows the place
            plan = plan_stock(self._inv, entry_hold, reg, chosen, full, person=_attempt_answers(person),
                              to_event=target.eventId, moved=follows)  # fmt: skip
            move = SwitchMove(
                eventId=target.eventId, eventName=target.name, bib=self._regs.next_bib(reg.raceId, target.eventId),
                shard=hold.shard, holdId=hold.holdId, recordId=record_id, person=person, refundCents=refund, now=now,
            )  # fmt: skip
            refunds = self._refund_items(reg, refund, n, now)
            audit = self._audit.item(
                Actor.runner(reg.registrationId), reg.raceId, "registration.switched", reg.registrationId,
                eventId=target.eventId, fromEventId=reg.eventId, bib=move.bib, oldBib=reg.bib, switch=n,
                refundCents=refund,
            )  # fmt: skip
            head = self._regs.switch_items(reg, move)
            items = [*head, *plan.stock, audit, *place.items, *plan.record, *refunds]
            try:
                self._transact(items)
                break
            except ConditionFailed as exc:
                if 0 in exc.indexes or place.line_moved(exc, items):
                    continue  # another writer took the bib, or the waitlist moved: build it again
                first = len(head)
                full_at = [i - first for i in exc.indexes if first <= i < first + len(plan.taken)]
                if full_at:
                    full.add(plan.taken[full_at[0]])
                    continue
                raise SwitchGone(
                    "Your registration changed meanwhile (cancelled, handed over, or switched): nothing was switched."
                ) from exc
        else:
            raise Conflict("The new event kept changing while we moved you; please try again.")
        if place.freed == "public":
            self._flags.clear_flag(sold_out_flag(reg.raceId, reg.eventId))
        if self._statuses is not None:
            self._statuses.forget(reg.registrationId)
        moved = self._regs.get(reg.registrationId) or reg
        metrics.add_metric(name="RegistrationSwitched", unit="Count", value=1)
        if refund:
            self._ask_refund(moved, refund, n)
        self._tell(reg, moved, n, refund)
        return moved

    def _refund_items(self, reg: Registration, refund: int, n: int, now: str) -> list[TransactItem]:
        return reserved_refund(self._ledger, reg, refund, n, now, "switched to a cheaper event")

    def _ask_refund(self, reg: Registration, refund: int, n: int) -> None:
        try:
            self._ledger.refund_registration(
                reg, refund, switch_refund_key(reg.registrationId, n), SWITCH_JOB, "switched to a cheaper event"
            )
        except Exception:
            # Reserved in the move: the sweeper's settle_open asks the provider again by its key.
            logger.warning("a switch's refund was not asked yet", extra={"registrationId": reg.registrationId})

    def _tell(self, before: Registration, after: Registration, n: int, refund: int) -> None:
        self._emails.send(
            EmailMessage(
                kind=CONFIRMED_KIND,
                dedupKey=f"{CONFIRMED_KIND}:{after.registrationId}:{n}",
                to=after.email,
                data={
                    "firstName": after.firstName,
                    "raceName": after.raceName,
                    "fromEventName": before.eventName,
                    "eventName": after.eventName,
                    "bib": after.bib,
                    "registrationId": after.registrationId,
                    "refundCents": refund,
                    "currency": after.currency,
                    "raceDate": after.raceDate,
                    "linkVersion": after.linkVersion or 0,
                },
            )
        )

    def _switched(self, reg: Registration, refund: int, message: str) -> SwitchAnswer:
        return SwitchAnswer(
            registrationId=reg.registrationId,
            status="SWITCHED",
            eventId=reg.eventId,
            bib=reg.bib,
            refundCents=refund or None,
            currency=reg.currency,
            message=message,
        )

    def _done(self, reg: Registration, event_id: str) -> SwitchAnswer | None:
        if reg.eventId == event_id and reg.switchedAt and reg.status == RegistrationPhase.CONFIRMED:
            return self._switched(reg, 0, "You are in this event already.")
        return None

    # -- reads and rules ---------------------------------------------------------------------------
    def _own(self, link_token: str | None) -> Registration:
        return self._links.registration(link_token, self._regs.get)

    def _target(
        self, reg: Registration, team: list[Registration] | None, event: Event, now: datetime, *, held: bool = False
    ) -> SwitchTarget:
        """One event to switch to, priced now; ``held``: this runner's switch holds a place there
        already (begun, not paid), so its being full now is their own place, not a refusal."""
        why = None
        if team:
            price, pay, refunds, said = self._team.difference(team, event.price_at(now))
            refund = sum(refunds.values())
            why = self._team.takes_team(event, team)
            try:
                self._team.check_fits(team, event, None)
            except TeamSwitchTooLarge as exc:
                why = why or exc.message
        else:
            price, pay, refund, said = self._difference(reg, event, event.price_at(now))
        if held:
            said = "Your place here is held while you finish this switch. " + said
        elif why is None and self._flags.has_flag(sold_out_flag(reg.raceId, event.eventId)):
            why = f"{event.name} is sold out."
        elif why is None and self._waitlist_first(reg.raceId, event):
            why = f"{event.name} is full: its waitlist goes first."
        if pay:
            said += f"You pay the difference, {in_units(pay, reg.currency)} {reg.currency.upper()}."
        elif refund:
            said += f"The difference, {in_units(refund, reg.currency)} {reg.currency.upper()}, is refunded."
        else:
            said += "Nothing to pay."
        return SwitchTarget(
            eventId=event.eventId,
            eventName=event.name,
            priceCents=price,
            payCents=pay,
            refundCents=refund,
            currency=reg.currency,
            available=why is None,
            note=(why or said).strip(),
        )

    def _why_not(self, reg: Registration, race: Race, team: list[Registration] | None) -> str | None:
        if reg.status != RegistrationPhase.CONFIRMED:
            return "This registration is cancelled: there is nothing to switch."
        until = race.refundPolicy.switchesUntil
        if until is None:
            return "The organiser does not let runners switch event."
        if today_in(race.timeZone) > date.fromisoformat(until):
            return f"Switches could be made until {until}."
        if team is not None:
            return self._team.why_not(team)
        if reg.ledgerRefundedCents or reg.ledgerPending or reg.cancelRequestedAt:
            return "Part of this entry was refunded: ask the organiser to switch it."
        if reg.transferOffer:
            return "Your place is offered to another runner: withdraw the offer first."
        return None

    def _waitlist_first(self, race_id: str, event: Event) -> bool:
        """Runners wait on the event's open waitlist: its places are theirs before a switch's."""
        if not event.waitlist.enabled:
            return False
        line = self._returns.line(race_id, event.eventId)
        return line.exists and not line.closed and line.waiting > 0


def _attempt_answers(person: dict[str, Any]) -> dict[str, Any]:
    """What the entry hold's record of the attempt keeps of the answers: replaced with the new event's."""
    return {k: person.get(k) for k in ("answers", "questionsVersion", "waiver")}
