"""A ballot's rules without any server: its phases, the places it draws, the director's times
(checked in the race's zone, in order, before race day), and the draw job's pages and spreading of
the winners' places over the shards."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from racecap.ballot.admin import _check_times, _utc
from racecap.ballot.job import DrawJob, _rows, list_csv
from racecap.errors import ValidationFailed
from racecap.races.models import BallotSettings, Race

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _race(race_date: str = "2027-04-01", zone: str = "Europe/Berlin") -> Race:
    return Race.model_validate(
        {"raceId": "r1", "ownerId": "o", "name": "Harbour Half", "raceDate": race_date, "timeZone": zone,
         "registrationOpensAt": "2027-02-01T00:00:00+00:00", "registrationClosesAt": "2027-03-01T00:00:00+00:00"}
    )  # fmt: skip


def test_a_ballot_is_upcoming_then_open_then_closed_and_draws_the_cap_less_what_is_kept():
    b = BallotSettings(enabled=True, opensAt=NOW, closesAt=NOW + timedelta(days=2), keptPlaces=30)
    assert [b.phase(NOW + timedelta(seconds=s)) for s in (-1, 0, 2 * 86400 - 1, 2 * 86400)] == [
        "UPCOMING", "OPEN", "OPEN", "CLOSED",
    ]  # fmt: skip
    assert (b.places(100), b.places(20)) == (70, 0)
    assert BallotSettings().phase(NOW) == "NONE"
    assert BallotSettings(enabled=False, opensAt=NOW, closesAt=NOW).phase(NOW) == "NONE"


def test_times_without_an_offset_are_the_races_wall_clock():
    assert _utc(datetime(2027, 1, 10, 9, 0), "Europe/Berlin") == datetime(2027, 1, 10, 8, 0, tzinfo=UTC)
    assert _utc(datetime(2027, 7, 10, 9, 0), "Europe/Berlin") == datetime(2027, 7, 10, 7, 0, tzinfo=UTC)
    aware = datetime(2027, 1, 10, 9, 0, tzinfo=UTC)
    assert _utc(aware, "Asia/Tokyo") == aware


@pytest.mark.parametrize(
    ("opens", "closes", "draws", "field"),
    [
        (NOW - timedelta(minutes=1), NOW + timedelta(days=1), NOW + timedelta(days=2), "opensAt"),
        (NOW + timedelta(days=1), NOW + timedelta(days=1), NOW + timedelta(days=2), "closesAt"),
        (NOW + timedelta(days=1), NOW + timedelta(days=3), NOW + timedelta(days=2), "drawAt"),
        (NOW + timedelta(days=1), NOW + timedelta(days=3), datetime(2027, 4, 1, 0, 30, tzinfo=UTC), "drawAt"),
    ],
)
def test_a_ballots_times_must_be_in_order_ahead_and_before_race_day(opens, closes, draws, field):
    with pytest.raises(ValidationFailed) as refused:
        _check_times(_race(), NOW, opens, closes, draws)
    assert field in refused.value.fields


def test_a_ballot_in_order_passes_with_the_draw_at_the_close():
    _check_times(_race(), NOW, NOW + timedelta(days=1), NOW + timedelta(days=3), NOW + timedelta(days=3))


def test_the_line_pages_read_back_as_written_and_the_list_is_its_pages_end_to_end():
    assert _rows("app_a,\napp_b,grp_1\napp_c,grp_1") == [("app_a", ""), ("app_b", "grp_1"), ("app_c", "grp_1")]
    assert _rows("") == []
    assert list_csv(["ticket,size\napp_a,1", "grp_1,2", ""]) == "ticket,size\napp_a,1\ngrp_1,2\n"
    assert list_csv([]) == ""


def test_the_winners_places_are_spread_over_the_shards_with_room_and_never_beyond_a_cap():
    shards = [("SHARD#001", 10, 4), ("SHARD#000", 10, 0), ("SHARD#002", 5, 5)]
    job = DrawJob(None, None, None, lambda r, e: shards, None, "https://x")  # type: ignore[arg-type]
    takes, caps = job._takes("r1", "e1", 14)
    assert takes == {"SHARD#000": 10, "SHARD#001": 4} and caps == {"SHARD#000": 10, "SHARD#001": 10, "SHARD#002": 5}
    takes, _ = job._takes("r1", "e1", 100)  # more than the room: what there is (and a warning)
    assert sum(takes.values()) == 16
