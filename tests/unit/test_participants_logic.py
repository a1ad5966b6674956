"""Who registered, on the fakes: the directors' list (bib, email and word search, filters,
cursors, the read budget) and the CSV export's lines."""

from __future__ import annotations

import csv
import io

import pytest
from racecap.errors import EventNotFound
from racecap.participants import service as module
from racecap.participants.service import build_export_page
from racecap.setup.models import EventDraft

from tests.unit.admin_world import AdminWorld, register, take

PEOPLE = [("Ann", "Lee"), ("Bo", "Lee"), ("Cy", "Park"), ("=cmd", "Evil"), ("Di", "Park")]


@pytest.fixture
def w() -> AdminWorld:
    return AdminWorld()


@pytest.fixture
def race(w):
    """A race with two events: 5K (Ann, Bo, Cy, =cmd) and 10K (Di); Bo's is cancelled."""
    race = w.create(10, 10, open_now=True)
    ten, five = w.catalog.definition(race.raceId)[1]
    holds = take(w, race.raceId, ten.eventId, 4) + take(w, race.raceId, five.eventId, 1)
    for hold, (first, last) in zip(holds, PEOPLE, strict=True):
        register(w, hold, f"{first.strip('=').lower()}@example.com", first, last)
    bo = holds[1].registrationId  # cancelled by the director, as Cancellations does it
    w.tables.transact([w.cancel_store.begin_cancel_item(bo, "2027-01-01T00:00:00", "dir-1")])
    cancelling = w.regs.get(bo)
    assert cancelling is not None
    w.tables.transact(w.cancel_store.finish_cancel_items(cancelling, holds[1], "re_1", "2027-01-01T00:00:00"))
    return race, ten, five


def _names(page) -> list[str]:
    return [r.firstName for r in page.registrations]


def test_the_list_pages_through_every_event_in_bib_order(w, race):
    r, ten, five = race
    first = w.participants.page(r, [ten, five], limit=3)
    assert _names(first) == ["Ann", "Bo", "Cy"] and first.nextCursor == "0.3"
    second = w.participants.page(r, [ten, five], limit=3, cursor=first.nextCursor)
    assert _names(second) == ["=cmd", "Di"] and second.nextCursor is None


def test_a_number_is_a_bib_in_each_chosen_event(w, race):
    r, ten, five = race
    assert _names(w.participants.page(r, [ten, five], q="1")) == ["Ann", "Di"]
    assert _names(w.participants.page(r, [ten, five], q="1", event_id=five.eventId)) == ["Di"]
    assert _names(w.participants.page(r, [ten, five], q="2", status="CONFIRMED")) == []


def test_a_whole_email_finds_its_confirmed_registration(w, race):
    r, ten, five = race
    assert _names(w.participants.page(r, [ten, five], q=" CY@example.com ")) == ["Cy"]
    assert _names(w.participants.page(r, [ten, five], q="cy@example.com", event_id=five.eventId)) == []
    assert _names(w.participants.page(r, [ten, five], q="nobody@example.com")) == []
    assert _names(w.participants.page(r, [ten, five], q="bo@example.com")) == []  # cancelled: no claim


def test_words_match_names_and_emails_in_any_case(w, race):
    r, ten, five = race
    assert _names(w.participants.page(r, [ten, five], q="park")) == ["Cy", "Di"]
    assert _names(w.participants.page(r, [ten, five], q="LEE ann")) == ["Ann"]
    assert _names(w.participants.page(r, [ten, five], status="CANCELLED")) == ["Bo"]
    assert _names(w.participants.page(r, [ten, five], q="lee", limit=1)) == ["Ann"]


def test_a_search_stops_at_its_read_budget_with_a_cursor_to_go_on(w, race, monkeypatch):
    r, ten, five = race
    monkeypatch.setattr(module, "SEARCH_READ_BUDGET", 2)
    monkeypatch.setattr(module, "_READ_PAGE", 2)
    page = w.participants.page(r, [ten, five], q="park")
    assert _names(page) == [] and page.nextCursor == "0.2"
    page = w.participants.page(r, [ten, five], q="park", cursor=page.nextCursor)
    assert _names(page) == ["Cy"] and page.nextCursor is not None
    found = []
    while page.nextCursor is not None:
        page = w.participants.page(r, [ten, five], q="park", cursor=page.nextCursor)
        found += _names(page)
    assert found == ["Di"]


def test_an_unknown_event_is_not_found(w, race):
    r, ten, five = race
    with pytest.raises(EventNotFound):
        w.participants.page(r, [ten, five], event_id="evt_none")


def _export(w: AdminWorld, race, **kw) -> list[list[str]]:
    r, ten, five = race
    page = build_export_page(w.participants.export_lines(r, [ten, five], **kw), gzip=False)
    assert page.next_cursor is None and isinstance(page.body, str)
    return list(csv.reader(io.StringIO(page.body)))


def test_the_export_has_confirmed_runners_and_defuses_formulas(w, race):
    rows = _export(w, race)
    assert rows[0] == list(module.CSV_COLUMNS)
    assert [(r[0], r[1], r[2], r[6]) for r in rows[1:]] == [
        ("5K", "1", "Ann", "CONFIRMED"),
        ("5K", "3", "Cy", "CONFIRMED"),
        ("5K", "4", "'=cmd", "CONFIRMED"),
        ("10K", "1", "Di", "CONFIRMED"),
    ]


def test_the_export_gives_the_amount_in_the_currencys_own_units(w):
    """A zero-decimal currency's amount is whole yen: 2500 JPY is 2500, not 25.00."""
    race = w.create(5, open_now=True, currency="JPY", events=[EventDraft(name="5K", cap=5, priceCents=2500)])
    (event,) = w.catalog.definition(race.raceId)[1]
    (held,) = take(w, race.raceId, event.eventId, 1)
    register(w, held, "ken@example.com", "Ken", "Sato", amount=2500, currency="JPY")
    page = build_export_page(w.participants.export_lines(race, [event]), gzip=False)
    header, row = list(csv.reader(io.StringIO(str(page.body))))
    assert dict(zip(header, row, strict=True))["amount"] == "2500"
    assert (row[header.index("amountCents")], row[header.index("currency")]) == ("2500", "JPY")


def test_the_export_resumes_after_a_cursor_without_the_header_and_can_include_cancellations(w, race):
    rows = _export(w, race, cursor="0.1", include_cancelled=True)
    assert [(r[2], r[6]) for r in rows] == [
        ("Bo", "CANCELLED"),
        ("Cy", "CONFIRMED"),
        ("'=cmd", "CONFIRMED"),
        ("Di", "CONFIRMED"),
    ]
    assert rows[0][10] == "2027-01-01T00:00:00"


def test_the_export_says_who_cancelled_in_words_in_its_last_fixed_column(w, race):
    # Added after refundFailures: a sheet reading the earlier columns by position keeps working.
    assert module.CSV_COLUMNS[-8:] == (
        "refundFailures",
        "cancelledBy",
        "transfers",
        "transferredAt",
        "switches",
        "switchedTo",
        "deferredTo",
        "deferralCredit",
    )
    rows = _export(w, race, include_cancelled=True)
    who = {row[2]: row[rows[0].index("cancelledBy")] for row in rows[1:]}
    assert who == {"Ann": "", "Bo": "organiser", "Cy": "", "'=cmd": "", "Di": ""}  # never a director's id
    kinds = {
        "runner": "runner",
        "payment-provider": "payment provider",
        "system-sweeper": "Racecap",
        "dir-9": "organiser",
    }
    for by, words in kinds.items():
        assert module._cancelled_by({"status": "CANCELLED", "cancelledBy": by}) == words
    assert module._cancelled_by({"status": "CONFIRMED"}) == ""


def test_the_stats_split_cancellations_by_who_cancelled(w, race):
    r, ten, five = race
    s = w.stats.stats(r, [ten, five])
    by = {e.name: (e.cancelled, e.cancelledByOrganiser, e.cancelledByRunners, e.cancelledByProvider) for e in s.events}
    assert by == {"10K": (0, 0, 0, 0), "5K": (1, 1, 0, 0)}  # Bo's, by the director
    assert (s.totals["cancelled"], s.totals["cancelledByOrganiser"], s.totals["cancelledBySystem"]) == (1, 1, 0)


def _money(rows: list[list[str]]) -> dict[str, tuple[str, ...]]:
    header = rows[0]
    cols = ("amountPaid", "amountRefunded", "ledgerState", "outsideRefunds")
    return {row[2]: tuple(row[header.index(c)] for c in cols) for row in rows[1:]}


def test_the_export_gives_what_was_paid_and_refunded_and_the_ledgers_state(w, race):
    cy = next(reg for reg in w.tables.regs.values() if reg.firstName == "Cy")
    # Cy's payment refunded 5.00 in part outside Racecap (the provider's dashboard): flagged.
    w.tables.regs[cy.registrationId] = cy.model_copy(update={"ledgerRefundedCents": 500, "outsideRefunds": 1})
    money = _money(_export(w, race, include_cancelled=True))
    assert money["Ann"] == ("25.00", "0.00", "PAID", "0")
    assert money["Cy"] == ("25.00", "5.00", "PARTLY_REFUNDED", "1")
    assert money["Bo"] == ("25.00", "25.00", "REFUNDED", "0")  # cancelled before the refund choice: in full


def test_the_list_gives_each_rows_refunds_so_the_console_can_show_what_the_race_keeps(w, race):
    r, ten, five = race
    cy = next(reg for reg in w.tables.regs.values() if reg.firstName == "Cy")
    w.tables.regs[cy.registrationId] = cy.model_copy(update={"ledgerRefundedCents": 500})
    rows = {
        row.firstName: (row.amountCents, row.refundedCents) for row in w.participants.page(r, [ten, five]).registrations
    }
    assert rows["Ann"] == (2500, 0)
    assert rows["Cy"] == (2500, 500)  # a part refund: the race keeps 20.00
    assert rows["Bo"] == (2500, 2500)  # cancelled before the refund choice: in full


def test_the_export_of_a_free_entry_and_of_a_zero_decimal_refund(w):
    race = w.create(5, open_now=True, currency="JPY", events=[EventDraft(name="5K", cap=5, priceCents=2500)])
    (event,) = w.catalog.definition(race.raceId)[1]
    ken, yui = take(w, race.raceId, event.eventId, 2)
    register(w, ken, "ken@example.com", "Ken", "Sato", amount=2500, currency="JPY")
    register(w, yui, "yui@example.com", "Yui", "Mori", amount=0, currency="JPY")
    w.tables.regs[ken.registrationId] = w.tables.regs[ken.registrationId].model_copy(
        update={"ledgerRefundedCents": 700}
    )
    page = build_export_page(w.participants.export_lines(race, [event]), gzip=False)
    money = _money(list(csv.reader(io.StringIO(str(page.body)))))
    assert money["Ken"] == ("2500", "700", "PARTLY_REFUNDED", "0")  # whole yen
    assert money["Yui"] == ("0", "0", "FREE", "0")
