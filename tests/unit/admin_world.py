"""The directors' side on in-memory fakes: the admin, window, catalog, stats and
participants services as ``wiring`` builds them, around fakes of every port they use
(races, shards, windows, audit, workflow, holds, registrations) and a Redis-less cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from racecap.audit.service import AuditTrail
from racecap.holds.models import Attempt, BeginOutcome, Hold, HoldPhase
from racecap.models import Director
from racecap.participants.service import Participants
from racecap.races.catalog import RaceCatalog
from racecap.races.models import Race
from racecap.registration.models import PaidRegistration
from racecap.setup.models import EventDraft, RaceDraft
from racecap.setup.service import RaceAdmin
from racecap.stats.service import RaceStats
from racecap.window.service import WindowControl, WindowTasks

from tests.fakes.attempts import FakeAttempts
from tests.fakes.cancel_store import FakeCancelStore
from tests.fakes.races import FakeAuditStore, FakeInventory, FakeRaceStore, FakeWindows, FakeWorkflow, local_cache
from tests.fakes.stores import FakeHolds, FakeRegistrations, FakeTables

DANA = Director(sub="dir-1", username="dana")
OTTO = Director(sub="dir-2", username="otto")


class Clock:
    """A settable now, shared by the services that take a clock."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


@dataclass
class AdminWorld:
    tables: FakeTables = field(default_factory=FakeTables)
    workflow: FakeWorkflow = field(default_factory=FakeWorkflow)
    clock: Clock = field(default_factory=Clock)

    def __post_init__(self) -> None:
        t = self.tables
        self.races = FakeRaceStore(t)
        self.inventory = FakeInventory(t)
        self.windows = FakeWindows(t)
        self.audit_store = FakeAuditStore(t)
        self.holds = FakeHolds(t)
        self.attempts = FakeAttempts(t)
        self.regs = FakeRegistrations(t)
        self.cancel_store = FakeCancelStore(t)
        self.cache = local_cache()
        self.catalog = RaceCatalog(self.races, self.inventory, self.cache)
        self.audit = AuditTrail(self.audit_store)
        self.window = WindowControl(
            self.races, self.windows, self.workflow, t.transact, self.audit, self.catalog, clock=self.clock
        )
        self.tasks = WindowTasks(self.races, self.inventory, self.catalog, self.cache, self.windows)
        self.admin = RaceAdmin(
            self.races,
            self.inventory,
            transact=t.transact,
            audit=self.audit,
            catalog=self.catalog,
            window=self.window,
            returns=t,  # type: ignore[arg-type]  # a raise's places go to the waitlist's pool first
        )
        self.stats = RaceStats(self.inventory, self.regs, None, self.cache, clock=self.clock)
        self.participants = Participants(self.regs)

    def create(self, *caps: int, director: Director = DANA, open_now: bool = False, **over: Any) -> Race:
        return self.admin.create_race(director.sub, draft(*caps, **over), open_now=open_now, director=director)

    def race(self, race_id: str) -> Race:
        found = self.races.get_race(race_id)
        assert found is not None
        return found[0]


def draft(*caps: int, **over: Any) -> RaceDraft:
    now = datetime.now(UTC).replace(microsecond=0)
    fields: dict[str, Any] = {
        "name": "Harbour Run",
        "location": "Harbour",
        "listing": "LISTED",
        "raceDate": (now + timedelta(days=30)).date().isoformat(),
        "registrationOpensAt": now + timedelta(days=1),
        "registrationClosesAt": now + timedelta(days=10),
        "events": [EventDraft(name=f"{(i + 1) * 5}K", cap=cap, priceCents=2500) for i, cap in enumerate(caps or (10,))],
    }
    return RaceDraft.model_validate(fields | over)


def take(w: AdminWorld, race_id: str, event_id: str, n: int = 1, *, minutes: int = 10) -> list[Hold]:
    """Runners hold ``n`` places of the event (as the hold service claims them)."""
    shards = [s.sk for s in w.inventory.usage(race_id, event_id).shards]
    out = []
    for _ in range(n):
        k = len(w.tables.holds)
        hold = Hold(
            holdId=f"h{k}",
            registrationId=f"r{k}",
            raceId=race_id,
            eventId=event_id,
            status=HoldPhase.HELD,
            createdAt=w.clock.now,
            expiresAt=w.clock.now + timedelta(minutes=minutes),
        )
        placed = w.holds.claim(hold, shards)
        assert placed is not None
        out.append(placed)
    return out


def register(
    w: AdminWorld,
    hold: Hold,
    email: str,
    first: str = "Ann",
    last: str = "Lee",
    *,
    amount: int = 2500,
    currency: str = "USD",
) -> None:
    """Pay for ``hold`` and confirm it, as the registration service and the writer do."""
    attempt = Attempt(f"k-{hold.holdId}", email, first, last, "1990-01-01", amount, currency, w.clock.now.isoformat())
    assert w.attempts.begin_payment(hold, attempt, w.clock.now) == BeginOutcome.STARTED
    w.attempts.mark_queued(hold, attempt, f"pi_{hold.holdId}", w.clock.now, w.clock.now + timedelta(minutes=5))
    paid = PaidRegistration(
        registrationId=hold.registrationId,
        holdId=hold.holdId,
        raceId=hold.raceId,
        eventId=hold.eventId,
        email=email,
        firstName=first,
        lastName=last,
        dateOfBirth="1990-01-01",
        amountCents=amount,
        currency=currency,
        chargeId=f"pi_{hold.holdId}",
        raceName="Harbour Run",
        raceDate="2027-01-01",
        eventName="5K",
        paidAt=w.clock.now.isoformat(),
    )
    bib = w.regs.next_bib(hold.raceId, hold.eventId)
    w.regs.confirm_batch(hold.raceId, hold.eventId, bib, [paid], w.clock.now.isoformat())
