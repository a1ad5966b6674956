"""The console's time-zone and money arithmetic (site/admin/src/zone.js) agrees with the API's.

A race's times are typed and shown in the race's own zone, converted in the browser with Intl;
the API reads a time without an offset in the same zone with Python's zoneinfo
(setup.service). This pins the two against each other for fixed inputs, across daylight
saving changes (a skipped hour, a repeated one) and zones ahead of and behind UTC, and the
amounts in a currency's own units (JPY has none after the point). Runs in the installer's
Node 22 (no sockets)."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

import blueprint
from tests.unit.test_console_srp import NODE

ZONE_JS = blueprint.ROOT / "site" / "admin" / "src" / "zone.js"

WALL_TIMES = [
    ("Europe/Paris", "2027-05-01T09:00"),
    ("America/Denver", "2027-01-15T23:30"),
    ("Asia/Tokyo", "2027-03-31T00:00"),
    ("Australia/Sydney", "2027-10-03T02:30"),  # skipped: clocks go 02:00 -> 03:00
    ("America/New_York", "2027-11-07T01:30"),  # repeated: the first (daylight) 01:30
    ("Asia/Kolkata", "2027-06-01T12:15"),
    ("UTC", "2027-06-01T12:15"),
]


def _node(script: str) -> object:
    if not NODE.exists():
        pytest.fail(f"Node 22 is not installed at {NODE}: run `local/install.sh node`")
    code = f"import * as z from {json.dumps(ZONE_JS.as_uri())};\nconsole.log(JSON.stringify(await ({script})(z)));"
    proc = subprocess.run(
        [str(NODE), "--input-type=module", "-e", code], capture_output=True, text=True, check=False, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _api_instant(zone: str, wall: str) -> str:
    """What the API stores for a time sent without an offset (PriceTierDraft, RaceFields)."""
    local = datetime.fromisoformat(wall).replace(tzinfo=ZoneInfo(zone))
    # A skipped wall time: zoneinfo keeps the digits with the offset before the gap; normalise
    # through UTC as the API's astimezone(UTC) does.
    return local.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_wall_clock_time_in_the_races_zone_is_the_instant_the_api_stores() -> None:
    got = _node(f"(z) => {json.dumps(WALL_TIMES)}.map(([zone, wall]) => z.fromZoneInput(wall, zone))")
    assert got == [_api_instant(zone, wall) for zone, wall in WALL_TIMES]


def test_an_instant_is_shown_as_the_races_wall_clock_time_whatever_the_browsers_zone() -> None:
    instants = ["2027-05-01T07:00:00Z", "2027-01-16T06:30:00Z", "2027-03-30T15:00:00Z", "2027-11-07T06:30:00Z"]
    zones = ["Europe/Paris", "America/Denver", "Asia/Tokyo", "America/New_York"]
    got = _node(
        f"(z) => {json.dumps(list(zip(instants, zones, strict=True)))}.map(([at, zone]) => z.toZoneInput(at, zone))"
    )
    want = [
        datetime.fromisoformat(at).astimezone(ZoneInfo(zone)).strftime("%Y-%m-%dT%H:%M")
        for at, zone in zip(instants, zones, strict=True)
    ]
    assert got == want
    assert want[0] == "2027-05-01T09:00"  # the comparison is not vacuous


def test_a_round_trip_keeps_the_wall_clock_time() -> None:
    got = _node(
        f"(z) => {json.dumps(WALL_TIMES)}.map(([zone, wall]) => z.toZoneInput(z.fromZoneInput(wall, zone), zone))"
    )
    # The skipped 02:30 in Sydney becomes 03:30, as zoneinfo's instant shows it.
    assert got == [
        datetime.fromisoformat(_api_instant(zone, wall)).astimezone(ZoneInfo(zone)).strftime("%Y-%m-%dT%H:%M")
        for zone, wall in WALL_TIMES
    ]
    assert got[3] == "2027-10-03T03:30"


def test_amounts_are_in_the_currencys_own_units() -> None:
    got = _node(
        """(z) => ({
            usd: z.minorFrom('45.00', 'USD'), usdShort: z.minorFrom('45.5', 'USD'), usdWhole: z.minorFrom('45', 'USD'),
            jpy: z.minorFrom('4500', 'JPY'), jpyFraction: z.minorFrom('4500.5', 'JPY'), usdTooFine: z.minorFrom('1.005', 'USD'),
            text: z.minorFrom('abc', 'USD'), showUsd: z.money(2050, 'USD'), showJpy: z.money(4500, 'JPY'),
            inputJpy: z.inputFromMinor(4500, 'JPY'), inputEur: z.inputFromMinor(3599, 'EUR'),
        })"""
    )
    assert got == {
        "usd": 4500,
        "usdShort": 4550,
        "usdWhole": 4500,
        "jpy": 4500,
        "jpyFraction": None,  # NaN: not an amount one can pay
        "usdTooFine": None,
        "text": None,
        "showUsd": "$20.50",
        "showJpy": "¥4,500",
        "inputJpy": "4500",
        "inputEur": "35.99",
    }
