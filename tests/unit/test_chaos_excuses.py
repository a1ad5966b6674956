"""The chaos burst accounts for one audit finding only, and only as far as its kill explains it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tools.burst import chaos
from tools.burst.config import BurstConfig, BurstRun

TWICE = "{} registrations got more than one confirmation email"


def _excuses(tmp_path: Path, violations: list[str], stranded: int | None) -> dict[str, str]:
    run = BurstRun(BurstConfig(scenario="chaos"), "http://x", "race_c", [], tmp_path, lambda _m: None)
    timeline = [{"fault": "redis killed and restarted", "detail": {}}]
    if stranded is not None:
        timeline.append({"fault": "email sender killed mid-batch", "detail": {"stranded_after_kill": stranded}})
    chaos._RUNNING["race_c"] = SimpleNamespace(timeline=timeline)  # type: ignore[assignment]
    try:
        return chaos._audit_excuses(run, violations)
    finally:
        chaos._RUNNING.pop("race_c", None)


def test_duplicate_emails_up_to_what_the_email_senders_kill_left_in_flight_are_accounted_for(tmp_path):
    assert set(_excuses(tmp_path, [TWICE.format(2)], stranded=3)) == {TWICE.format(2)}
    assert set(_excuses(tmp_path, [TWICE.format(3)], stranded=3)) == {TWICE.format(3)}


def test_more_duplicates_than_in_flight_no_kill_or_any_other_finding_fail_the_run(tmp_path):
    assert _excuses(tmp_path, [TWICE.format(4)], stranded=3) == {}
    assert _excuses(tmp_path, [TWICE.format(1)], stranded=None) == {}
    assert _excuses(tmp_path, [TWICE.format(1)], stranded=0) == {}
    other = ["1 confirmed registrations have no confirmation email", "event ev0 is oversold: 3 confirmed, cap 2"]
    assert _excuses(tmp_path, other, stranded=10) == {}
