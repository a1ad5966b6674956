"""The setup capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from racecap.setup.service import RaceAdmin


@lru_cache(maxsize=1)
def race_admin() -> RaceAdmin:
    from racecap.audit.wiring import audit_trail
    from racecap.aws.wiring import transact
    from racecap.places.wiring import inventory, place_returns
    from racecap.races.wiring import catalog, race_store
    from racecap.setup.service import RaceAdmin
    from racecap.window.wiring import window_control

    return RaceAdmin(
        race_store(),
        inventory(),
        transact=transact,
        audit=audit_trail(),
        catalog=catalog(),
        window=window_control(),
        returns=place_returns(),
    )
