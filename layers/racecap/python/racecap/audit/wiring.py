"""The audit capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

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
