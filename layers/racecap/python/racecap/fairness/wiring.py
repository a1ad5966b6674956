"""The fairness capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.fairness.buckets import AddressBuckets
    from racecap.fairness.identity import AddressPrefixes, Client
    from racecap.fairness.queue import OpeningQueue
    from racecap.fairness.tokens import Signer


# -- fairness: who a client is, rate limits, the opening queue ------------------------------
def signer() -> Signer:
    from racecap.fairness.keys import signing_key

    return _signer(signing_key())


@lru_cache(maxsize=2)
def _signer(key: bytes) -> Signer:
    from racecap.fairness.tokens import Signer

    return Signer(key)


def client(headers: Mapping[str, str]) -> Client:
    from racecap.fairness.identity import client_from

    return client_from(headers, signer(), address_prefixes())


@lru_cache(maxsize=1)
def address_prefixes() -> AddressPrefixes:
    from racecap.fairness.identity import AddressPrefixes

    s = get_settings()
    return AddressPrefixes(ipv4=s.address_ipv4_prefix, ipv6=s.address_ipv6_prefix)


@lru_cache(maxsize=1)
def address_buckets() -> AddressBuckets:
    from racecap.fairness.buckets import AddressBuckets

    s = get_settings()
    return AddressBuckets(clients.cache, rate_per_second=s.rate_limit_per_second, burst=s.rate_limit_burst)


def runner_rate_limit(headers: Mapping[str, str]) -> int:
    """The runner API's per-address limit: seconds to wait, 0 to go (``http.make_resolver``)."""
    from racecap.fairness.identity import address_from

    return address_buckets().take(address_from(headers, address_prefixes())).retry_after_s


@lru_cache(maxsize=1)
def opening_queue() -> OpeningQueue:
    from racecap.audit.wiring import audit_trail
    from racecap.cache import shared as cache
    from racecap.fairness.queue import OpeningQueue
    from racecap.fairness.store import DynamoQueueStore
    from racecap.races.wiring import catalog

    store = DynamoQueueStore(clients.dynamodb(), get_settings().inventory_table)
    return OpeningQueue(catalog(), store, cache(), signer, audit=audit_trail)
