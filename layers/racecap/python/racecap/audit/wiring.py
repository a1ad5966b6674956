"""audit.wiring."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.audit.service import AuditTrail


@lru_cache(maxsize=1)
def audit_trail() -> AuditTrail:
    from racecap.audit.service import AuditTrail
    from racecap.audit.store import DynamoAudit

    return AuditTrail(DynamoAudit(clients.dynamodb(), get_settings().audit_table))
