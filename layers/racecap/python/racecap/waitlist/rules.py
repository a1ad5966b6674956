"""The waitlist's arithmetic, pure."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

# An unconfirmed entry lives this long (TTL deletes it; the confirm link says "join again").
PENDING_DAYS = 7
# The link to an entry works until a day after the race (nothing left to wait for), and at
# least as long as a pending entry lives.
LINK_DAYS_AFTER_RACE = 1


def position(seq: int, head: int) -> int:
    """A waiting runner's place: their join number minus how far offers have got (``head``),
    read from two numbers rather than by counting the entries ahead (a line of thousands costs
    one read). Someone ahead who left still counts until the offers pass their number."""
    return max(1, seq - head)


def link_expiry(race_date: str, now: float) -> int:
    try:
        last = datetime.combine(date.fromisoformat(race_date), datetime.min.time(), UTC)
        expires = (last + timedelta(days=LINK_DAYS_AFTER_RACE)).timestamp()
    except ValueError:
        expires = 0.0
    return int(max(expires, now + PENDING_DAYS * 86400))


def iso(epoch: float) -> str:
    """An instant as entries store it (UTC, ISO 8601)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat()
