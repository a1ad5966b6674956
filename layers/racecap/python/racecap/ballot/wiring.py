"""The ballot capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.ballot.admin import BallotAdmin
    from racecap.ballot.job import DrawJob
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
    from racecap.questions.wiring import questions
    from racecap.races.wiring import catalog
    from racecap.waitlist.wiring import waitlist_store

    s = get_settings()
    buckets = AddressBuckets(clients.cache, rate_per_second=1 / APPLY_EVERY_S, burst=APPLY_BURST, prefix="rc:ballot:")
    proofs = DynamoQueueStore(clients.dynamodb(), s.inventory_table)
    return Ballots(
        catalog(), ballot_store(), emails_queue(), buckets, proofs, signer, s.site_url, waitlist_store(), questions()
    )


@lru_cache(maxsize=1)
def ballot_admin() -> BallotAdmin:
    from racecap.ballot.admin import BallotAdmin
    from racecap.setup.wiring import race_admin

    return BallotAdmin(race_admin(), ballot_store())


@lru_cache(maxsize=1)
def draw_job() -> DrawJob:
    """``BallotDraw``'s job: each ballot due, drawn and lined up as the event's waitlist."""
    from racecap.ballot.job import DrawJob
    from racecap.emails.wiring import emails_queue
    from racecap.places.store import read_shards
    from racecap.races.wiring import catalog
    from racecap.waitlist.store import DynamoBallotLine

    s = get_settings()

    def shards(race_id: str, event_id: str) -> list[tuple[str, int, int]]:
        found = read_shards(clients.dynamodb(), s.inventory_table, race_id, event_id, consistent=True)
        return [(sh.sk, sh.cap, sh.taken) for sh in found]

    line = DynamoBallotLine(clients.dynamodb(), s.inventory_table)
    return DrawJob(catalog(), ballot_store(), line, shards, emails_queue(), s.site_url)
