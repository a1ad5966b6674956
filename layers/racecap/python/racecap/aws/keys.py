"""The key schema of the data layer's tables, in one place.

Inventory (pk / sk):
  HOLD#<holdId>              / HOLD         a held place; gsi1 = LIVE#<n> / <expiresAt> while
                                            it can still expire, REQUEUE#<n> / <requeueAt> once
                                            paid and queued (sparse: removed once confirmed;
                                            the index carries raceId and eventId only)
  EMAIL#<raceId>#<email>     / EMAIL        at most one per race: the email's claim
  CAP#<raceId>#<eventId>     / SHARD#<nnn>  the cap counter shards
  CAP#<raceId>#<eventId>#OPTION#<questionId>#<optionId> / SHARD#<nnn>  an option's stock (a
                                            T-shirt size), sharded and claimed like the cap


  CODE#<raceId>#<CODE>       / SHARD#<nnn>  a discount code's use counter shards
  BIB#<raceId>#<eventId>     / BIB          next bib to give (bibs start at 1)
  STATS#<raceId>#<eventId>   / STATS        confirmed, revenueCents, cancelled, refundedCents
  STATS#<raceId>#<eventId>   / MIN#<YYYY-MM-DDTHH:MM>  confirmed in that UTC minute
  PULSE#<raceId>             / M#<minute:010d>  the durable copy of one minute of the race's
                                            per-second counts (racecap.pulse; minute = epoch s // 60)
  PULSE-COPY                 / PULSE-COPY   how far the copy has read Redis (and since when
                                            Redis has held the counts): which minutes are gaps
  WAITLIST#<raceId>#<eventId> / LINE        the event's waitlist counters: seq (join numbers given,
                                            at confirmation), head (how far offers have got),
                                            waiting (confirmed entries in line: the length cap's),
                                            pool (freed places kept for the line, still counted
                                            as taken on their shards; pool_<shard> per shard),
                                            offered (offers out), closed (no more offers);
                                            gsi1 = WAITLIST-POOL / <raceId>#<eventId> while it
                                            has places to offer or offers out (sparse)
  WAITLIST#<raceId>#<eventId> / ENTRY#<entryId>  one address's entry on it (entryId: a digest
                                            of race, event and address, so one per address;
                                            never the race's email claim); gsi1 =
                                            WAITLIST-LINE#<raceId>#<eventId> / <seq:010d> while
                                            WAITING (the line in order, for the offer batch)
  WAITLIST#<raceId>#<eventId> / OFFER#<entryId>  the place offered to that entry; gsi1 =
                                            WAITLIST-OFFERS / <expiresAt>#... while OFFERED
  BALLOT#<raceId>#<eventId>  / SEED         the ballot's secret seed and its published commitment
  BALLOT#<raceId>#<eventId>  / DRAW         the draw: the seed revealed, figures, how far it got
  BALLOT#<raceId>#<eventId>  / ORDER#<p>    the drawn line's page p (application ids in order)
  BALLOT#<raceId>#<eventId>  / LIST#<p>     the published list's page p (ticket,size by id)
                                            (the SEED item has gsi1 = BALLOT-DUE / <drawAt>#... until drawn)
  BALLOT#<raceId>#<eventId>  / COUNT#<n>    confirmed applications (and withdrawn), with
                                            d#<YYYY-MM-DD> per day in the race's zone
  BALLOTAPP#<raceId>#<eventId>#<n> / APP#<applicationId>  one application (n: a digest of the id)
  BALLOTEMAIL#<raceId>#<digest> / CLAIM     an address's one application in the race's ballot
Registrations:
  REG#<registrationId>       / REG          gsi1 = EVENT#<raceId>#<eventId> / BIB#<bib:08d>
Races:
  RACE#<raceId>              / RACE         the race; gsi1 = OWNER#<ownerId> / <createdAt>#<raceId>
  RACE#<raceId>              / EVENT#<eventId>  one event of the race
  RACE#<raceId>              / WINDOW       the execution running its registration window
  RACE#<raceId>              / CODE#<CODE>  a discount code's terms (racecap.codes)
  LISTING                    / <raceDate>#<raceId>  published races, for the public list
  LISTING-VERSION            / LISTING-VERSION      moves on with every listing change
Audit:
  RACE#<raceId>              / <at>#<entryId>  one partition per race, oldest first
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from racecap.aws.items import to_item

LIVE_PARTITIONS = 8  # spreads the sweeper's index over 8 GSI partitions


def key(pk: str, sk: str) -> dict[str, Any]:
    return to_item({"pk": pk, "sk": sk})


def hold_pk(hold_id: str) -> str:
    return f"HOLD#{hold_id}"


def hold_key(hold_id: str) -> dict[str, Any]:
    return key(hold_pk(hold_id), "HOLD")


def email_pk(race_id: str, email: str) -> str:
    return f"EMAIL#{race_id}#{email}"


def email_key(race_id: str, email: str) -> dict[str, Any]:
    return key(email_pk(race_id, email), "EMAIL")


def cap_pk(race_id: str, event_id: str) -> str:
    return f"CAP#{race_id}#{event_id}"


def shard_sk(n: int) -> str:
    return f"SHARD#{n:03d}"


def shard_key(race_id: str, event_id: str, shard: str) -> dict[str, Any]:
    return key(cap_pk(race_id, event_id), shard)


def option_counter(event_id: str, question_id: str, option_id: str) -> str:
    """The counter an option's stock is kept under, in place of an event id: the cap's shards,
    their claim and their plan (``places.rules``) serve it unchanged. Ids hold no ``#``."""
    return f"{event_id}#OPTION#{question_id}#{option_id}"


def stock_entry(question_id: str, option_id: str, shard: str) -> str:
    """One option's unit a payment attempt took: ``<questionId>#<optionId>#SHARD#nnn``."""
    return f"{question_id}#{option_id}#{shard}"


def stock_key(race_id: str, event_id: str, entry: str) -> dict[str, Any]:
    question_id, option_id, shard = entry.split("#", 2)
    return shard_key(race_id, option_counter(event_id, question_id, option_id), shard)


def code_pk(race_id: str, code: str) -> str:
    return f"CODE#{race_id}#{code}"


def code_shard_key(race_id: str, code: str, shard: str) -> dict[str, Any]:
    return key(code_pk(race_id, code), shard)


def live_partition(hold_id: str) -> str:
    return _index_partition("LIVE", _partition(hold_id))


def live_partitions() -> list[str]:
    """Every partition ``live_partition`` spreads holds over: what a reader of them queries."""
    return [_index_partition("LIVE", n) for n in range(LIVE_PARTITIONS)]


def requeue_partitions() -> list[str]:
    """Where paid, queued holds were moved in the sweeper's index until issue 38 kept them at
    their expiry (``mark_queued``): still read, so a hold queued before that is never missed."""
    return [_index_partition("REQUEUE", n) for n in range(LIVE_PARTITIONS)]


def _index_partition(family: str, n: int) -> str:
    return f"{family}#{n}"


def _partition(hold_id: str) -> int:
    return int(hashlib.sha256(hold_id.encode()).hexdigest()[:8], 16) % LIVE_PARTITIONS


def bib_counter_key(race_id: str, event_id: str) -> dict[str, Any]:
    return key(f"BIB#{race_id}#{event_id}", "BIB")


def stats_pk(race_id: str, event_id: str) -> str:
    return f"STATS#{race_id}#{event_id}"


def stats_key(race_id: str, event_id: str) -> dict[str, Any]:
    return key(stats_pk(race_id, event_id), "STATS")


def minute_sk(at_iso: str) -> str:
    """``MIN#YYYY-MM-DDTHH:MM`` (UTC) of an ISO timestamp."""
    return "MIN#" + datetime.fromisoformat(at_iso).astimezone(UTC).strftime("%Y-%m-%dT%H:%M")


def pulse_pk(race_id: str) -> str:
    return f"PULSE#{race_id}"


def pulse_minute_sk(minute: int) -> str:
    return f"M#{minute:010d}"


def pulse_copy_key() -> dict[str, Any]:
    return key("PULSE-COPY", "PULSE-COPY")


def reg_pk(registration_id: str) -> str:
    return f"REG#{registration_id}"


def reg_key(registration_id: str) -> dict[str, Any]:
    return key(reg_pk(registration_id), "REG")


def event_bib_pk(race_id: str, event_id: str) -> str:
    return f"EVENT#{race_id}#{event_id}"


def bib_sk(bib: int) -> str:
    return f"BIB#{bib:08d}"


# -- the waitlist (racecap.waitlist): one partition per event, its counters beside its entries --
WAITLIST_LINE_SK = "LINE"


WAITLIST_ENTRY_PREFIX = "ENTRY#"


# The sparse gsi1 partition of the LINE items with pooled places or offers out: the offer
# batch's whole to-do list, one query (a line with nothing to offer is not in it).
WAITLIST_WORK_PARTITION = "WAITLIST-POOL"


WAITLIST_OFFER_PREFIX = "OFFER#"


# The sparse gsi1 partition of the offers out, by expiry: the batch's expired offers, one query.
WAITLIST_OFFERS_PARTITION = "WAITLIST-OFFERS"


def waitlist_queue_partition(race_id: str, event_id: str) -> str:
    """The gsi1 partition of an event's WAITING entries, sorted by join number."""
    return f"WAITLIST-LINE#{race_id}#{event_id}"


def waitlist_queue_sk(seq: int) -> str:
    return f"{seq:010d}"


def waitlist_offer_key(race_id: str, event_id: str, entry_id: str) -> dict[str, Any]:
    return key(waitlist_pk(race_id, event_id), f"{WAITLIST_OFFER_PREFIX}{entry_id}")


def waitlist_pk(race_id: str, event_id: str) -> str:
    return f"WAITLIST#{race_id}#{event_id}"


def waitlist_line_key(race_id: str, event_id: str) -> dict[str, Any]:
    return key(waitlist_pk(race_id, event_id), WAITLIST_LINE_SK)


def waitlist_entry_key(race_id: str, event_id: str, entry_id: str) -> dict[str, Any]:
    return key(waitlist_pk(race_id, event_id), f"{WAITLIST_ENTRY_PREFIX}{entry_id}")


def address_digest(race_id: str, email: str) -> str:
    """An address within a race as keys, rate limits and email deduplication name it: never in clear."""
    return hashlib.sha256(f"{race_id}\n{email}".encode()).hexdigest()[:32]


def waitlist_entry_id(race_id: str, event_id: str, email: str) -> str:
    """An address's entry id on an event's waitlist: the same address always lands on the same
    item (one entry per address, by the key itself), and the id in URLs and the audit trail is
    not the address (as ``address_digest`` names one)."""
    return hashlib.sha256(f"{race_id}\n{event_id}\n{email}".encode()).hexdigest()[:32]


# -- ballots (racecap.ballot): applications spread over shards so a window's opening minute has
# no hot partition; an address's claim in a partition of its own (one application per address per
# race's ballot, not the race's registration claim); the seed and the day counters per event.
BALLOT_APP_SHARDS = 8
BALLOT_COUNT_SHARDS = 4
BALLOT_SEED_SK = "SEED"
BALLOT_COUNT_PREFIX = "COUNT#"
BALLOT_APP_PREFIX = "APP#"
BALLOT_DRAW_SK = "DRAW"
BALLOT_ORDER_PREFIX = "ORDER#"  # the drawn line, a page of application ids per item
BALLOT_LIST_PREFIX = "LIST#"  # the published list (ticket,size sorted by id), a page per item
# The sparse gsi1 partition of ballots still to draw (or whose draw is under way), by draw time:
# the draw job's whole to-do list, one query.
BALLOT_DUE_PARTITION = "BALLOT-DUE"


def ballot_pk(race_id: str, event_id: str) -> str:
    return f"BALLOT#{race_id}#{event_id}"


def ballot_seed_key(race_id: str, event_id: str) -> dict[str, Any]:
    return key(ballot_pk(race_id, event_id), BALLOT_SEED_SK)


def ballot_count_key(race_id: str, event_id: str, shard: int) -> dict[str, Any]:
    return key(ballot_pk(race_id, event_id), f"{BALLOT_COUNT_PREFIX}{shard}")


def ballot_app_shard(application_id: str) -> int:
    return int(hashlib.sha256(application_id.encode()).hexdigest()[:8], 16) % BALLOT_APP_SHARDS


def ballot_app_pk(race_id: str, event_id: str, shard: int) -> str:
    return f"BALLOTAPP#{race_id}#{event_id}#{shard}"


def ballot_app_key(race_id: str, event_id: str, application_id: str) -> dict[str, Any]:
    pk = ballot_app_pk(race_id, event_id, ballot_app_shard(application_id))
    return key(pk, f"{BALLOT_APP_PREFIX}{application_id}")


def ballot_claim_key(race_id: str, email: str) -> dict[str, Any]:
    """An address's one application in a race's ballot, whichever event (the digest, not the address)."""
    return key(f"BALLOTEMAIL#{race_id}#{address_digest(race_id, email)}", "CLAIM")


# -- Races ----------------------------------------------------------------------------------
RACE_SK = "RACE"


EVENT_SK_PREFIX = "EVENT#"


WINDOW_SK = "WINDOW"


LISTING_PK = "LISTING"


LISTING_VERSION = "LISTING-VERSION"


def race_pk(race_id: str) -> str:
    return f"RACE#{race_id}"


def race_key(race_id: str) -> dict[str, Any]:
    return key(race_pk(race_id), RACE_SK)


def event_sk(event_id: str) -> str:
    return f"{EVENT_SK_PREFIX}{event_id}"


def event_key(race_id: str, event_id: str) -> dict[str, Any]:
    return key(race_pk(race_id), event_sk(event_id))


def window_key(race_id: str) -> dict[str, Any]:
    return key(race_pk(race_id), WINDOW_SK)


def owner_pk(owner_id: str) -> str:
    return f"OWNER#{owner_id}"


def listing_sk(race_date: str, race_id: str) -> str:
    return f"{race_date}#{race_id}"


def listing_key(race_date: str, race_id: str) -> dict[str, Any]:
    return key(LISTING_PK, listing_sk(race_date, race_id))


def listing_version_key() -> dict[str, Any]:
    return key(LISTING_VERSION, LISTING_VERSION)


# -- Audit (same partition key as the race it records) ---------------------------------------
def audit_sk(at_iso: str, entry_id: str) -> str:
    return f"{at_iso}#{entry_id}"
