"""Results in pure logic: the CSV checks, places (ties, DNF/DNS/DQ), 50,000 runners, and
the autocomplete (prefix, accents, bib, two characters, ten suggestions)."""

from __future__ import annotations

import random
import time
from datetime import UTC, date, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from racecap.results.dataset import Dataset, fold, format_ms
from racecap.results.ranking import Runner, age_group, rank
from racecap.results.service import CUT_OFF, PROCESSING_GIVES_UP_AFTER, upload_view
from racecap.results.sheet import Entrant, SheetRules, parse_time, read_sheet

import blueprint

RACE_DAY = date(2026, 5, 1)


def runner(
    bib: int, ms: int | None, status: str = "FINISHED", cat: str | None = "F", group: str | None = "30-34"
) -> Runner:
    return Runner(bib, f"First{bib}", f"Last{bib}", cat, 30, group, status, ms, ms)


def test_ties_share_a_place_and_the_next_place_skips() -> None:
    ordered = rank([runner(1, 100), runner(2, 90), runner(3, 100), runner(4, 120), runner(5, 90)])
    assert [(r.bib, r.place) for r in ordered] == [(2, 1), (5, 1), (1, 3), (3, 3), (4, 5)]


def test_dnf_dns_dq_get_no_place_push_nobody_down_and_come_last() -> None:
    ordered = rank([runner(1, 100), runner(2, None, "DNS"), runner(3, 50, "DQ"), runner(4, 200), runner(5, 70, "DNF")])
    assert [(r.bib, r.place, r.gender_place, r.age_group_place) for r in ordered] == [
        (1, 1, 1, 1), (4, 2, 2, 2), (5, None, None, None), (3, None, None, None), (2, None, None, None),
    ]  # fmt: skip


def test_gender_places_per_category_and_age_group_places_per_category_and_group() -> None:
    people = [
        runner(1, 10, cat="F", group="40-44"),
        runner(2, 20, cat="M", group="40-44"),
        runner(3, 30, cat="F", group="40-44"),
        runner(4, 40, cat="M", group="45-49"),
        runner(5, 50, cat=None, group=None),
    ]
    got = {r.bib: (r.place, r.gender_place, r.age_group_place) for r in rank(people)}
    assert got == {1: (1, 1, 1), 2: (2, 1, 1), 3: (3, 2, 2), 4: (4, 2, 1), 5: (5, None, None)}


def test_gun_time_ranking_is_the_directors_choice() -> None:
    a = Runner(1, "A", "A", "F", 30, "30-34", "FINISHED", chip_ms=100, gun_ms=300)
    b = Runner(2, "B", "B", "F", 30, "30-34", "FINISHED", chip_ms=200, gun_ms=250)
    assert [r.bib for r in rank([a, b], "gun")] == [2, 1]
    assert [r.bib for r in rank([a, b], "chip")] == [1, 2]


def test_places_on_50000_runners_are_right_and_fast() -> None:
    rng = random.Random(15)
    statuses = ["FINISHED"] * 95 + ["DNF"] * 3 + ["DNS", "DQ"]
    people = [
        Runner(bib, f"F{bib}", f"L{bib}", rng.choice("FM"), a, age_group(a, 5), rng.choice(statuses), t, t + 30_000)
        for bib in range(1, 50_001)
        for a in [rng.randint(18, 80)]
        for t in [rng.randint(2 * 3600, 2 * 3600 + 600) * 1000]  # 10 minutes of seconds: many ties
    ]
    started = time.process_time()  # CPU time: what the ranking costs, whatever else the machine runs
    ordered = rank(people)
    elapsed = time.process_time() - started
    assert elapsed < 2.0, elapsed
    finishers = [r for r in ordered if r.place is not None]
    assert len(finishers) == sum(1 for r in people if r.status == "FINISHED")
    assert all(r.status != "FINISHED" and r.place is None for r in ordered[len(finishers) :])
    # Against the definition: place = 1 + number strictly faster in the same ranking.
    times = sorted(r.chip_ms or 0 for r in finishers)
    import bisect

    by_cat: dict[str, list[int]] = {}
    by_group: dict[tuple[str | None, str | None], list[int]] = {}
    for r in finishers:
        by_cat.setdefault(r.category or "", []).append(r.chip_ms or 0)
        by_group.setdefault((r.category, r.age_group), []).append(r.chip_ms or 0)
    for v in (*by_cat.values(), *by_group.values()):
        v.sort()
    for r in finishers:
        t = r.chip_ms or 0
        assert r.place == bisect.bisect_left(times, t) + 1
        assert r.gender_place == bisect.bisect_left(by_cat[r.category or ""], t) + 1
        assert r.age_group_place == bisect.bisect_left(by_group[(r.category, r.age_group)], t) + 1
    assert len({r.place for r in finishers}) < len(finishers)  # there were ties to share
    assert [r.place for r in finishers] == sorted(r.place for r in finishers)  # type: ignore[type-var]


# -- the CSV ----------------------------------------------------------------------------------
ENTRANTS = {
    1: Entrant("Zoë", "Łukasiewicz", date(1986, 5, 2)),  # 39 on race day (birthday tomorrow)
    2: Entrant("Ann", "Lee", date(1986, 5, 1)),  # 40 on race day
    3: Entrant("Marc", "Dupont", None),
}


def test_times_parse_to_milliseconds() -> None:
    assert parse_time("2:03:04") == ((2 * 60 + 3) * 60 + 4) * 1000
    assert parse_time("45:10.25") == (45 * 60 + 10) * 1000 + 250
    assert parse_time("12:61:00") is None and parse_time("fast") is None
    assert format_ms(parse_time("1:02:03.4")) == "1:02:03.4"


def test_a_good_sheet_takes_names_and_age_on_race_day_from_registrations() -> None:
    data = b"\xef\xbb\xbfBib,Chip Time,Gun Time,Status,Gender,Split 10K,split_half\r\n1,3:00:00,3:01:00,,f,,1:30:00\r\n\r\n2,3:10:00,3:11:00,dnf,F,1:00:00,\r\n"
    sheet = read_sheet(data, ENTRANTS, SheetRules(), RACE_DAY)
    assert sheet.error_count == 0, sheet.errors
    assert sheet.split_names == ["10K", "half"]
    one, two = sheet.runners
    assert (one.name, one.age, one.age_group, one.category, one.status) == (
        "Zoë Łukasiewicz",
        39,
        "35-39",
        "F",
        "FINISHED",
    )
    assert (two.age, two.age_group, two.status, two.splits) == (40, "40-44", "DNF", [3_600_000, None])


def test_every_bad_line_is_reported_with_its_line_number() -> None:
    data = (
        b"bib,chip_time,status,category\n"
        b"1,3:00:00,,F\n"
        b"7,3:00:00,,F\n"  # unknown bib
        b'"1",3:00:00,,F\n'  # repeated
        b"x,3:00:00,,F\n"  # not a number
        b"2,3h,,Q\n"  # bad time + unknown category: one line, two reasons
        b"3,,,F\n"  # a finisher without a time
    )
    sheet = read_sheet(data, ENTRANTS, SheetRules(), RACE_DAY)
    assert [line for line, _ in sheet.errors] == [3, 4, 5, 6, 7]
    assert "not a time" in sheet.errors[3][1] and "category 'Q'" in sheet.errors[3][1]
    assert sheet.error_count == 5


def test_header_problems_and_empty_files_are_line_one() -> None:
    assert read_sheet(b"", ENTRANTS, SheetRules(), RACE_DAY).errors[0][0] == 1
    sheet = read_sheet(b"number,chip_time\n1,3:00:00\n", ENTRANTS, SheetRules(), RACE_DAY)
    assert {line for line, _ in sheet.errors} == {1} and sheet.error_count == 2  # unknown column, no bib
    assert read_sheet(b"bib,chip_time\n\xff\xfe\n", ENTRANTS, SheetRules(), RACE_DAY).errors[0][0] == 2


# -- autocomplete ---------------------------------------------------------------------------------
def _dataset() -> Dataset:
    people = [
        Runner(1, "Zoë", "Łukasiewicz", "F", 30, "30-34", "FINISHED", 5000, 5000),
        Runner(2, "Anne-Marie", "O'Neil", "F", 30, "30-34", "FINISHED", 4000, 4000),
        Runner(123, "José", "Álvarez", "M", 30, "30-34", "FINISHED", 3000, 3000),
        Runner(12, "Joseph", "Smith", "M", 30, "30-34", "DNF", None, None),
        *(Runner(1000 + i, "Mary", f"Jones{i:02d}", "F", 30, "30-34", "FINISHED", 6000 + i, 0) for i in range(30)),
    ]
    return Dataset({"eventName": "10K"}, rank(people))


def test_autocomplete_prefix_case_and_accent_insensitive() -> None:
    data = _dataset()
    assert [r.bib for r in data.suggest("jos")] == [123, 12]  # placed first, the DNF after
    assert [r.bib for r in data.suggest("ALVA")] == [123]
    assert [r.bib for r in data.suggest("zoe luk")] == [1]
    assert [r.bib for r in data.suggest("lukasiewicz zo")] == [1]  # last name first works too
    assert [r.bib for r in data.suggest("oneil")] == [2] and [r.bib for r in data.suggest("marie")] == [2]
    assert fold("  Straße-Öl  d'Ávila ") == "strasse ol davila"


def test_autocomplete_by_bib_needs_two_characters_and_gives_at_most_ten() -> None:
    data = _dataset()
    assert [r.bib for r in data.suggest("12")] == [123, 12]
    assert data.suggest("j") == [] and data.suggest("1") == []
    many = data.suggest("ma")
    # Anne-Marie (2nd) and the Marys: best placed first, ten at most.
    assert len(many) == 10 and [r.bib for r in many] == [2, *range(1000, 1009)]


def test_a_version_round_trips_through_its_stored_form() -> None:
    data = _dataset()
    again = Dataset.decode(data.encode())
    assert [(r.bib, r.place, r.name) for r in again.runners] == [(r.bib, r.place, r.name) for r in data.runners]
    assert again.filtered("M", None) == data.filtered("M", None)


def test_an_upload_cut_off_mid_check_is_reported_as_to_upload_again_not_as_being_checked() -> None:
    now = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    doc = {"uploadId": "upl_1", "raceId": "race_1", "eventId": "evt_1", "createdAt": now.isoformat()}
    checking = {**doc, "status": "PROCESSING", "startedAt": (now - timedelta(minutes=1)).isoformat()}
    assert upload_view(checking, now).status == "PROCESSING"
    cut_off = {**checking, "startedAt": (now - PROCESSING_GIVES_UP_AFTER - timedelta(seconds=1)).isoformat()}
    view = upload_view(cut_off, now)
    assert (view.status, view.errorCount, [e.reason for e in view.errors]) == ("REJECTED", 1, [CUT_OFF])
    # Finished uploads keep what they became, however old.
    ready = {**cut_off, "status": "READY", "version": 3, "rows": 10}
    assert upload_view(ready, now).status == "READY"


def test_an_upload_still_waiting_after_its_url_expired_says_to_start_again() -> None:
    now = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    waiting = {"uploadId": "upl_1", "raceId": "race_1", "eventId": "evt_1", "status": "WAITING_FOR_FILE"}
    fresh = upload_view({**waiting, "createdAt": (now - timedelta(minutes=5)).isoformat()}, now)
    assert fresh.message is not None and fresh.message.startswith("PUT the CSV file")
    stale = upload_view({**waiting, "createdAt": (now - timedelta(minutes=16)).isoformat()}, now)
    assert (stale.status, stale.message) == (
        "WAITING_FOR_FILE",
        "The upload URL expired before a file arrived: start a new upload.",
    )


def test_the_cut_off_comes_after_the_processor_s_timeout() -> None:
    # Sooner, a check still running could be reported cut off, then install a version anyway.
    timeout = blueprint.function("ResultsProcessor").timeout_s
    assert PROCESSING_GIVES_UP_AFTER.total_seconds() >= timeout + 30


def test_the_upload_url_is_sigv4_with_the_content_type_signed_not_in_its_query(
    placeholder_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A SigV2 presign puts `content-type=` in the query; the browser's CORS preflight (OPTIONS,
    # no Content-Type header) then carries it, and moto's S3 refused the preflight with 403
    # SignatureDoesNotMatch before reading the bucket's CORS rule: the console's upload failed.
    from racecap import clients
    from racecap.results.store import S3Files

    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    clients.aws.cache_clear()
    try:
        url = S3Files(clients.aws("s3"), "uploads-b").upload_url("uploads/r/e/u.csv", "text/csv", 600)
    finally:
        clients.aws.cache_clear()
    query = parse_qs(urlsplit(url).query)
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert "content-type" in query["X-Amz-SignedHeaders"][0].split(";")  # the PUT must send it, as signed
    assert "content-type" not in {k.lower() for k in query} and "Signature" not in query
