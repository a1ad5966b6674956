"""``LedgerStore`` in memory, on the registration fakes' tables (the same ``transact``)."""

from __future__ import annotations

from collections import Counter

from racecap.aws.transactions import TransactItem
from racecap.ledger.models import OPEN_PHASES, LedgerEntry, RefundPhase
from racecap.ledger.store import counter_moves
from racecap.registration.models import Registration, RegistrationPhase

from tests.fakes.stores import FakeTables, fake_item


class FakeLedger:
    def __init__(self, tables: FakeTables) -> None:
        self.tables = tables
        self.entries: dict[tuple[str, str], LedgerEntry] = {}
        self.paid: dict[tuple[str, str], LedgerEntry] = {}  # payments beyond the entry payment

    @property
    def sums(self) -> Counter[str]:
        """Registration id -> its refunds' sum (ledgerRefundedCents), kept with the tables: the
        cancellation reserves in it through the registration store's item."""
        return self.tables.ledger_sums

    def _add(self, rid: str, cents: int, **more: int) -> None:
        self.sums[rid] += cents
        reg = self.tables.regs.get(rid)
        if reg is not None:
            extra = {k: (getattr(reg, k) or 0) + v for k, v in more.items()}
            self.tables.regs[rid] = reg.model_copy(update={"ledgerRefundedCents": self.sums[rid], **extra})

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

    def reserve_items(
        self, reg: Registration, entry: LedgerEntry, *more: LedgerEntry, confirmed_only: bool = True
    ) -> list[TransactItem]:
        rid = reg.registrationId
        amount = entry.amountCents + sum(e.amountCents for e in more)
        extra = reg.ledgerExtraCents or 0

        def within() -> bool:
            stored = self.tables.regs.get(rid)
            return (
                stored is not None
                and stored.amountCents == reg.amountCents
                and (stored.ledgerExtraCents or 0) == extra
                and (stored.status == RegistrationPhase.CONFIRMED or not confirmed_only)
                and self.sums[rid] <= reg.amountCents + extra - amount
            )

        def add() -> None:
            self._add(rid, amount, ledgerPending=1 + len(more))

        return [fake_item(within, add), self._put_new(rid, entry), *(self._put_new(rid, e) for e in more)]

    def payments(self, registration_id: str) -> list[LedgerEntry]:
        with self.tables.lock:
            found = [e for (rid, k), e in self.paid.items() if rid == registration_id]
        return sorted(found, key=lambda e: e.at)

    def payment_items(self, registration_id: str, entry: LedgerEntry) -> list[TransactItem]:
        k = (registration_id, entry.key)

        def add() -> None:
            reg = self.tables.regs[registration_id]
            extra = (reg.ledgerExtraCents or 0) + entry.amountCents
            self.tables.regs[registration_id] = reg.model_copy(update={"ledgerExtraCents": extra})

        return [
            fake_item(lambda: k not in self.paid, lambda: self.paid.__setitem__(k, entry)),
            fake_item(lambda: registration_id in self.tables.regs, add),
        ]

    def release_items(self, registration_id: str, entry: LedgerEntry, at: str) -> list[TransactItem]:
        k = (registration_id, entry.key)

        def pending() -> bool:
            found = self.entries.get(k)
            return found is not None and found.status == RefundPhase.PENDING

        def refuse() -> None:
            self.entries[k] = self.entries[k].model_copy(update={"status": RefundPhase.REFUSED})

        def give_back() -> None:
            self._add(registration_id, -entry.amountCents, ledgerPending=-1)

        return [fake_item(pending, refuse), fake_item(lambda: registration_id in self.tables.regs, give_back)]

    def _put_new(self, registration_id: str, entry: LedgerEntry) -> TransactItem:
        k = (registration_id, entry.key)
        return fake_item(lambda: k not in self.entries, lambda: self.entries.__setitem__(k, entry))

    def entry_item(self, registration_id: str, entry: LedgerEntry) -> TransactItem:
        return self._put_new(registration_id, entry)

    def refuse_item(self, registration_id: str, entry: LedgerEntry, at: str) -> TransactItem:
        return self.release_items(registration_id, entry, at)[0]

    def outside_items(self, registration_id: str, entry: LedgerEntry) -> list[TransactItem]:
        return [
            fake_item(
                lambda: registration_id in self.tables.regs,
                lambda: self._add(registration_id, entry.amountCents, outsideRefunds=1),
            ),
            self._put_new(registration_id, entry),
        ]

    def settle(self, registration_id: str, refund_key: str, refund_id: str, at: str) -> None:
        with self.tables.lock:
            k = (registration_id, refund_key)
            self.entries[k] = self.entries[k].model_copy(
                update={"status": RefundPhase.SUCCEEDED, "providerId": refund_id}
            )

    def settle_reserved(self, registration_id: str, refund_key: str, refund_id: str, at: str) -> None:
        with self.tables.lock:
            if self.entries[(registration_id, refund_key)].status != RefundPhase.PENDING:
                return
        self.settle(registration_id, refund_key, refund_id, at)
        with self.tables.lock:
            self._add(registration_id, 0, ledgerPending=-1)

    def forget_provider_ids_items(self, registration_id: str, at: str) -> list[TransactItem]:
        def forget(k: tuple[str, str]) -> TransactItem:
            return fake_item(
                lambda: k in self.entries,
                lambda: self.entries.__setitem__(
                    k, self.entries[k].model_copy(update={"providerId": "", "intentId": ""})
                ),
            )

        with self.tables.lock:
            keys = [k for k, e in self.entries.items() if k[0] == registration_id and (e.providerId or e.intentId)]
        return [forget(k) for k in keys]

    def move_items(
        self, registration_id: str, entry: LedgerEntry, to: RefundPhase, *, refund_id: str, at: str, why: str = ""
    ) -> list[TransactItem]:
        k = (registration_id, entry.key)
        frm = RefundPhase(entry.status)

        def still() -> bool:
            found = self.entries.get(k)
            return found is not None and found.status == frm

        def move() -> None:
            update: dict[str, object] = {"status": to}
            if refund_id:
                update["providerId"] = refund_id
            if why:
                update["failureReason"] = why
            self.entries[k] = self.entries[k].model_copy(update=update)

        items = [fake_item(still, move)]
        adds = counter_moves(entry, frm, to)
        if adds:
            sum_delta = adds.pop("ledgerRefundedCents", 0)
            items.append(
                fake_item(
                    lambda: registration_id in self.tables.regs,
                    lambda: self._add(registration_id, sum_delta, **adds),
                )
            )
        return items

    def open_refunds(self, before: str) -> list[tuple[str, LedgerEntry]]:
        with self.tables.lock:
            found = [(rid, e) for (rid, _), e in self.entries.items() if e.status in OPEN_PHASES and e.at < before]
        return sorted(found, key=lambda pair: pair[1].at)
