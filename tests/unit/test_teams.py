"""Team entries on fakes: all places or none, every email claimed together, one payment for
the team, every member a registration of their own, a member's cancellation their share."""

from __future__ import annotations

import json
import re

import pytest
from racecap.errors import EmailAlreadyRegistered, NotEnoughPlaces, SoldOut, ValidationFailed
from racecap.holds.models import HoldPhase
from racecap.holds.service import hold_id_for
from racecap.places.rules import plan_team
from racecap.races.catalog import sold_out_flag
from racecap.races.rules import MAX_TEAM_SIZE, team_range_problem
from racecap.registration.models import TeamRegistrationRequest

from tests.fakes.catalog import open_race
from tests.unit.core_world import DIRECTOR, World


@pytest.fixture
def world() -> World:
    return World()


def _team_race(world: World, shards: list[int], sizes: tuple[int, int] = (2, 8)) -> None:
    race, events = open_race(caps=(sum(shards),))
    events = [events[0].model_copy(update={"teamMinSize": sizes[0], "teamMaxSize": sizes[1], "shards": len(shards)})]
    world.catalog.add(race, events)
    world.tables.add_event("race-1", "ev0", shards)


def _team(n: int, *, card: str | None = "pm_card_visa", born: str = "1990-01-01") -> TeamRegistrationRequest:
    return TeamRegistrationRequest.model_validate(
        {
            "teamName": "Harbour Harriers",
            "members": [
                {"email": f"m{i}@example.com", "firstName": f"M{i}", "lastName": "Lee", "dateOfBirth": born}
                for i in range(n)
            ],
            **({"paymentMethod": card} if card else {}),
        }
    )


def test_a_team_spreads_over_the_roomiest_shards_first():
    assert plan_team({"SHARD#000": 2, "SHARD#001": 5, "SHARD#002": 2}, 6) == {"SHARD#001": 5, "SHARD#000": 1}
    assert plan_team({"SHARD#000": 2, "SHARD#001": 2, "SHARD#002": 2}, 6) == dict.fromkeys(
        ("SHARD#000", "SHARD#001", "SHARD#002"), 2
    )
    with pytest.raises(ValueError, match="not enough room"):
        plan_team({"SHARD#000": 2}, 3)


def test_a_team_of_six_on_two_places_per_shard_takes_them_all_and_five_left_takes_none(world):
    _team_race(world, [2, 2, 2])
    world.tables.shards[("race-1", "ev0")]["SHARD#002"][1] = 1  # five left
    with pytest.raises(NotEnoughPlaces) as short:
        world.hold_service.hold_team("race-1", "ev0", 6)
    assert short.value.left == 5 and world.tables.taken("race-1", "ev0") == 1
    assert sold_out_flag("race-1", "ev0") not in world.flags.flags  # a smaller team still fits

    world.tables.shards[("race-1", "ev0")]["SHARD#002"][1] = 0
    created = world.hold_service.hold_team("race-1", "ev0", 6)
    assert (created.places, created.totalCents) == (6, 6 * 2500)
    hold = world.holds.get(created.holdId)
    assert hold is not None and hold.shardTakes == {"SHARD#000": 2, "SHARD#001": 2, "SHARD#002": 2}
    assert len(set(hold.memberIds)) == 6 and {hold_id_for(m) for m in hold.memberIds} == {hold.holdId}
    # Each id goes in links and in the confirmation email's SES tags: letters, digits, _ and - only.
    assert all(re.fullmatch(r"reg_[A-Za-z0-9_-]+", m) for m in hold.memberIds)

    world.hold_service.release(created.holdId)  # every place comes back together
    assert world.tables.taken("race-1", "ev0") == 0
    world.tables.shards[("race-1", "ev0")] = {"SHARD#000": [2, 2], "SHARD#001": [2, 2], "SHARD#002": [2, 2]}
    with pytest.raises(SoldOut):  # with none left it is sold out, as for a single place
        world.hold_service.hold_team("race-1", "ev0", 2)


def test_team_sizes_outside_the_events_range_or_past_the_transaction_limit_are_refused(world):
    _team_race(world, [10], sizes=(3, 4))
    for places in (2, 5):
        with pytest.raises(ValidationFailed) as bad:
            world.hold_service.hold_team("race-1", "ev0", places)
        assert bad.value.fields == {"places": "Between 3 to 4."}
    assert team_range_problem(2, MAX_TEAM_SIZE + 1, 100) == {
        "teamMaxSize": f"At most {MAX_TEAM_SIZE}: a larger team does not fit in one DynamoDB transaction."
    }
    assert "teamMinSize" in team_range_problem(None, 4, 100)
    assert team_range_problem(3, 4, 3) == {"teamMaxSize": "A team cannot be larger than the event's 3 places."}


def test_a_team_whose_one_email_is_taken_charges_nothing_and_keeps_its_places(world):
    _team_race(world, [5])
    single = world.hold_service.hold("race-1", "ev0")
    from tests.unit.core_world import request

    world.registration.register(single.holdId, request("m1@example.com"))
    created = world.hold_service.hold_team("race-1", "ev0", 3)
    with pytest.raises(EmailAlreadyRegistered) as taken:
        world.registration.register_team(created.holdId, _team(3))
    assert taken.value.fields == {"members.1.email": "Already registered for this race."}
    assert "Member 2 (m1@example.com)" in taken.value.message
    hold = world.holds.get(created.holdId)
    assert hold is not None and hold.status == HoldPhase.HELD and world.tables.taken("race-1", "ev0") == 4
    # Its intent came first and is recorded on no hold: never handed out, never charged.
    assert (
        hold.intentId is None
        and [i for i in world.payments.succeeded if i.metadata.get("holdId") == created.holdId] == []
    )
    # No member's email was kept claimed by the refused attempt.
    assert ("race-1", "m0@example.com") not in world.tables.emails


def test_a_member_outside_the_age_rule_is_named_before_anything_is_claimed(world):
    _team_race(world, [5])
    created = world.hold_service.hold_team("race-1", "ev0", 2)
    request = _team(2)
    request.members[1].dateOfBirth = request.members[1].dateOfBirth.replace(year=2024)
    with pytest.raises(ValidationFailed) as young:
        world.registration.register_team(created.holdId, request)
    assert list(young.value.fields or {}) == ["members.1.dateOfBirth"]
    assert young.value.message.startswith("Member 2: ")
    assert world.tables.emails == {}


def test_a_team_pays_once_and_the_writer_confirms_every_member_together(world):
    _team_race(world, [2, 2])
    created = world.hold_service.hold_team("race-1", "ev0", 3)
    accepted = world.registration.register_team(created.holdId, _team(3))
    assert accepted.status == "QUEUED"
    (intent,) = [i for i in world.payments.intents if i.metadata.get("holdId") == created.holdId]
    assert intent.amount_cents == 3 * 2500 and intent.metadata["places"] == "3"
    hold = world.holds.get(created.holdId)
    assert hold is not None
    # Queued, not yet written: each member's registration id already answers, as a single's does.
    assert world.registration.status(hold.memberIds[2])[0].status == "QUEUED"
    (message,) = world.queue.sent
    assert [m["registrationId"] for m in json.loads(message.model_dump_json())["members"]] == hold.memberIds

    assert world.write_queued() == []
    regs = [world.regs.get(r) for r in hold.memberIds]
    assert sorted(r.bib for r in regs if r) == [1, 2, 3]
    assert {(r.teamName, r.amountCents, r.chargeId) for r in regs if r} == {("Harbour Harriers", 2500, intent.id)}
    assert sorted(r.shard or "" for r in regs if r) == ["SHARD#000", "SHARD#000", "SHARD#001"]
    assert len(world.emails.sent) == 3  # one confirmation each

    # Delivered again (SQS at least once): nothing changes.
    world.queue.sent.append(message)
    assert world.write_queued() == []
    assert len([r for r in world.tables.regs.values() if r.holdId == hold.holdId]) == 3

    # One member cancelled with a full refund: their share, their place back on their shard.
    view = world.cancellations.cancel(DIRECTOR, world.catalog.definition("race-1")[0], hold.memberIds[1])
    assert view.refundedCents == 2500
    assert [(r.intent_id, r.amount_cents) for r in world.payments.refunds] == [(intent.id, 2500)]
    assert world.tables.taken("race-1", "ev0") == 2
    others = [world.regs.get(r) for r in (hold.memberIds[0], hold.memberIds[2])]
    assert [r.status for r in others if r] == ["CONFIRMED", "CONFIRMED"]


def test_a_free_team_is_queued_without_any_payment(world):
    race, events = open_race(caps=(4,), price_cents=0)
    world.catalog.add(race, [events[0].model_copy(update={"teamMinSize": 2, "teamMaxSize": 4})])
    created = world.hold_service.hold_team("race-1", "ev0", 2)
    accepted = world.registration.register_team(created.holdId, _team(2, card=None))
    assert (accepted.status, accepted.amountCents) == ("QUEUED", 0)
    assert world.payments.intents == []
    assert world.write_queued() == []
    assert len(world.tables.regs) == 2


def _finisher(bib: int, team: str | None, ms: int | None, status: str = "FINISHED"):
    from racecap.results.ranking import Runner

    return Runner(bib, f"R{bib}", "Lee", None, None, None, status, ms, ms, team=team)


def test_team_standings_add_each_teams_best_k_times_and_list_short_teams_last():
    from racecap.results.ranking import team_standings

    runners = [
        _finisher(1, "Gulls", 1000), _finisher(2, "Gulls", 1600), _finisher(3, "Gulls", 9000),
        _finisher(4, "Terns", 1200), _finisher(5, "Terns", 1300),
        _finisher(6, "Crabs", 1100), _finisher(7, "Crabs", None, "DNF"),
        _finisher(8, None, 900),
        _finisher(9, "Eels", 1250), _finisher(10, "Eels", 1250),
    ]  # fmt: skip
    standings = team_standings(runners, scored=2)
    assert [(t.place, t.team, t.total_ms, t.scored) for t in standings] == [
        (1, "Eels", 2500, [9, 10]),
        (1, "Terns", 2500, [4, 5]),  # an equal sum shares the place
        (3, "Gulls", 2600, [1, 2]),
        (None, "Crabs", None, [6]),  # one finisher of the two that count: no place
    ]
    assert standings[2].members == [1, 2, 3]


def test_a_results_version_keeps_the_team_from_the_registration_and_older_versions_still_read():
    from racecap.results.dataset import Dataset

    data = Dataset({"eventName": "Relay"}, [_finisher(1, "Gulls", 1000)])
    assert Dataset.decode(data.encode()).runners[0].team == "Gulls"
    # A version stored before teams existed has one field fewer per row: read with no team.
    import gzip

    old = json.loads(gzip.decompress(data.encode()))
    old["rows"] = [row[:-1] for row in old["rows"]]
    assert Dataset.decode(gzip.compress(json.dumps(old).encode())).runners[0].team is None


def test_a_team_holds_sort_key_in_the_sweepers_index_is_its_expiry_old_ones_sort_right_after_it():
    from datetime import UTC, datetime

    from racecap.holds.models import Hold
    from racecap.holds.store import live_sort_key

    at = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
    team = Hold(holdId="hold_t", registrationId="reg_t", raceId="r", eventId="e", status=HoldPhase.HELD,
                createdAt=at, expiresAt=at, places=6)  # fmt: skip
    assert live_sort_key(team, at) == at.isoformat()
    # One written with the old suffix is still found by the "expired by now" range once passed.
    assert at.isoformat() + "#T6" <= "2026-05-01T09:00:01+00:00"
