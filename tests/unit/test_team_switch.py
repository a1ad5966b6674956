"""The team switch's rules, without a stack (issue 41, teams): who may switch (the captain, for
the whole team), what it costs or refunds per member, and whether the move fits in one
transaction — counted as the move counts it. The move itself runs on the real stack
(tests/integration/test_team_switches.py)."""

from __future__ import annotations

from typing import Any

import pytest
from racecap.ledger.team_switch import MAX_ITEMS, TeamMoves, _most_writes, move_size, spread_refunds
from racecap.questions.models import StockedChoice
from racecap.registration.models import Registration, RegistrationPhase


def _member(i: int, amount: int = 2500, **over: Any) -> Registration:
    ids = ["r0", "r1", "r2"]
    return Registration(
        registrationId=f"r{i}", holdId="h", raceId="race", eventId="ten", email=f"m{i}@example.com",
        firstName=f"M{i}", lastName="Gull", dateOfBirth="1990-01-01", amountCents=amount, currency="eur",
        chargeId="pi_team", raceName="Harbour Run", raceDate="2027-01-01", eventName="10K", paidAt="2026-11-01",
        teamName="Gulls", teamMembers=ids, shard="SHARD#000", bib=i + 1, status=RegistrationPhase.CONFIRMED,
        confirmedAt="2026-11-01", **over,
    )  # fmt: skip


def _moves() -> TeamMoves:
    return TeamMoves.__new__(TeamMoves)  # the rules below read no collaborator


def test_a_team_of_25_fits_a_dearer_move_and_not_a_cheaper_one_which_reserves_a_refund_each() -> None:
    dearer = move_size(members=25, old_shards=2, units_taken=0, units_released=0, refunds=0)
    cheaper = move_size(members=25, old_shards=2, units_taken=0, units_released=0, refunds=25)
    assert dearer <= MAX_ITEMS < cheaper
    assert move_size(3, 1, 2, 2, 3) == 1 + 9 + 1 + 2 + 1 + 1 + 1 + 1 + 2 + 2 + 3


def test_a_cheaper_events_refund_goes_to_each_member_by_what_they_paid_beyond_the_new_price() -> None:
    team = [_member(0), _member(1), _member(2, amount=2000)]
    assert spread_refunds(team, 1500, 2500) == {"r0": 1000, "r1": 1000, "r2": 500}
    assert spread_refunds(team, 1500, 1500) == {"r0": 1000, "r1": 500}  # never more than the total
    assert spread_refunds(team, 3000, 0) == {}


def test_the_teams_difference_is_paid_once_on_the_captains_card_or_refunded_per_member() -> None:
    team = [_member(i) for i in range(3)]
    price, pay, refunds, said = _moves().difference(team, 4000)
    assert (price, pay, refunds) == (12000, 4500, {})
    assert "3 places" in said
    price, pay, refunds, _ = _moves().difference(team, 1500)
    assert (price, pay, refunds) == (4500, 0, {"r0": 1000, "r1": 1000, "r2": 1000})
    # Under the provider's minimum (EUR 0.50 in all): neither charged nor refunded, and said.
    _, pay, refunds, said = _moves().difference(team, 2510)
    assert (pay, refunds) == (0, {})
    assert "under the smallest payment" in said


@pytest.mark.parametrize(
    ("team", "why"),
    [
        ([], "your captain can switch the whole team"),
        ([_member(0), _member(1, ledgerRefundedCents=500)], "Part of M1's entry was refunded"),
        ([_member(0), _member(1, transferOffer={"n": 1})], "M1's place is offered to another runner"),
        ([_member(0), _member(1, pendingSwitch={"holdId": "x"})], "Another switch of this team"),
        ([_member(0, pendingSwitch={"holdId": "x"}), _member(1)], None),  # the captain's own switch
    ],
)
def test_only_the_captain_switches_a_team_and_not_while_a_member_is_refunded_or_handing_over(
    team: list[Registration], why: str | None
) -> None:
    said = TeamMoves.why_not(team)
    assert (said is None) if why is None else (said is not None and why in said), said


def test_members_choosing_one_option_count_one_write_per_shard_they_can_use() -> None:
    medium = StockedChoice("shirt", "M", "Medium", ("s0", "s1"))
    large = StockedChoice("shirt", "L", "Large", ("s0",))
    assert _most_writes([medium] * 5 + [large] * 3) == 2 + 1
    assert _most_writes([medium]) == 1
    assert _most_writes([]) == 0


def test_a_member_alone_is_not_a_team_the_captain_moves() -> None:
    member = _member(1)
    moves = _moves()
    moves._regs = None  # type: ignore[assignment]  # not read: a member's answer needs no read
    assert moves.members(member) == []
    alone = member.model_copy(update={"teamMembers": None})
    assert moves.members(alone) is None
