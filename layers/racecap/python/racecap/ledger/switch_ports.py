"""What a runner's switch (``ledger.switch``) and a team's (``ledger.team_switch``) share: the
stores they write through, their errors, who the trail names for their refunds, the refunds' key."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any, Protocol

from racecap.aws.transactions import TransactItem
from racecap.errors import Conflict, Forbidden
from racecap.holds.models import Hold, HoldPhase
from racecap.ledger.models import LedgerEntry, RefundPhase
from racecap.ledger.service import Ledger, split
from racecap.models import Director
from racecap.questions.models import Answers, WaiverAcceptance
from racecap.races.models import Event, Race
from racecap.races.rules import age_on, check_age
from racecap.registration.models import Registration
from racecap.registration.store import SwitchMove
from racecap.registration.transfer import TransferAnswers

# Who the audit names for the refund of a cheaper event's difference, or of a lost switch's upgrade.
SWITCH_JOB = Director(sub="system-switches", username="Racecap switches (a price difference)")


class SwitchNotAllowed(Forbidden):
    code = "SWITCH_NOT_ALLOWED"


class SwitchGone(Conflict):
    """The switch's hold ran out, or the registration (a member's, in a team) changed meanwhile."""

    code = "SWITCH_GONE"


class TeamSwitchTooLarge(Conflict):
    """A team's move could exceed one transaction's 100 items: refused before anything is held."""

    code = "TEAM_SWITCH_TOO_LARGE"


class SwitchStore(Protocol):
    def get(self, registration_id: str, consistent: bool = True) -> Registration | None: ...

    def next_bib(self, race_id: str, event_id: str) -> int: ...

    def set_pending_switch(
        self, reg: Registration, pending: dict[str, Any] | None, *, hold: str | None = None
    ) -> None: ...

    def switch_items(self, reg: Registration, move: SwitchMove) -> list[TransactItem]: ...

    def team_switch_items(self, members: list[Registration], moves: list[SwitchMove]) -> list[TransactItem]: ...

    def stock_cap(self, race_id: str, event_id: str, entry: str) -> int: ...


class SwitchHolds(Protocol):
    def claim(self, hold: Hold, shards: list[str], avoid: set[str] | None = None) -> Hold | None: ...

    def claim_team(self, hold: Hold, plan: Callable[[dict[str, int], int], dict[str, int]]) -> Hold | int: ...

    def get(self, hold_id: str) -> Hold | None: ...

    def release(
        self, hold: Hold, new_phase: HoldPhase, *, now: datetime | None = None, waitlist: bool = False
    ) -> Any: ...

    def extend_switch(self, hold: Hold, until: datetime) -> bool: ...

    def set_switch_intent(self, hold: Hold, intent_id: str) -> bool: ...


def switch_refund_key(registration_id: str, n: int) -> str:
    return f"switch-{registration_id}-{n}"


def answers_for(
    answers: TransferAnswers | None,
    reg: Registration,
    race: Race,
    target: Event,
    given: Answers | None,
    waiver: WaiverAcceptance | None,
) -> dict[str, Any]:
    """A runner's answers for the target event (its own questions and waiver, their age on race
    day), checked as a registration checks them; None values: nothing there (the old event's go)."""
    if not reg.dateOfBirth:
        raise Conflict(f"{reg.firstName}'s date of birth was deleted (retention): ask the organiser.")
    dob = date.fromisoformat(reg.dateOfBirth)
    check_age(race, target, dob)
    person: dict[str, Any] = {"answers": None, "questionsVersion": None, "waiver": None}
    if answers is None:
        return person
    stored = answers.check(reg.raceId, target.eventId, given)
    if stored is not None:
        person["answers"], person["questionsVersion"] = stored.to_json(), stored.questionsVersion
    version = stored.questionsVersion if stored else None
    age = age_on(dob, date.fromisoformat(race.raceDate))
    person["waiver"] = answers.accept_waiver(reg.raceId, target.eventId, version, waiver, age, datetime.now(UTC))
    return person


def reserved_refund(
    ledger: Ledger, reg: Registration, refund: int, n: int, now: str, reason: str
) -> list[TransactItem]:
    """A cheaper event's difference, reserved in the move's own transaction (the registration's
    sum moves in its update): asked for after, settled by the sweeper if the provider is silent.
    One entry per payment it goes back to (newest first)."""
    if not refund:
        return []
    key = switch_refund_key(reg.registrationId, n)
    entries = [
        LedgerEntry(
            kind="refund", key=key if i == 0 else f"{key}+p{i + 1}", providerId="", amountCents=cents,
            currency=reg.currency, reason=reason, actor=SWITCH_JOB.sub, at=now, status=RefundPhase.PENDING,
            intentId=intent,
        )
        for i, (intent, cents) in enumerate(split(refund, reg, ledger.charges(reg), []))
    ]  # fmt: skip
    return ledger.reserved_entry_items(reg.registrationId, entries)
