"""The admin API's pure parts: cap changes across shards, export paging, cursors, drafts."""

from __future__ import annotations

import csv
import gzip
import io
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from racecap.auth import director_from_claims
from racecap.aws.keys import shard_sk
from racecap.errors import Unauthorized, ValidationFailed
from racecap.participants import service as participants
from racecap.participants.service import Position, build_export_page, decode_cursor, encode_cursor
from racecap.places.models import Shard
from racecap.places.rules import CapBelowPlacesTaken, plan_cap_change, shard_name, shards_for
from racecap.setup.models import RaceDraft


def _shards(*pairs: tuple[int, int]) -> list[Shard]:
    return [Shard(sk=shard_sk(n), cap=cap, taken=taken) for n, (cap, taken) in enumerate(pairs)]


def test_the_rules_name_shards_as_the_data_layer_does() -> None:
    assert [shard_name(n) for n in (0, 7, 123)] == [shard_sk(n) for n in (0, 7, 123)]


def _apply(shards: list[Shard], new_cap: int, min_shards: int = 1) -> dict[str, int]:
    caps = {s["sk"]: s["cap"] for s in shards}
    for change in plan_cap_change(shards, new_cap, min_shards):
        assert change.old_cap == caps.get(change.sk)
        caps[change.sk] = change.new_cap
    return caps


# -- caps ---------------------------------------------------------------------------------
def test_raising_a_cap_spreads_the_new_places_and_adds_shards() -> None:
    shards = _shards((13, 13), (12, 12))
    caps = _apply(shards, 100, shards_for(100))
    assert sum(caps.values()) == 100
    assert len(caps) == 4  # 100 places -> 4 shards
    assert all(caps[s["sk"]] >= s["cap"] for s in shards)  # raising never takes a place away


def test_lowering_a_cap_takes_places_from_the_roomiest_shards_never_below_taken() -> None:
    shards = _shards((25, 25), (25, 5), (25, 20))
    caps = _apply(shards, 55)
    assert sum(caps.values()) == 55
    for s in shards:
        assert caps[s["sk"]] >= s["taken"]
    assert caps[shard_sk(0)] == 25  # the full shard is left alone


def test_a_cap_can_reach_the_places_taken_but_not_go_below() -> None:
    shards = _shards((10, 4), (10, 3))
    assert sum(_apply(shards, 7).values()) == 7
    with pytest.raises(CapBelowPlacesTaken) as info:
        plan_cap_change(shards, 6, 1)
    assert info.value.taken == 7


def test_an_unchanged_cap_changes_no_shard() -> None:
    assert plan_cap_change(_shards((10, 1), (10, 2)), 20, 2) == []


# -- drafts --------------------------------------------------------------------------------------
def _draft(**over: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "name": "Race",
        "raceDate": (now + timedelta(days=30)).date().isoformat(),
        "registrationOpensAt": now,
        "registrationClosesAt": now + timedelta(days=10),
        "events": [{"name": "10K", "cap": 10, "priceCents": 100}],
        **over,
    }


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"registrationClosesAt": datetime.now(UTC) - timedelta(days=1)}, "registrationClosesAt"),
        ({"raceDate": "2020-01-01"}, "registrationClosesAt"),
        ({"raceDate": "2030-13-01"}, "raceDate"),
        ({"currency": "ABC"}, "currency"),
        ({"timeZone": "Mars/Olympus_Mons"}, "timeZone"),
        ({"timeZone": "Mars/Olympus_Mons", "registrationOpensAt": datetime(2030, 1, 1)}, "registrationOpensAt"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_draft_names_the_field_that_is_wrong(over: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        RaceDraft.model_validate(_draft(**over))
    assert field in {str(e["loc"][0]) for e in info.value.errors()}


def test_currency_is_an_iso_code_as_the_document_lists_it() -> None:
    assert RaceDraft.model_validate(_draft(currency="EUR")).currency == "EUR"
    # The document's enum is upper case; what it refuses, the server refuses too.
    with pytest.raises(ValidationError):
        RaceDraft.model_validate(_draft(currency="eur"))


@pytest.mark.parametrize(
    "over",
    [
        {"holdMinutes": True},
        {"holdMinutes": "10"},
        {"listing": 1},
        {"listing": "listed"},
        {"registrationOpensAt": 1_700_000_000},
        {"name": "   "},
        {"events": [{"name": "5K", "cap": True, "priceCents": 2500}]},
        {"events": [{"name": "5K", "cap": 100, "priceCents": 25.5}]},  # 25.0 is 25, as JSON Schema says
        {"events": [{"name": "5K", "cap": [], "priceCents": 2500}]},
    ],
)
def test_types_are_strict_per_field(over: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        RaceDraft.model_validate(_draft(**over))


# -- who is calling --------------------------------------------------------------------------------
def test_the_director_comes_from_id_or_access_token_claims() -> None:
    d = director_from_claims({"sub": "abc", "cognito:username": "ann", "email": "ann@x.org"})
    assert (d.sub, d.username, d.email) == ("abc", "ann", "ann@x.org")
    assert director_from_claims({"sub": "abc", "username": "ann"}).username == "ann"
    with pytest.raises(Unauthorized):
        director_from_claims({})


# -- export paging ---------------------------------------------------------------------------------------
def _lines(n: int) -> list[tuple[str, str | None]]:
    # Random text, like ids and emails: it does not compress away, so gzip emits as it goes.
    noise = random.Random(5)
    header = [("a,b\r\n", encode_cursor(Position(0, 0)))]
    rows = [(f"{i},{noise.randbytes(24).hex()}\r\n", encode_cursor(Position(0, i))) for i in range(1, n + 1)]
    return [*header, *rows, ("", None)]


def _pages(n: int, gzipped: bool) -> list[str]:
    """Page through n rows the way a client follows nextCursor."""
    lines = _lines(n)
    out: list[str] = []
    start = 0
    while True:
        page = build_export_page(iter(lines[start:]), gzip=gzipped)
        if gzipped:
            assert isinstance(page.body, bytes) and len(page.body) <= participants.MAX_GZIP_BYTES
        text = gzip.decompress(page.body).decode() if gzipped else page.body
        assert isinstance(text, str)
        out.append(text)
        if page.next_cursor is None:
            return out
        start = next(i for i, (_, c) in enumerate(lines) if c == page.next_cursor) + 1


@pytest.mark.parametrize("gzipped", [False, True])
def test_export_pages_add_up_to_exactly_one_file(monkeypatch: pytest.MonkeyPatch, gzipped: bool) -> None:
    monkeypatch.setattr(participants, "MAX_PLAIN_BYTES", 3_000)
    # zlib holds back at most about one deflate block (~16k symbols); the real margin is 512 kB.
    monkeypatch.setattr(participants, "MAX_GZIP_BYTES", 60_000)
    monkeypatch.setattr(participants, "GZIP_PENDING_MARGIN", 25_000)
    pages = _pages(2_000 if not gzipped else 8_000, gzipped)
    assert len(pages) > 1
    rows = list(csv.reader(io.StringIO("".join(pages))))
    assert rows[0] == ["a", "b"]
    assert [int(r[0]) for r in rows[1:]] == list(range(1, (2_000 if not gzipped else 8_000) + 1))
    if not gzipped:
        assert all(len(p) <= 3_000 for p in pages)


def test_a_small_export_is_one_page_without_a_cursor() -> None:
    page = build_export_page(iter(_lines(3)), gzip=False)
    assert page.next_cursor is None and page.lines == 4


def test_an_export_page_stops_before_the_function_runs_out_of_time() -> None:
    page = build_export_page(iter(_lines(5_000)), gzip=False, remaining_s=participants.TIME_MARGIN_S - 1)
    assert page.lines == 1 and page.next_cursor is not None


def test_a_cursor_round_trips_and_garbage_is_a_validation_error() -> None:
    assert decode_cursor(encode_cursor(Position(2, 1234))) == Position(2, 1234)
    assert decode_cursor(None) == Position(0, 0)
    for bad in ("%%%", "bm90LWEtY3Vyc29y", "-1.3", "1.2.3"):
        with pytest.raises(ValidationFailed):
            decode_cursor(bad)


def test_times_without_an_offset_are_the_races_local_times_stored_in_utc() -> None:
    draft = RaceDraft.model_validate(
        _draft(
            timeZone="America/Los_Angeles",
            raceDate="2030-07-04",
            registrationOpensAt=datetime(2030, 1, 1, 9, 0),  # 09:00 in Los Angeles, winter: UTC-8
            registrationClosesAt="2030-07-03T20:00:00",  # summer: UTC-7
        )
    )
    assert draft.registrationOpensAt == datetime(2030, 1, 1, 17, 0, tzinfo=UTC)
    assert draft.registrationClosesAt == datetime(2030, 7, 4, 3, 0, tzinfo=UTC)  # still the 3rd in LA
    # Closing on race day in Los Angeles is fine though it is the next day in UTC; the day after is not.
    with pytest.raises(ValidationError, match="race date"):
        RaceDraft.model_validate(
            _draft(timeZone="America/Los_Angeles", raceDate="2030-07-04", registrationClosesAt="2030-07-05T01:00:00")
        )
