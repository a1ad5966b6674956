"""The participants capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from racecap.participants.ballot_export import BallotExport
    from racecap.participants.service import Participants
    from racecap.participants.waitlist_export import WaitlistExport


@lru_cache(maxsize=1)
def participants() -> Participants:
    from racecap.participants.service import Participants
    from racecap.questions.wiring import questions
    from racecap.registration.wiring import registrations

    return Participants(registrations(), questions())


@lru_cache(maxsize=1)
def ballot_export() -> BallotExport:
    from racecap.ballot.wiring import ballot_store
    from racecap.participants.ballot_export import BallotExport
    from racecap.questions.wiring import questions

    return BallotExport(ballot_store(), questions())


@lru_cache(maxsize=1)
def waitlist_export() -> WaitlistExport:
    from racecap.participants.waitlist_export import WaitlistExport
    from racecap.waitlist.wiring import waitlist_store

    return WaitlistExport(waitlist_store())
