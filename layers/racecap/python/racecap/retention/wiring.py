"""The retention capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.retention.service import RetentionPurge


@lru_cache(maxsize=1)
def retention_purge() -> RetentionPurge:
    from racecap.audit.wiring import audit_trail
    from racecap.aws.wiring import transact
    from racecap.races.wiring import race_store
    from racecap.retention.service import RetentionPurge
    from racecap.retention.store import DynamoRetention

    s = get_settings()
    store = DynamoRetention(clients.dynamodb(), s.races_table, s.inventory_table, s.registrations_table)
    from racecap.ledger.store import DynamoLedger

    ledger = DynamoLedger(clients.dynamodb(), s.registrations_table)
    return RetentionPurge(store, race_store(), transact, audit_trail(), ledger)
