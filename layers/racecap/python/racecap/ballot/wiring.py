"""The ballot capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.ballot.admin import BallotAdmin
    from racecap.ballot.service import Ballots
    from racecap.ballot.store import DynamoBallots


@lru_cache(maxsize=1)
def ballot_store() -> DynamoBallots:
    from racecap.ballot.store import DynamoBallots

    return DynamoBallots(clients.dynamodb(), get_settings().inventory_table)


@lru_cache(maxsize=1)
def ballots() -> Ballots:
    """Runners: apply behind the opening queue's protections (its challenges, spent in its store),
    with buckets of their own per address, network and device."""
    from racecap.ballot.service import APPLY_BURST, APPLY_EVERY_S, Ballots
    from racecap.emails.wiring import emails_queue
    from racecap.fairness.buckets import AddressBuckets
    from racecap.fairness.store import DynamoQueueStore
    from racecap.fairness.wiring import signer
    from racecap.races.wiring import catalog

    s = get_settings()
    buckets = AddressBuckets(clients.cache, rate_per_second=1 / APPLY_EVERY_S, burst=APPLY_BURST, prefix="rc:ballot:")
    proofs = DynamoQueueStore(clients.dynamodb(), s.inventory_table)
    return Ballots(catalog(), ballot_store(), emails_queue(), buckets, proofs, signer, s.site_url)


@lru_cache(maxsize=1)
def ballot_admin() -> BallotAdmin:
    from racecap.ballot.admin import BallotAdmin
    from racecap.setup.wiring import race_admin

    return BallotAdmin(race_admin(), ballot_store())
