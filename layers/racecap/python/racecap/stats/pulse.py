"""The opening second by second, for the director (issue 42): the counts ``racecap.pulse`` keeps
in Redis, their durable copy in DynamoDB, and the series a live view or a replay reads.

The copy runs with the hold sweeper, every minute, whether or not anyone watches: each
race-minute Redis was written in (the ``pulse:minutes`` set) becomes one item
(``PULSE#<race>`` / ``M#<minute>``, the minute's counts as a map), written whole, so copying a
minute again (a late flush added to it) is the same write. A minute is copied once it is two
minutes old: a handler flushes as its invocation ends, seconds after the count.

A minute nobody can vouch for is a gap, never a zero: the reader takes a minute from Redis
while it holds it, else from the copy; with neither, the minute is zero only if Redis has held
counts since before it (``pulse:since``, set by the first copy after Redis starts empty) or the
copy has read past it; a minute lost with a Redis that restarted empty before it was copied is
recorded as a gap by the next copy, and a minute not copied while Redis cannot be read is a gap
until it can.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from pydantic import Field

from racecap import pulse
from racecap.aws.items import from_item, query_all, to_item, values
from racecap.aws.keys import pulse_copy_key, pulse_minute_sk, pulse_pk
from racecap.models import Model
from racecap.observability import logger, metrics
from racecap.pulse import KEEP_S
from racecap.races.models import Event, Race

if TYPE_CHECKING:
    import redis

# The longest span one read covers (six hours of seconds): a replay of a whole day is read in
# parts, so no request reads more than 360 minutes.
MAX_SPAN_S = 6 * 3600
DEFAULT_SPAN_S = 600  # the live view's ten minutes
SINCE_KEY = "pulse:since"
KEEP_GAPS = 200  # the copy's state keeps the newest gap ranges (a Redis restart is one)


class PulseCount(Model):
    t: int = Field(description="The second, as Unix epoch seconds (UTC).")
    eventId: str = Field(description="The event ('-' for a count that names none: a 429 before any route).")
    name: str = Field(description="What was counted: one of the view's names.")
    n: int


class PulseGap(Model):
    start: int = Field(description="First second with no counts anyone can vouch for (epoch s).")
    end: int = Field(description="The second after the gap (epoch s).")


class PulseEvent(Model):
    eventId: str
    name: str
    cap: int


class PulseView(Model):
    raceId: str
    timeZone: str = Field(description="The race's zone: show every second in it.")
    start: int = Field(description="The first second covered (epoch s).")
    end: int = Field(description="The second after the last one covered (epoch s); never after asOf.")
    asOf: int = Field(description="When this was read (epoch s).")
    names: list[str] = Field(description="What is counted, in the order a chart shows them.")
    events: list[PulseEvent]
    counts: list[PulseCount] = Field(description="Every non-zero count, oldest first; a second not here is 0.")
    gaps: list[PulseGap] = Field(description="Spans whose counts were lost or cannot be read now: not zeros.")


MinuteCounts = dict[str, int]  # field ("<second>|<event>|<name>") -> n


class RedisPulse:
    """The counts while Redis holds them (``racecap.pulse``'s layout)."""

    def __init__(self, client: Callable[[], redis.Redis]) -> None:
        self._client = client

    def read(self, race_id: str, minutes: Iterable[int]) -> tuple[dict[int, MinuteCounts], int | None]:
        """Each minute's counts (an empty dict: none) and the minute since which Redis holds
        counts (None: not set yet). Raises what redis raises when it cannot be read."""
        wanted = list(minutes)
        pipe = self._client().pipeline(transaction=False)
        for m in wanted:
            pipe.hgetall(pulse.minute_key(race_id, m))
        pipe.get(SINCE_KEY)
        *hashes, since = pipe.execute()
        counts = {m: {str(k): int(v) for k, v in h.items()} for m, h in zip(wanted, hashes, strict=True)}
        return counts, int(since) if since is not None else None

    def since(self, minute: int) -> int:
        """The minute since which Redis holds counts: set to ``minute`` if it was not."""
        client = self._client()
        client.set(SINCE_KEY, minute, nx=True)
        return int(client.get(SINCE_KEY) or minute)

    def written(self) -> list[tuple[str, int]]:
        """The race-minutes written and not copied yet."""
        members = self._client().smembers(pulse.MINUTES_SET)
        return [pulse.parse_member(str(m)) for m in members]  # type: ignore[union-attr]

    def minute(self, race_id: str, minute: int) -> MinuteCounts:
        raw = self._client().hgetall(pulse.minute_key(race_id, minute))
        return {str(k): int(v) for k, v in raw.items()}  # type: ignore[union-attr]

    def copied(self, race_id: str, minute: int) -> None:
        self._client().srem(pulse.MINUTES_SET, pulse.minutes_member(race_id, minute))


class DynamoPulseCopies:
    """The durable copy: one item per race and minute, and the copy's state."""

    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def put_minute(self, race_id: str, minute: int, counts: MinuteCounts) -> None:
        self._db.put_item(
            TableName=self._table,
            Item=to_item({"pk": pulse_pk(race_id), "sk": pulse_minute_sk(minute), "c": counts}),
        )

    def minutes(self, race_id: str, first: int, last: int) -> dict[int, MinuteCounts]:
        out: dict[int, MinuteCounts] = {}
        for item in query_all(
            self._db,
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :a AND :b",
            ExpressionAttributeValues=values(
                {":pk": pulse_pk(race_id), ":a": pulse_minute_sk(first), ":b": pulse_minute_sk(last)}
            ),
        ):
            out[int(str(item["sk"])[2:])] = {str(k): int(v) for k, v in dict(item.get("c") or {}).items()}
        return out

    def state(self) -> tuple[int, list[tuple[int, int]]]:
        """(the last minute the copy has read, the gap ranges of minutes [start, end))."""
        got = self._db.get_item(TableName=self._table, Key=pulse_copy_key(), ConsistentRead=True).get("Item")
        if not got:
            return 0, []
        item = from_item(got)
        return int(item.get("through", 0)), [(int(a), int(b)) for a, b in item.get("gaps") or []]

    def set_state(self, through: int, gaps: list[tuple[int, int]]) -> None:
        self._db.put_item(
            TableName=self._table,
            Item={**pulse_copy_key(), **to_item({"through": through, "gaps": [list(g) for g in gaps[-KEEP_GAPS:]]})},
        )


class PulseSeries:
    def __init__(
        self,
        redis_pulse: RedisPulse,
        copies: DynamoPulseCopies,
        clock: Callable[[], float] = lambda: datetime.now(UTC).timestamp(),
    ) -> None:
        self._redis = redis_pulse
        self._copies = copies
        self._now = clock

    # -- the live view and the replay ----------------------------------------------------------
    def view(self, race: Race, events: list[Event], start: int | None = None, end: int | None = None) -> PulseView:
        """Seconds [start, end) of the race's counts (``end``: now; ``start``: ``DEFAULT_SPAN_S``
        before it), at most ``MAX_SPAN_S``."""
        now = int(self._now())
        end = min(now + 1, end if end is not None else now + 1)
        start = max(start if start is not None else end - DEFAULT_SPAN_S, end - MAX_SPAN_S)
        minutes = range(start // 60, (end - 1) // 60 + 1) if end > start else range(0)
        try:
            live, since = self._redis.read(race.raceId, minutes)
            redis_up = True
        except Exception as exc:  # Redis down: what the copy has, and gaps where it has nothing
            logger.warning("pulse: Redis not readable; reading the copy", extra={"error": str(exc)})
            live, since, redis_up = {}, None, False
        # Redis vouches for every minute it has held since `since` and still keeps: a live view's
        # poll then reads nothing from DynamoDB (the copy and its state only answer for the rest).
        vouched = redis_up and since is not None and since <= minutes.start and minutes.start * 60 > now - KEEP_S
        durable: dict[int, MinuteCounts] = {}
        lost: list[tuple[int, int]] = []
        through = 0
        if minutes and not vouched:
            durable = self._copies.minutes(race.raceId, minutes.start, minutes.stop - 1)
            through, lost = self._copies.state()
        counts: list[PulseCount] = []
        gap_minutes: list[int] = []
        for m in minutes:
            got = live.get(m) or durable.get(m)
            if got:
                counts.extend(_counts_in(got, start, end))
            elif any(a <= m < b for a, b in lost) or not (
                (redis_up and since is not None and m >= since) or m <= through
            ):
                gap_minutes.append(m)
        counts.sort(key=lambda c: (c.t, c.eventId, c.name))
        return PulseView(
            raceId=race.raceId,
            timeZone=race.timeZone,
            start=start,
            end=end,
            asOf=now,
            names=list(pulse.NAMES),
            events=[PulseEvent(eventId=e.eventId, name=e.name, cap=e.cap) for e in events],
            counts=counts,
            gaps=_spans(gap_minutes, start, end),
        )

    def unwritten(self, race_id: str, span_s: int = 600) -> dict[str, int]:
        """Per event, what the last ``span_s`` seconds queued (paid or free) less what they
        confirmed: the registrations on their way to the writer. One Redis round trip whatever
        the number of runners; {} when Redis cannot be read (the stats then say 0)."""
        now = int(self._now())
        try:
            live, _ = self._redis.read(race_id, range((now - span_s) // 60, now // 60 + 1))
        except Exception:
            return {}
        out: dict[str, int] = {}
        for got in live.values():
            for c in _counts_in(got, now - span_s, now + 1):
                sign = 1 if c.name in (pulse.QUEUED, pulse.FREE) else -1 if c.name == pulse.CONFIRMED else 0
                out[c.eventId] = out.get(c.eventId, 0) + sign * c.n
        return out

    # -- the durable copy (the sweeper's minute) -------------------------------------------------
    def copy(self) -> dict[str, int]:
        """Copy every race-minute at least two minutes old from Redis; record a restart's loss."""
        now_minute = int(self._now()) // 60
        try:
            since = self._redis.since(now_minute)
            written = self._redis.written()
        except Exception as exc:
            logger.warning("pulse copy: Redis not readable", extra={"error": str(exc)})
            metrics.add_metric(name="PulseCopySkipped", unit="Count", value=1)
            return {"copied": 0, "redisDown": 1}
        through, gaps = self._copies.state()
        if through and since > through + 1:
            # Redis holds counts only since `since`: what it held between is gone uncopied.
            gaps.append((through + 1, since))
            logger.warning("pulse: minutes lost with Redis", extra={"from": through + 1, "to": since})
        copied = failed = 0
        for race_id, minute in sorted(written, key=lambda w: w[1]):
            if minute >= now_minute - 1:
                continue  # still filling (a late flush lands seconds after its minute)
            try:
                self._copies.put_minute(race_id, minute, self._redis.minute(race_id, minute))
            except Exception:  # one minute that cannot be written never holds the others back
                logger.exception("pulse copy: a minute was not copied", extra={"raceId": race_id, "minute": minute})
                failed += 1
                continue  # still listed: the next run tries it again
            self._redis.copied(race_id, minute)
            copied += 1
        self._copies.set_state(max(through, now_minute - 2), gaps)
        return {"copied": copied, "failed": failed, "redisDown": 0}


def _counts_in(got: MinuteCounts, start: int, end: int) -> Iterable[PulseCount]:
    for raw, n in got.items():
        second, event_id, name = pulse.parse_field(raw)
        if start <= second < end and n:
            yield PulseCount(t=second, eventId=event_id, name=name, n=n)


def _spans(gap_minutes: list[int], start: int, end: int) -> list[PulseGap]:
    spans: list[PulseGap] = []
    for m in gap_minutes:
        a, b = max(start, m * 60), min(end, m * 60 + 60)
        if spans and spans[-1].end == a:
            spans[-1].end = b
        elif b > a:
            spans.append(PulseGap(start=a, end=b))
    return spans


def as_csv(view: PulseView) -> str:
    """One row per non-zero count: the second in the race's zone and in UTC, the event, what was
    counted, how many; then a row per gap. Sums of a column equal the series' sums."""
    zone = ZoneInfo(view.timeZone)
    names = {e.eventId: e.name for e in view.events}
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\r\n")
    w.writerow(["time", "utc", "eventId", "event", "count", "n"])
    for c in view.counts:
        at = datetime.fromtimestamp(c.t, UTC)
        w.writerow([at.astimezone(zone).isoformat(), at.isoformat(), c.eventId, names.get(c.eventId, ""), c.name, c.n])
    for g in view.gaps:
        at = datetime.fromtimestamp(g.start, UTC)
        w.writerow([at.astimezone(zone).isoformat(), at.isoformat(), "", "", "gap", g.end - g.start])
    return out.getvalue()
