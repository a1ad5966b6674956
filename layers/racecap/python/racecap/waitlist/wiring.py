"""The waitlist capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.waitlist.admin import WaitlistAdmin
    from racecap.waitlist.closing import WaitlistClosing
    from racecap.waitlist.offers import OfferBatch, OfferClaims
    from racecap.waitlist.service import Waitlist
    from racecap.waitlist.store import DynamoWaitlist


@lru_cache(maxsize=1)
def waitlist_store() -> DynamoWaitlist:
    from racecap.waitlist.store import DynamoWaitlist

    return DynamoWaitlist(clients.dynamodb(), get_settings().inventory_table)


@lru_cache(maxsize=1)
def waitlist() -> Waitlist:
    """Runners: join behind the opening queue's protections (its challenges, spent in its store),
    with buckets of their own per address, network and device."""
    from racecap.emails.wiring import emails_queue
    from racecap.fairness.buckets import AddressBuckets
    from racecap.fairness.store import DynamoQueueStore
    from racecap.fairness.wiring import signer
    from racecap.races.wiring import catalog
    from racecap.waitlist.service import JOIN_BURST, JOIN_EVERY_S, Waitlist

    s = get_settings()
    buckets = AddressBuckets(clients.cache, rate_per_second=1 / JOIN_EVERY_S, burst=JOIN_BURST, prefix="rc:wait:")
    proofs = DynamoQueueStore(clients.dynamodb(), s.inventory_table)
    return Waitlist(catalog(), waitlist_store(), emails_queue(), buckets, proofs, signer, s.site_url)


@lru_cache(maxsize=1)
def waitlist_admin() -> WaitlistAdmin:
    from racecap.audit.wiring import audit_trail
    from racecap.waitlist.admin import WaitlistAdmin

    return WaitlistAdmin(waitlist_store(), audit_trail(), closing=waitlist_closing())


@lru_cache(maxsize=1)
def offer_batch() -> OfferBatch:
    """The offers of pooled places: run by the hold sweeper after its sweep, and at once when an
    offer is declined or found expired (the claim link)."""
    from racecap.emails.wiring import emails_queue
    from racecap.fairness.wiring import signer
    from racecap.races.wiring import catalog
    from racecap.waitlist.offers import OfferBatch

    s = get_settings()
    return OfferBatch(
        waitlist_store(),
        catalog(),
        emails_queue(),
        signer,
        s.site_url,
        window_s=s.waitlist_offer_window_s,
        came_back=catalog().places_came_back,
        closing=waitlist_closing(),
        registered=waitlist_store().registered,
    )


@lru_cache(maxsize=1)
def offer_claims() -> OfferClaims:
    from racecap.fairness.wiring import signer
    from racecap.holds.wiring import holds
    from racecap.races.wiring import catalog
    from racecap.waitlist.offers import OfferClaims

    store = waitlist_store()
    return OfferClaims(store, catalog(), holds(), offer_batch(), signer, store.registered)


@lru_cache(maxsize=1)
def waitlist_closing() -> WaitlistClosing:
    """Registration closed (the window's task, the director's "close now") or the director closed
    the list: offers and pooled places back to the shards, one email per waiting runner."""
    from racecap.emails.wiring import emails_queue
    from racecap.races.wiring import catalog
    from racecap.waitlist.closing import WaitlistClosing

    return WaitlistClosing(waitlist_store(), catalog(), emails_queue(), came_back=catalog().places_came_back)
