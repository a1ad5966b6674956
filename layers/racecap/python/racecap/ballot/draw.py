"""The ballot's draw, pure (no I/O beyond writing the published list), so that anyone holding the
published seed and list can re-compute it (``tools/verify_draw.py``, ``docs/ballot.md``).

The bytes, exactly (the verification script must agree on each):

* **the seed** is 32 random bytes, written as 64 hexadecimal digits. Its bytes, wherever the draw
  uses them, are those 32 bytes (``bytes.fromhex``), never the 64 characters: so a seed typed in
  upper case is the same seed;
* **the commitment** is the SHA-256 of those 32 bytes, as 64 lower-case hex digits
  (``printf %s "$SEED" | xxd -r -p | sha256sum`` gives it too);
* **a ticket's draw key** is HMAC-SHA256 with the seed's 32 bytes as the key and the ticket's id
  encoded as UTF-8 as the message. Tickets are drawn in ascending order of that digest's 64
  lower-case hex digits (the order of its bytes), ties (never seen: 2^-256) by the id.

A ticket is one application, keyed by its application id, or one group, keyed by its group id
with the group's size: a group is drawn as one, so it wins or waits whole.

Sized for a million tickets: a ticket is a tuple (a ``NamedTuple`` adds nothing per instance), the
sort keys live only during the sort, and the winners and the rest are two lists of references to
the same tuples. Measured (``tools/ballot_draw_bench.py``, ``docs/ballot.md``): a million
applications as a million single tickets take 296 MB at the traced peak (ids, tickets, sort keys,
results) and 8.9 s on a 2-core machine at load 7-11.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from itertools import pairwise
from typing import NamedTuple, TextIO

from racecap.errors import SeedRefused, ValidationFailed

SEED_BYTES = 32
LIST_HEADER = ("ticket", "size")


class Ticket(NamedTuple):
    """What is drawn: an application's id and 1, or a group's id and its size."""

    id: str
    size: int = 1


class Drawn(NamedTuple):
    """The draw's outcome: the winners, then everyone else; each in drawn order."""

    winners: list[Ticket]
    rest: list[Ticket]


def new_seed() -> str:
    """A fresh secret seed (64 hex digits): kept secret until the draw, its commitment published."""
    return secrets.token_hex(SEED_BYTES)


def seed_bytes(seed: str) -> bytes:
    try:
        key = bytes.fromhex(seed)
    except ValueError:
        key = b""
    if len(key) != SEED_BYTES:
        raise ValidationFailed("A ballot seed is 64 hexadecimal digits.", fields={"seed": "64 hex digits"})
    return key


def commitment(seed: str) -> str:
    """What the race page publishes before the window opens: SHA-256 of the seed's 32 bytes."""
    return hashlib.sha256(seed_bytes(seed)).hexdigest()


def check_seed(seed: str, committed: str) -> None:
    """Refuse (``SeedRefused``) a revealed seed that is not the one committed to."""
    if not hmac.compare_digest(commitment(seed), committed.strip().lower()):
        raise SeedRefused("This seed is not the one whose commitment the race published; nothing was drawn.")


def tickets_of(applications: Iterable[tuple[str, str | None]]) -> list[Ticket]:
    """The tickets of ``(application id, group id or None)`` pairs: each lone application is a
    ticket of 1; a group's applications are one ticket of its id, sized by how many there are."""
    tickets: list[Ticket] = []
    groups: dict[str, int] = {}
    for application_id, group_id in applications:
        if group_id is None:
            tickets.append(Ticket(application_id))
        else:
            groups[group_id] = groups.get(group_id, 0) + 1
    tickets.extend(Ticket(group_id, size) for group_id, size in groups.items())
    return tickets


def order(seed: str, tickets: Iterable[Ticket]) -> list[Ticket]:
    """Every ticket in drawn order: whatever order they come in, the seed alone decides it."""
    key = seed_bytes(seed)

    def draw_key(ticket: Ticket) -> str:
        # The digest's hex has a fixed length, so hex + id sorts by the digest, then by the id;
        # one str per ticket sorts about twice as fast as a (digest, id) tuple (the sort's
        # one-kind-of-str fast path), and hmac.digest is the one-shot C path.
        return hmac.digest(key, ticket.id.encode(), "sha256").hex() + ticket.id

    drawn = sorted(tickets, key=draw_key)
    # Equal ids sort side by side, so one pass finds a ticket listed twice without a set of ids.
    twice = next((a.id for a, b in pairwise(drawn) if a.id == b.id), None)
    if twice is not None:
        raise ValueError(f"ticket {twice!r} is listed twice: one ticket, one chance")
    return drawn


def winners(drawn: Iterable[Ticket], places: int) -> Drawn:
    """Walk the drawn order giving places: a ticket whose size fits in the places left wins; one
    that does not fit (a group larger than what is left) is passed over whole, never split, and
    the walk goes on, so a single drawn later fills the last place. So a place stays empty only
    when every ticket left is larger than the places left: while a single is among the rest,
    every place is filled. Everyone not winning is the rest, still in drawn order: the waitlist."""
    won: list[Ticket] = []
    rest: list[Ticket] = []
    left = places
    for ticket in drawn:
        if ticket.size < 1:
            raise ValueError(f"ticket {ticket.id!r} has size {ticket.size}: a ticket is at least one runner")
        if ticket.size <= left:
            won.append(ticket)
            left -= ticket.size
        else:
            rest.append(ticket)
    return Drawn(won, rest)


def write_list(tickets: Iterable[Ticket], out: TextIO) -> None:
    """The published list (``ticket,size``; ids only, never an address), sorted by id: the list
    says nothing of the order, and the same tickets always publish byte for byte the same."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(LIST_HEADER)
    writer.writerows(sorted(tickets))
