"""``LedgerStore`` in memory, on the registration fakes' tables (the same ``transact``)."""

from __future__ import annotations

from collections import Counter

from racecap.dal.transactions import TransactItem
from racecap.domain import Registration, RegistrationPhase
from racecap.ledger.models import LedgerEntry, RefundPhase

from tests.fakes.stores import FakeTables, fake_item


class FakeLedger:
    def __init__(self, tables: FakeTables) -> None:
        self.tables = tables
        self.sums: Counter[str] = Counter()  # registration id -> its refunds' sum (ledgerRefundedCents)
        self.entries: dict[tuple[str, str], LedgerEntry] = {}

    def refunded_cents(self, registration_id: str) -> int:
        with self.tables.lock:
            return self.sums[registration_id]

    def refunds(self, registration_id: str) -> list[LedgerEntry]:
        with self.tables.lock:
            found = [e for (rid, _), e in self.entries.items() if rid == registration_id]
        return sorted(found, key=lambda e: e.at)

    def refund(self, registration_id: str, refund_key: str) -> LedgerEntry | None:
        with self.tables.lock:
            return self.entries.get((registration_id, refund_key))

    def reserve_items(self, reg: Registration, entry: LedgerEntry) -> list[TransactItem]:
        rid = reg.registrationId

        def within() -> bool:
            stored = self.tables.regs.get(rid)
            return (
                stored is not None
                and stored.amountCents == reg.amountCents
                and stored.status == RegistrationPhase.CONFIRMED
                and self.sums[rid] <= reg.amountCents - entry.amountCents
            )

        def add() -> None:
            self.sums[rid] += entry.amountCents

        def put() -> None:
            self.entries[(rid, entry.key)] = entry

        return [fake_item(within, add), fake_item(lambda: (rid, entry.key) not in self.entries, put)]

    def release_items(self, registration_id: str, entry: LedgerEntry, at: str) -> list[TransactItem]:
        k = (registration_id, entry.key)

        def pending() -> bool:
            found = self.entries.get(k)
            return found is not None and found.status == RefundPhase.PENDING

        def refuse() -> None:
            self.entries[k] = self.entries[k].model_copy(update={"status": RefundPhase.REFUSED})

        def give_back() -> None:
            self.sums[registration_id] -= entry.amountCents

        return [fake_item(pending, refuse), fake_item(lambda: registration_id in self.tables.regs, give_back)]

    def settle(self, registration_id: str, refund_key: str, refund_id: str, at: str) -> None:
        with self.tables.lock:
            k = (registration_id, refund_key)
            self.entries[k] = self.entries[k].model_copy(
                update={"status": RefundPhase.SUCCEEDED, "providerId": refund_id}
            )
