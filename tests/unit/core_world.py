"""A registration core on in-memory fakes: the services as wiring builds them, around
fakes of every port (stores, queues, payments, races, flags, audit)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from racecap.holds.service import HoldService
from racecap.ledger.cancellations import Cancellations
from racecap.ledger.service import Ledger
from racecap.models import Director
from racecap.questions.service import Questions
from racecap.registration.models import RegistrationRequest
from racecap.registration.service import RegistrationService
from racecap.registration.sweeper import HoldSweeper
from racecap.registration.writer import RegistrationWriter

from tests.fakes.attempts import FakeAttempts
from tests.fakes.cancel_store import FakeCancelStore
from tests.fakes.catalog import FakeAudit, FakeCatalog, FakeFlags, open_race
from tests.fakes.code_holds import FakeCodeHolds
from tests.fakes.hints import FakeHoldHints
from tests.fakes.ledger import FakeLedger
from tests.fakes.payments import FakePaymentProvider
from tests.fakes.questions import FakeQuestions
from tests.fakes.races import FakeInventory, local_cache
from tests.fakes.stores import FakeHolds, FakeQueue, FakeRegistrations, FakeTables, FakeWriterPace

DIRECTOR = Director(sub="dir-1", username="dana")


@dataclass
class World:
    tables: FakeTables = field(default_factory=FakeTables)
    payments: FakePaymentProvider = field(default_factory=FakePaymentProvider)
    queue: FakeQueue = field(default_factory=FakeQueue)
    emails: FakeQueue = field(default_factory=FakeQueue)
    flags: FakeFlags = field(default_factory=FakeFlags)
    pace: FakeWriterPace = field(default_factory=FakeWriterPace)
    hints: FakeHoldHints = field(default_factory=FakeHoldHints)  # the hold's snapshots (Redis)

    def __post_init__(self) -> None:
        self.catalog = FakeCatalog(self.tables)
        self.holds = FakeHolds(self.tables)
        self.attempts = FakeAttempts(self.tables)
        self.code_holds = FakeCodeHolds(self.tables)
        self.regs = FakeRegistrations(self.tables)
        self.cancel_store = FakeCancelStore(self.tables)  # the ledger's writes on the same registrations
        self.question_store = FakeQuestions(self.tables)
        self.questions = Questions(
            self.question_store, self.tables.transact, FakeAudit(self.tables), local_cache(), FakeInventory(self.tables)
        )
        self.hold_service = HoldService(self.catalog, self.holds, self.flags, self.hints)  # type: ignore[arg-type]
        self.registration = RegistrationService(
            self.catalog,  # type: ignore[arg-type]
            self.attempts,
            self.regs,
            self.payments,
            self.queue,
            pace=self.pace,
            questions=self.questions,
            hold_hints=self.hints,  # type: ignore[arg-type]
        )
        self.sweeper = HoldSweeper(self.attempts, self.payments, self.registration, self.catalog, self.flags)  # type: ignore[arg-type]
        self.writer = RegistrationWriter(self.regs, self.emails, pace=self.pace)  # type: ignore[arg-type]
        self.ledger_store = FakeLedger(self.tables)
        self.cancellations = Cancellations(
            self.cancel_store,
            self.holds,
            self.payments,
            self.emails,
            self.tables.transact,
            FakeAudit(self.tables),
            self.catalog,  # type: ignore[arg-type]
            self.ledger_store,
            returns=self.tables,  # where freed places go (the waitlist's pool first: places.returns)
        )
        self.ledger = Ledger(
            self.ledger_store, self.cancel_store, self.payments, self.tables.transact, FakeAudit(self.tables)
        )

    def race(self, race_id: str = "race-1", caps: tuple[int, ...] = (2,), **over: object) -> str:
        self.catalog.add(*open_race(race_id, caps=caps, **over))  # type: ignore[arg-type]
        return race_id

    def write_queued(self) -> list[str]:
        """Deliver what the API queued to the writer, as SQS would; returns failed message ids."""
        sent = str(int(time.time() * 1000) - 1500)  # SQS's SentTimestamp: queued 1.5 s ago
        records = [
            {"messageId": f"m{i}", "body": m.model_dump_json(), "attributes": {"SentTimestamp": sent}}
            for i, m in enumerate(self.queue.sent)
        ]
        self.queue.sent.clear()
        return self.writer.process(records)


def request(email: str = "ann@example.com", card: str | None = "pm_card_visa") -> RegistrationRequest:
    return RegistrationRequest(
        email=email, firstName="Ann", lastName="Lee", dateOfBirth="1990-01-01", paymentMethod=card
    )
