"""The registration window on the fakes: the directors' controls (schedule, open now,
close now) and the workflow's tasks (warm, open, close), including the execution that
was replaced but still runs and must change nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from racecap.errors import Conflict
from racecap.window.service import RaceGone, iso_z

from tests.unit.admin_world import DANA, AdminWorld


@pytest.fixture
def w() -> AdminWorld:
    return AdminWorld()


def _current(w: AdminWorld, race_id: str) -> str | None:
    window = w.windows.get(race_id)
    return window.execution if window is not None else None


# -- what a director does ---------------------------------------------------------------------------
def test_scheduling_starts_one_execution_with_the_races_times(w):
    race = w.create(5)
    view = w.window.schedule(DANA, race)
    name = f"{race.raceId}-w1"
    assert view.changed and view.workflow is not None
    assert (view.workflow.execution, view.workflow.mode, view.workflow.status) == (name, "schedule", "RUNNING")
    assert view.workflow.executionArn.endswith(f":execution:RegistrationWindow:{name}")
    assert w.workflow.executions[name]["input"] == {
        "raceId": race.raceId,
        "warmUpAt": iso_z(race.registrationOpensAt - timedelta(minutes=10)),
        "opensAt": iso_z(race.registrationOpensAt),
        # The pre-warm's floor goes back to zero 30 min after the opening, or at the closing.
        "coolDownAt": iso_z(min(race.registrationClosesAt, race.registrationOpensAt + timedelta(minutes=30))),
        "closesAt": iso_z(race.registrationClosesAt),
    }
    again = w.window.schedule(DANA, w.race(race.raceId))  # the same click twice
    assert not again.changed and w.workflow.running() == [name]
    assert w.audit_store.actions(race.raceId) == ["race.create", "window.schedule"]


def test_scheduling_an_open_race_whose_opening_is_ahead_sets_it_back_to_scheduled(w):
    race = w.create(5, open_now=True)
    view = w.window.schedule(DANA, race)
    assert view.registrationState == "SCHEDULED" and w.race(race.raceId).registrationState == "SCHEDULED"


def test_a_window_that_has_closed_cannot_be_scheduled_or_opened(w):
    race = w.create(5)
    w.clock.now = race.registrationClosesAt + timedelta(seconds=1)
    for action in (w.window.schedule, w.window.open_now):
        with pytest.raises(Conflict) as info:
            action(DANA, race)
        assert info.value.fields == {"registrationClosesAt": "In the past."}
    assert w.workflow.executions == {}


def _seen(w: AdminWorld, race_id: str) -> tuple[str, list[str]]:
    view = w.window.view(w.race(race_id))
    return view.phase, view.actions


def test_the_window_says_its_phase_and_offers_only_the_actions_that_change_it(w):
    race = w.create(5)
    # Published, nobody scheduled it: registrationState says SCHEDULED, the window says the truth.
    assert race.registrationState == "SCHEDULED"
    assert _seen(w, race.raceId) == ("NOT_SCHEDULED", ["schedule", "open"])
    view = w.window.schedule(DANA, race)
    assert view.workflow is not None and view.workflow.warmUpAt == race.registrationOpensAt - timedelta(minutes=10)
    assert (view.phase, view.actions) == ("SCHEDULED", ["open", "close"])
    w.clock.now = race.registrationOpensAt - timedelta(minutes=10)
    assert _seen(w, race.raceId) == ("WARMING", ["open", "close"])
    w.clock.now = race.registrationOpensAt
    w.tasks.set_state(race.raceId, "OPEN", f"{race.raceId}-w1")
    assert _seen(w, race.raceId) == ("OPEN", ["close"])
    # Open, but the workflow that closes it on time ended: opening again restarts it.
    w.workflow.finish(f"{race.raceId}-w1", "FAILED")
    assert _seen(w, race.raceId) == ("OPEN", ["open", "close"])
    w.window.close_now(DANA, w.race(race.raceId))
    assert _seen(w, race.raceId) == ("CLOSED", ["schedule", "open"])
    w.clock.now = race.registrationClosesAt
    assert _seen(w, race.raceId) == ("CLOSED", [])


def test_a_draft_is_offered_no_opening_but_one_opened_anyway_can_be_closed(w):
    race = w.create(5, listing="DRAFT")
    assert _seen(w, race.raceId) == ("NOT_SCHEDULED", [])
    w.window.open_now(DANA, race)  # the API still accepts it
    assert _seen(w, race.raceId) == ("OPEN", ["close"])


def test_open_now_opens_at_once_and_replaces_the_schedule(w):
    race = w.create(5)
    w.window.schedule(DANA, race)
    view = w.window.open_now(DANA, w.race(race.raceId))
    race_now = w.race(race.raceId)
    assert (race_now.registrationState, race_now.registrationOpensAt) == ("OPEN", w.clock.now)
    assert view.workflow is not None and view.workflow.mode == "open"
    assert w.workflow.status(f"{race.raceId}-w1") == "ABORTED"
    assert w.workflow.running() == [f"{race.raceId}-w2"]
    assert w.catalog.get_race(race.raceId).status == "OPEN"
    assert not w.window.open_now(DANA, race_now).changed  # already open, closing on time


def test_close_now_closes_and_leaves_nothing_running(w):
    race = w.create(5, open_now=True)
    w.window.open_now(DANA, race)
    view = w.window.close_now(DANA, w.race(race.raceId))
    assert view.registrationState == "CLOSED" and view.workflow is None
    assert w.workflow.running() == [] and _current(w, race.raceId) is None
    assert not w.window.close_now(DANA, w.race(race.raceId)).changed
    assert w.catalog.get_race(race.raceId).status == "CLOSED"


def test_close_now_stops_a_running_execution_of_a_closed_race(w):
    race = w.create(5)
    w.window.schedule(DANA, race)
    w.tasks.set_state(race.raceId, "CLOSED", f"{race.raceId}-w1")
    view = w.window.close_now(DANA, w.race(race.raceId))
    assert view.changed and w.workflow.running() == []


def test_a_lost_stop_leaves_the_old_execution_harmless(w):
    race = w.create(5)
    w.window.schedule(DANA, race)
    w.workflow.fail_next_stop = 1
    w.window.open_now(DANA, w.race(race.raceId))
    old = f"{race.raceId}-w1"
    assert w.workflow.status(old) == "RUNNING"  # StopExecution was lost
    assert w.tasks.run("close", race.raceId, old) == {"raceId": race.raceId, "skipped": "superseded"}
    assert w.race(race.raceId).registrationState == "OPEN"


def test_two_directors_replacing_the_same_window_cannot_both_win(w):
    race = w.create(5)
    first = w.windows.get
    w.windows.get = lambda race_id: None  # type: ignore[method-assign] # both read "no window yet"
    w.window.schedule(DANA, race)
    with pytest.raises(Conflict):
        w.window.open_now(DANA, w.race(race.raceId))
    w.windows.get = first  # type: ignore[method-assign]
    assert _current(w, race.raceId) == f"{race.raceId}-w1"


def test_an_edit_landing_during_a_window_change_is_a_conflict(w):
    race = w.create(5)
    w.races.apply_update(race, {"description": "edited meanwhile"})
    with pytest.raises(Conflict):
        w.window.open_now(DANA, race)  # ``race`` is the copy read before the edit
    assert w.workflow.executions == {}


# -- new times ----------------------------------------------------------------------------------------
def test_new_times_without_a_running_window_start_nothing(w):
    race = w.create(5)
    w.window.follow_new_times(DANA, race)
    assert w.workflow.executions == {}
    w.window.schedule(DANA, race)
    w.workflow.finish(f"{race.raceId}-w1")
    w.window.follow_new_times(DANA, w.race(race.raceId))
    assert list(w.workflow.executions) == [f"{race.raceId}-w1"]


def test_new_times_keep_an_opened_window_open(w):
    race = w.create(5)
    w.window.open_now(DANA, race)
    w.window.follow_new_times(DANA, w.race(race.raceId))
    window = w.windows.get(race.raceId)
    assert window is not None and (window.execution, window.mode) == (f"{race.raceId}-w2", "open")


def test_a_closing_time_moved_into_the_past_closes_at_once(w):
    race = w.create(5)
    w.window.open_now(DANA, race)
    w.clock.now = race.registrationClosesAt + timedelta(minutes=1)
    w.window.follow_new_times(DANA, w.race(race.raceId))
    assert w.race(race.raceId).registrationState == "CLOSED" and w.workflow.running() == []


# -- the view ---------------------------------------------------------------------------------------
def test_the_view_shows_a_never_started_execution_as_unknown(w, monkeypatch):
    race = w.create(5)
    monkeypatch.setattr(w.workflow, "start", lambda name, payload: (_ for _ in ()).throw(RuntimeError("down")))
    with pytest.raises(RuntimeError):
        w.window.schedule(DANA, race)
    view = w.window.view(w.race(race.raceId))
    assert view.workflow is not None and view.workflow.status == "UNKNOWN"
    assert view.status == "NOT_YET_OPEN" and not view.changed


def test_iso_z_is_utc_with_a_z():
    assert iso_z(datetime(2027, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)) == "2027-01-02T03:04:05.678Z"


# -- the workflow's tasks ----------------------------------------------------------------------------
def test_warming_checks_every_shard_and_fills_the_cache(w):
    race = w.create(5, 100)
    event_id = w.admin.get(DANA, race.raceId).events[0].eventId
    w.cache.flag(f"soldout:{race.raceId}:{event_id}", 60)
    assert w.tasks.run("warm", race.raceId) == {"raceId": race.raceId, "events": 2, "shards": 5}
    assert not w.cache.has_flag(f"soldout:{race.raceId}:{event_id}")


def test_warming_refuses_an_event_missing_shards(w):
    race = w.create(100)
    event_id = w.admin.get(DANA, race.raceId).events[0].eventId
    del w.tables.shards[(race.raceId, event_id)]["SHARD#003"]
    with pytest.raises(RuntimeError, match="3 shards, expected 4"):
        w.tasks.warm(race.raceId)


@pytest.mark.parametrize("task", ["warm", "open", "close"])
def test_a_task_for_a_race_that_is_gone_ends_the_workflow(w, task):
    with pytest.raises(RaceGone):
        w.tasks.run(task, "race_gone")


def test_an_unknown_task_is_an_error(w):
    with pytest.raises(ValueError, match="unknown task"):
        w.tasks.run("reopen", "race_x")


def test_open_and_close_are_idempotent(w):
    race = w.create(5)
    opened = w.tasks.run("open", race.raceId)
    assert opened == {"raceId": race.raceId, "registrationState": "OPEN", "version": 2, "changed": True}
    assert w.tasks.run("open", race.raceId)["changed"] is False
    assert w.tasks.run("close", race.raceId)["registrationState"] == "CLOSED"


def test_only_the_current_execution_changes_the_race(w):
    race = w.create(5)
    w.window.schedule(DANA, race)
    assert w.tasks.run("open", race.raceId, f"{race.raceId}-w0") == {"raceId": race.raceId, "skipped": "superseded"}
    assert w.tasks.run("open", race.raceId, f"{race.raceId}-w1")["changed"] is True


def test_a_task_racing_an_edit_retries(w, monkeypatch):
    race = w.create(5)
    w.window.schedule(DANA, race)
    stale = w.races.get_race(race.raceId)
    w.races.apply_update(w.race(race.raceId), {"description": "an edit"})
    monkeypatch.setattr(w.races, "get_race", lambda race_id: stale)  # the task read before the edit
    with pytest.raises(Conflict):  # still the current execution: the ASL retries Conflict
        w.tasks.set_state(race.raceId, "OPEN", f"{race.raceId}-w1")


def test_a_task_racing_a_replacement_changes_nothing(w, monkeypatch):
    race = w.create(5)
    w.window.schedule(DANA, race)
    real = w.races.apply_update

    def replaced_meanwhile(current, changes, also=()):
        monkeypatch.setattr(w.races, "apply_update", real)
        w.window.close_now(DANA, w.race(race.raceId))  # a director closes while the task runs
        return real(current, changes, also)

    monkeypatch.setattr(w.races, "apply_update", replaced_meanwhile)
    assert w.tasks.set_state(race.raceId, "OPEN", f"{race.raceId}-w1") == {
        "raceId": race.raceId,
        "skipped": "superseded",
    }
    monkeypatch.setattr(w.races, "apply_update", real)
    assert w.race(race.raceId).registrationState == "CLOSED"
