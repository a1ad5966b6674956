"""The director's side of an event's waitlist on in-memory stores (issue 40): the race's lists as
CSV (each entry's number, place, state and offer, in line order, paged), and the director's
"close the list", which tells each runner still waiting once and keeps addresses out of the trail."""

from __future__ import annotations

import csv
import io

import pytest
from racecap.models import Director
from racecap.participants.service import build_export_page
from racecap.participants.waitlist_export import WAITLIST_CSV_COLUMNS, WaitlistExport
from racecap.races.models import Event, WaitlistSettings
from racecap.waitlist.admin import WaitlistAdmin
from racecap.waitlist.closing import CLOSED_KIND
from racecap.waitlist.models import WaitlistEntry
from racecap.waitlist.rules import iso

from tests.fakes.catalog import FakeAudit
from tests.unit.test_waitlist_offers import EV, NOW, World

DIRECTOR = Director(sub="kim", username="kim")


@pytest.fixture
def w() -> World:
    """Five runners in line (r1..r5): r1 claimed an offer, r2 declined one (so r3 has one out),
    r5 was removed by the director, and late@ joined without confirming yet."""
    w = World()
    w.free(2)
    w.batch.run()  # r1, r2 offered
    w.claims.claim(w.token("r1@example.com"))
    w.claims.decline(w.token("r2@example.com"))  # passed on at once: r3 offered
    w.admin = WaitlistAdmin(w.store, FakeAudit(w.tables), clock=lambda: w.now, closing=w.closing)  # type: ignore[attr-defined]
    w.admin.remove(DIRECTOR, *EV, "r5")  # type: ignore[attr-defined]
    late = WaitlistEntry(
        entryId="late", raceId="race_1", eventId="evt_1", state="PENDING", email="late@example.com",
        firstName="Lat", lastName="E", joinedAt=iso(NOW - 60),  # joined before anyone, never confirmed
    )  # fmt: skip
    w.store.put_pending(late, int(NOW))
    return w


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _export(w: World, events: list[Event] | None = None, cursor: str | None = None) -> str:
    page = build_export_page(WaitlistExport(w.store).lines(w.race, events or [w.event], cursor=cursor), gzip=False)
    assert page.next_cursor is None
    return str(page.body)


def test_the_export_lists_every_entry_in_line_order_with_its_place_state_and_offer(w):
    text = _export(w)
    assert text.splitlines()[0] == ",".join(WAITLIST_CSV_COLUMNS)
    rows = _rows(text)
    assert [(r["email"], r["number"], r["state"], r["offerState"]) for r in rows] == [
        ("r1@example.com", "1", "OFFERED", "CLAIMED"),
        ("r2@example.com", "2", "OFFERED", "DECLINED"),
        ("r3@example.com", "3", "OFFERED", "OFFERED"),
        ("r4@example.com", "4", "WAITING", ""),
        ("r5@example.com", "5", "REMOVED", ""),
        ("late@example.com", "", "PENDING", ""),  # no number until confirmed: after the numbered
    ]
    by = {r["entryId"]: r for r in rows}
    assert by["r4"]["position"] == "1"  # next in line: the head is at 3
    assert {r["position"] for k, r in by.items() if k != "r4"} == {""}  # a place only while WAITING
    assert by["r1"]["claimedAt"] == iso(NOW) and by["r1"]["offerEndedAt"] == ""
    assert by["r2"]["offerEndedAt"] == iso(NOW) and by["r2"]["claimedAt"] == ""
    assert by["r3"]["offerExpiresAt"] == iso(NOW + 2 * 3600)
    assert by["r5"]["removedAt"] == iso(NOW) and by["late"]["confirmedAt"] == ""
    assert {r["event"] for r in rows} == {"10K"} and {r["eventId"] for r in rows} == {"evt_1"}


def test_the_exports_rows_count_what_the_directors_figures_show(w):
    rows = _rows(_export(w))
    view = w.admin.view("race_1", w.event)  # type: ignore[attr-defined]
    count = lambda col, value: sum(1 for r in rows if r[col] == value)  # noqa: E731
    assert count("state", "WAITING") == view.length == 1
    assert count("offerState", "OFFERED") == view.offersOut == 1
    assert count("offerState", "CLAIMED") == view.accepted == 1
    assert count("offerState", "DECLINED") == view.declined == 1


def test_a_later_page_goes_on_after_the_rows_sent_without_a_header_and_skips_events_without_a_list(w):
    empty = Event(raceId="race_1", eventId="evt_0", name="5K", cap=3, priceCents=2500, shards=1,
                  waitlist=WaitlistSettings(enabled=True))  # fmt: skip
    whole = _rows(_export(w, [empty, w.event]))
    rest = _export(w, [empty, w.event], cursor="1.4")
    assert not rest.startswith("event,")
    assert [line.split(",")[1] for line in rest.splitlines()] == ["5", ""]  # r5, then late
    assert len(whole) == 6


def test_a_name_typed_as_a_formula_is_text_in_the_sheet(w):
    w.store.items[(*EV, "r4")] = w.store.items[(*EV, "r4")].model_copy(update={"firstName": "=HYPERLINK(1)"})
    (r4,) = [r for r in _rows(_export(w)) if r["entryId"] == "r4"]
    assert r4["firstName"] == "'=HYPERLINK(1)"


def test_the_directors_close_tells_each_runner_waiting_or_offered_once_and_the_trail_names_no_address(w):
    view = w.admin.close(DIRECTOR, "race_1", w.event)  # type: ignore[attr-defined]
    w.admin.close(DIRECTOR, "race_1", w.event)  # type: ignore[attr-defined]  # a repeat: no second email
    assert view.closed and view.offersOut == 0 and view.pooled == 0
    closing = [m for m in w.emails.sent if m.kind == CLOSED_KIND]  # type: ignore[attr-defined]
    # r4 waiting, r3's offer ended by the close; not the removed or the pending.
    assert {m.to: m.data["offerEnded"] for m in closing} == {"r3@example.com": True, "r4@example.com": False}
    # The sender keeps one message per key (tests/integration: one email in the mailbox).
    assert {m.dedupKey for m in closing} == {f"{CLOSED_KIND}:r3", f"{CLOSED_KIND}:r4"}
    assert w.store.get_offer(*EV, "r3").state == "CLOSED"
    trail = [e for e in w.tables.audit if e["action"] == "waitlist.close"]
    assert len(trail) == 2 and all("@" not in repr(e) for e in w.tables.audit)
