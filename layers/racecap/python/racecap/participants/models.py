"""The directors' list with each runner's answers."""

from __future__ import annotations

from pydantic import Field

from racecap.questions.models import AnswerView, WaiverRecord
from racecap.registration.models import RegistrationPage, RegistrationRow


class AnsweredRow(RegistrationRow):
    """A registration as directors see it, with its answers."""

    questionsVersion: int | None = Field(default=None, description="The version of the questions it answered.")
    answers: list[AnswerView] = Field(default_factory=list, description="In the order they were asked.")
    waiver: WaiverRecord | None = Field(default=None, description="Its waiver acceptance, when the event has one.")
    refundedCents: int = Field(
        default=0,
        description="What its refunds add up to (reserved or made, ours and the provider's dashboard's): "
        "amountCents - refundedCents is what the race keeps.",
    )


class AnsweredPage(RegistrationPage):
    registrations: list[AnsweredRow]  # type: ignore[assignment]  # the rows with their answers
