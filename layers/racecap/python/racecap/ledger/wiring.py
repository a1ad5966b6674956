"""The ledger capability's composition root (see ``racecap.wiring`` for the rest; as there,
each factory imports its own parts, so a function loads only what it uses)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings
from racecap.wiring import audit_trail, payments, registrations, transact

if TYPE_CHECKING:
    from racecap.ledger.service import Ledger
    from racecap.ledger.store import DynamoLedger


@lru_cache(maxsize=1)
def ledger_store() -> DynamoLedger:
    from racecap.ledger.store import DynamoLedger

    return DynamoLedger(clients.dynamodb(), get_settings().registrations_table)


@lru_cache(maxsize=1)
def ledger() -> Ledger:
    from racecap.ledger.service import Ledger

    return Ledger(ledger_store(), registrations(), payments(), transact, audit_trail())
