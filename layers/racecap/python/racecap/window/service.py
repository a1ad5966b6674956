"""A race's registration window: the workflow's tasks, and the directors' controls.

The RegistrationWindow state machine (``statemachines/registration_window.asl.json``)
waits for the warm-up time, warms, waits for the opening, opens, waits for the closing,
closes. Directors drive it through ``WindowControl``:

* **schedule** — start an execution with the race's own times;
* **open now** — registration opens at once, and a new execution closes it on time;
* **close now** — registration closes at once, and no execution is left running.

Each action makes a new execution (or none) *current* in the race's WINDOW item before
it stops the old one. A window task changes the race only while its execution is
current — checked inside the same transaction as the change — so an execution that is
being stopped, or that a lost StopExecution left running, can never undo an action.
Every action is idempotent: repeating it finds the window as asked and changes nothing.

Exception class names are the contract with the ASL (``ErrorEquals``), like the saga
examples in STYLE.md: ``RaceGone`` ends the workflow without retries.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from racecap.audit.service import AuditEntries
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.cache import TieredCache
from racecap.errors import Conflict
from racecap.models import Director
from racecap.observability import logger
from racecap.places.store import Inventory
from racecap.races.catalog import RaceCatalog, race_status, sold_out_flag
from racecap.races.models import Event, PublicRaceStatus, Race, RaceChanges, RegistrationState
from racecap.races.store import RaceStore
from racecap.window.models import WindowAction, WindowPhase, WindowRecord, WindowView, WorkflowView
from racecap.window.store import WindowStore, Workflow

# Caches are warmed and shards checked this long before the opening (the paper's pre-warm).
WARM_UP_BEFORE = timedelta(minutes=10)


# Provisioned environments raised for the opening go back to zero this long after it
# (or at the closing, if sooner): the burst is over by then (window/prewarm.py).
COOL_DOWN_AFTER = timedelta(minutes=30)


class RaceGone(Exception):
    """The race was deleted or never existed: nothing to open or close."""


class WindowTasks:
    def __init__(
        self,
        store: RaceStore,
        inventory: Inventory,
        catalog: RaceCatalog,
        cache: TieredCache,
        windows: WindowStore | None = None,
        opened: Callable[[str, list[Event]], None] | None = None,
    ) -> None:
        self._store = store
        self._inventory = inventory
        self._catalog = catalog
        self._cache = cache
        self._windows = windows
        self._opened = opened  # the opening queue's draw (``OpeningQueue.opened``)

    def run(self, task: str, race_id: str, execution: str | None = None) -> dict[str, object]:
        if task == "warm":
            return self.warm(race_id)
        if task in ("open", "close"):
            return self.set_state(race_id, "OPEN" if task == "open" else "CLOSED", execution)
        raise ValueError(f"unknown task {task!r}")

    def warm(self, race_id: str) -> dict[str, object]:
        """Before the opening: every shard exists, caches hold the race, no stale flags."""
        found = self._store.get_race(race_id)
        if found is None:
            raise RaceGone(race_id)
        race, events = found
        shards = 0
        for event in events:
            usage = self._inventory.usage(race_id, event.eventId, consistent=True)
            if len(usage.shards) != event.shards:
                raise RuntimeError(f"event {event.eventId} has {len(usage.shards)} shards, expected {event.shards}")
            shards += len(usage.shards)
            self._cache.clear_flag(sold_out_flag(race_id, event.eventId))
        self._catalog.invalidate(race_id, race.version)
        self._catalog.get_race(race_id)  # fills the shared tier before the crowd arrives
        logger.info("warmed race", extra={"raceId": race_id, "shards": shards})
        return {"raceId": race_id, "events": len(events), "shards": shards}

    def events(self, race_id: str) -> list[Event]:
        """The race's events as stored now (what closing each event's waitlist needs)."""
        found = self._store.get_race(race_id)
        return found[1] if found else []

    def set_state(self, race_id: str, state: RegistrationState, execution: str | None = None) -> dict[str, object]:
        """Open or close, idempotently, and only as the race's current execution (if named)."""
        found = self._store.get_race(race_id)
        if found is None:
            raise RaceGone(race_id)
        race, events = found
        also: list[TransactItem] = []
        if execution is not None and self._windows is not None:
            if not self._is_current(race_id, execution):
                logger.info("superseded window task skipped", extra={"raceId": race_id, "execution": execution})
                return {"raceId": race_id, "skipped": "superseded"}
            also.append(self._windows.guard_item(race_id, execution))
        if race.registrationState == state:
            if state == "OPEN":
                just_opened(self._opened, race_id, events)  # a retried task: the draw is idempotent
            return {"raceId": race_id, "registrationState": state, "version": race.version, "changed": False}
        try:
            race = self._store.apply_update(race, {"registrationState": state}, also)
        except Conflict:
            if execution is not None and not self._is_current(race_id, execution):
                return {"raceId": race_id, "skipped": "superseded"}
            raise  # an edit landed meanwhile: the ASL retries ``Conflict``
        self._catalog.invalidate(race_id, race.version)
        if state == "OPEN":
            just_opened(self._opened, race_id, events)
        logger.info("registration state changed", extra={"raceId": race_id, "state": state})
        return {"raceId": race_id, "registrationState": state, "version": race.version, "changed": True}

    def _is_current(self, race_id: str, execution: str) -> bool:
        window = self._windows.get(race_id) if self._windows is not None else None
        return window is not None and window.execution == execution


def just_opened(opened: Callable[[str, list[Event]], None] | None, race_id: str, events: list[Event]) -> None:
    """Tell the opening queue at once (it draws its lottery); if that fails, the queue still
    draws when an environment first sees the race open, a second later at most."""
    if opened is None:
        return
    try:
        opened(race_id, events)
    except Exception:
        logger.exception("the opening queue was not told of the opening", extra={"raceId": race_id})


def window_phase(status: PublicRaceStatus, workflow: WorkflowView | None, now: datetime) -> WindowPhase:
    """The window in one word. "Scheduled" needs a workflow that really runs in schedule mode:
    registrationState alone says SCHEDULED for a race that nobody scheduled."""
    if status != "NOT_YET_OPEN":
        return status
    if workflow is None or workflow.status != "RUNNING" or workflow.mode != "schedule":
        return "NOT_SCHEDULED"
    return "WARMING" if now >= workflow.warmUpAt else "SCHEDULED"


def window_actions(race: Race, phase: WindowPhase, workflow: WorkflowView | None, now: datetime) -> list[WindowAction]:
    """What a director is offered: only actions that change something, and none that is refused
    (``_refuse_if_over``). A draft is offered no opening: runners could not reach it."""
    running = workflow is not None and workflow.status == "RUNNING"
    ahead = not race.is_draft and race.registrationClosesAt > now
    actions: list[WindowAction] = []
    if ahead and phase in ("NOT_SCHEDULED", "CLOSED"):
        actions.append("schedule")
    if ahead and (phase != "OPEN" or not running):  # open again: nothing would close it on time
        actions.append("open")
    if race.registrationState == "OPEN" or running:
        actions.append("close")
    return actions


def iso_z(at: datetime) -> str:
    """RFC 3339 in UTC with ``Z``, as Step Functions' Wait ``TimestampPath`` wants it."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class WindowControl:
    def __init__(
        self,
        store: RaceStore,
        windows: WindowStore,
        workflow: Workflow,
        transact: Callable[[list[TransactItem]], None],
        audit: AuditEntries,
        catalog: RaceCatalog,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        opened: Callable[[str, list[Event]], None] | None = None,
    ) -> None:
        self._store = store
        self._windows = windows
        self._workflow = workflow
        self._transact = transact
        self._audit = audit
        self._catalog = catalog
        self._now = clock
        self._opened = opened  # the opening queue's draw (``OpeningQueue.opened``)

    # -- what a director sees ---------------------------------------------------------------
    def view(self, race: Race, changed: bool = False) -> WindowView:
        now = self._now()
        window = self._windows.get(race.raceId)
        workflow = None
        if window is not None and window.execution and window.mode and window.opensAt and window.closesAt:
            opens, started = datetime.fromisoformat(window.opensAt), datetime.fromisoformat(window.startedAt)
            workflow = WorkflowView(
                execution=window.execution,
                executionArn=self._workflow.execution_arn(window.execution),
                mode=window.mode,
                status=self._workflow.status(window.execution),
                opensAt=opens,
                closesAt=datetime.fromisoformat(window.closesAt),
                warmUpAt=max(started, opens - WARM_UP_BEFORE),  # as ``_replace`` started it
                startedAt=started,
                startedBy=window.startedBy,
            )
        status = race_status(race, now)
        phase = window_phase(status, workflow, now)
        return WindowView(
            raceId=race.raceId,
            status=status,
            registrationState=race.registrationState,
            registrationOpensAt=race.registrationOpensAt,
            registrationClosesAt=race.registrationClosesAt,
            workflow=workflow,
            phase=phase,
            actions=window_actions(race, phase, workflow, now),
            changed=changed,
        )

    # -- what a director does -----------------------------------------------------------------
    def schedule(self, director: Director, race: Race) -> WindowView:
        """Follow the race's own times: warm ahead, open at opensAt, close at closesAt."""
        now = self._now()
        self._refuse_if_over(race, now)
        opens, closes = race.registrationOpensAt, race.registrationClosesAt
        if self._running(race.raceId, "schedule", opens, closes):
            return self.view(race)
        changes: RaceChanges = {}
        if now < opens and race.registrationState != "SCHEDULED":
            changes["registrationState"] = "SCHEDULED"  # the plan says: not open yet
        return self._replace(director, race, "schedule", opens, closes, changes)

    def open_now(self, director: Director, race: Race) -> WindowView:
        now = self._now()
        self._refuse_if_over(race, now)
        closes = race.registrationClosesAt
        if race.registrationState == "OPEN" and self._running(race.raceId, None, None, closes):
            return self.view(race)
        changes: RaceChanges = {} if race.registrationState == "OPEN" else {"registrationState": "OPEN"}
        if race.registrationOpensAt > now:
            changes["registrationOpensAt"] = now  # the record says when it really opened
        return self._replace(director, race, "open", now, closes, changes)

    def close_now(self, director: Director, race: Race) -> WindowView:
        """Closed at once; the race's times stay as planned, so "schedule" can resume them."""
        window = self._windows.get(race.raceId)
        running = window is not None and bool(window.execution) and self._status(window) == "RUNNING"
        if race.registrationState == "CLOSED" and not running:
            return self.view(race)
        changes: RaceChanges = {} if race.registrationState == "CLOSED" else {"registrationState": "CLOSED"}
        return self._replace(director, race, None, None, None, changes)

    def follow_new_times(self, director: Director, race: Race) -> None:
        """After the times were edited: a running window restarts with the new ones."""
        window = self._windows.get(race.raceId)
        if window is None or not window.execution or self._status(window) != "RUNNING":
            return
        now = self._now()
        if race.registrationClosesAt <= now:
            self.close_now(director, race)
        elif window.mode == "open":
            self._replace(director, race, "open", now, race.registrationClosesAt, {})
        else:
            self.schedule(director, race)

    # -- how --------------------------------------------------------------------------------------
    def _refuse_if_over(self, race: Race, now: datetime) -> None:
        if race.registrationClosesAt <= now:
            raise Conflict(
                f"Registration was set to close at {iso_z(race.registrationClosesAt)}, which has passed; "
                "set a later registrationClosesAt first.",
                fields={"registrationClosesAt": "In the past."},
            )

    def _running(self, race_id: str, mode: str | None, opens: datetime | None, closes: datetime | None) -> bool:
        window = self._windows.get(race_id)
        if window is None or not window.execution:
            return False
        same = (mode is None or window.mode == mode) and (
            (opens is None or (window.opensAt is not None and datetime.fromisoformat(window.opensAt) == opens))
            and (closes is None or (window.closesAt is not None and datetime.fromisoformat(window.closesAt) == closes))
        )
        return same and self._status(window) == "RUNNING"

    def _status(self, window: WindowRecord) -> str:
        return self._workflow.status(window.execution) if window.execution else "UNKNOWN"

    def _replace(
        self,
        director: Director,
        race: Race,
        mode: str | None,
        opens: datetime | None,
        closes: datetime | None,
        changes: RaceChanges,
    ) -> WindowView:
        now = self._now()
        race_id = race.raceId
        old = self._windows.get(race_id)
        seq = old.seq if old is not None else 0
        window = WindowRecord(raceId=race_id, startedAt=now.isoformat(), startedBy=director.sub)
        execution = None
        if mode is not None and opens is not None and closes is not None:
            execution = f"{race_id}-w{seq + 1}"  # unique per change: a name is never reused
            window = window.model_copy(
                update={
                    "execution": execution,
                    "mode": mode,
                    "opensAt": opens.isoformat(),
                    "closesAt": closes.isoformat(),
                }
            )
        action = {"schedule": "window.schedule", "open": "window.open", None: "window.close"}[mode]
        details = {
            "execution": execution,
            "opensAt": opens,
            "closesAt": closes,
            "registrationState": changes.get("registrationState"),
        }
        # 1. The new execution (or none) becomes current: from here on the old one's tasks no-op.
        items = [
            self._windows.replace_item(race_id, seq, window),
            self._audit.item(director, race_id, action, race_id, **{k: v for k, v in details.items() if v}),
        ]
        try:
            if changes:
                race = self._store.apply_update(race, changes, items)
                self._catalog.invalidate(race_id, race.version)
            else:
                self._transact(items)
        except (ConditionFailed, Conflict) as exc:
            raise Conflict("The registration window was changed meanwhile; reload it and retry.") from exc
        if changes.get("registrationState") == "OPEN":
            found = self._store.get_race(race_id)
            just_opened(self._opened, race_id, found[1] if found else [])
        # 2. Stop the old execution. If this fails, the guard above still keeps it harmless.
        if old is not None and old.execution:
            try:
                self._workflow.stop(old.execution, f"replaced by {action} ({director.username})")
            except Exception:
                logger.exception("could not stop a replaced window execution", extra={"raceId": race_id})
        # 3. Start the new one. A failure here is visible (status UNKNOWN); repeating the
        #    action starts it again.
        if execution is not None and opens is not None and closes is not None:
            warm = max(now, opens - WARM_UP_BEFORE)
            cool = min(closes, max(now, opens) + COOL_DOWN_AFTER)
            self._workflow.start(
                execution,
                {
                    "raceId": race_id,
                    "warmUpAt": iso_z(warm),
                    "opensAt": iso_z(opens),
                    "coolDownAt": iso_z(cool),
                    "closesAt": iso_z(closes),
                },
            )
        logger.info("registration window changed", extra={"raceId": race_id, "action": action, "execution": execution})
        return self.view(race, changed=True)
