"""The paid-registration message the writer reads, built from a hold."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from racecap.holds.models import (
    Attempt,
    Hold,
)
from racecap.races.models import Event, Race
from racecap.registration.models import (
    PaidRegistration,
    PaidTeam,
)


def registration_message(
    hold: Hold, attempt: Attempt, payment_id: str, race: Race, event: Event, now: datetime
) -> PaidRegistration | PaidTeam:
    """What the writer needs to persist a registration without reading anything else: one
    runner's, or a team's (every member's, written together)."""
    common: dict[str, Any] = {
        "holdId": hold.holdId,
        "raceId": hold.raceId,
        "eventId": hold.eventId,
        "currency": attempt.currency,
        "chargeId": payment_id,
        "raceName": race.name,
        "raceDate": race.raceDate,
        "eventName": event.name,
        "paidAt": now.isoformat(),
    }
    if hold.is_team:
        ids = [m.registrationId for m in attempt.team()]
        return PaidTeam(
            members=[
                PaidRegistration(
                    **common,
                    **m.model_dump(exclude={"stock"}),
                    teamName=attempt.teamName,
                    teamMembers=ids,
                )
                for m in attempt.team()
            ]
        )
    return PaidRegistration(
        **common,
        registrationId=hold.registrationId,
        email=attempt.email,
        firstName=attempt.firstName,
        lastName=attempt.lastName,
        dateOfBirth=attempt.dateOfBirth,
        amountCents=attempt.amountCents,
        answers=attempt.answers,
        questionsVersion=attempt.questionsVersion,
        waiver=attempt.waiver,
        code=hold.code,
        discountCents=hold.discountCents or None,
    )
