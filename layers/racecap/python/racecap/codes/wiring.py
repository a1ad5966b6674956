"""The codes capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.codes.guaranteed import GuaranteedEntries
    from racecap.codes.hold_store import DynamoCodeHolds
    from racecap.codes.models import CodeUses
    from racecap.codes.service import CodesAdmin, Discounts
    from racecap.codes.store import DynamoCodes


@lru_cache(maxsize=1)
def code_holds() -> DynamoCodeHolds:
    """A code's writes on a hold (change it, begin a re-price), beside the hold's own."""
    from racecap.codes.hold_store import DynamoCodeHolds
    from racecap.holds.wiring import code_tally

    return DynamoCodeHolds(clients.dynamodb(), get_settings().inventory_table, code_tally())


@lru_cache(maxsize=1)
def code_store() -> DynamoCodes:
    from racecap.codes.store import DynamoCodes

    s = get_settings()
    return DynamoCodes(clients.dynamodb(), s.races_table, s.inventory_table)


@lru_cache(maxsize=1)
def discounts() -> Discounts:
    from racecap.codes.service import Discounts
    from racecap.holds.wiring import hold_snapshots
    from racecap.payments.wiring import payments
    from racecap.races.wiring import catalog

    return Discounts(code_store(), code_holds(), catalog(), payments(), hold_snapshots())


@lru_cache(maxsize=1)
def codes_admin() -> CodesAdmin:
    from racecap.audit.wiring import audit_trail
    from racecap.codes.service import CodesAdmin
    from racecap.holds.wiring import code_tally
    from racecap.setup.wiring import race_admin

    return CodesAdmin(code_store(), race_admin(), audit_trail(), code_tally())


def race_code_uses(race_id: str) -> list[CodeUses]:
    """Each code of the race with its uses and limit, for the director's stats."""
    from racecap.codes.service import code_uses
    from racecap.holds.wiring import code_tally

    return code_uses(code_store(), code_tally(), race_id)


@lru_cache(maxsize=1)
def guaranteed_entries() -> GuaranteedEntries:
    from racecap.codes.guaranteed import GuaranteedEntries
    from racecap.holds.wiring import hold_service

    return GuaranteedEntries(code_store(), hold_service(), discounts())
