"""Live figures per event for a race's director: places, money, and registrations per minute.

* cap, taken and places left come from the cap shards (read consistently);
* confirmed, cancelled (and by whom: runners, the organiser, the payment provider, Racecap)
  and the money from the counters the writer, the cancellations and the ledger keep: revenue
  (the confirmed registrations'), gross (revenue + what the cancelled ones paid), refunded
  (every refund), net (gross - refunded), and the refunds made outside Racecap, flagged
  (``STATS#`` items), and the per-minute series from the writer's per-minute counters —
  nothing here counts rows;
* held is every place taken and not confirmed (runners in the form, paying, or paid and being
  written): taken on the shards less the confirmed, the waitlist's pooled and offered places —
  no read of the holds themselves, which would cost in proportion to the runners holding (the
  sweeper's index spans every race); queued (of those, paid and on the queue to the writer) is
  what the last ten minutes' per-second counts say was queued and not yet confirmed
  (``stats.pulse``), so an opening's watchers cost the same reads at 100 runners or 10,000;
* each discount code's uses against its limit, from its use counter's shards (racecap.codes).

A dashboard polls; the figures are cached for two seconds so ten open tabs cost one read.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from racecap.cache import TieredCache
from racecap.codes.models import CodeUses
from racecap.places.store import Inventory
from racecap.races.catalog import race_status
from racecap.races.models import Event, Race
from racecap.registration.store import CANCELLED_BY_FIELDS, RegistrationStore
from racecap.stats.models import EventStats, MinuteCount, RaceStatsView
from racecap.waitlist.models import Line

STATS_TTL = 2.0


STATS_LOCAL_TTL = 1.0

# The longest series asked for (the API's ``minutes`` is 1..1440): the one kept per race. Its
# read is the minutes that had confirmations (sparse items), not 1,440 of them.
MAX_MINUTES = 1440


class RaceStats:
    def __init__(
        self,
        inventory: Inventory,
        registrations: RegistrationStore,
        unwritten: Callable[[str], dict[str, int]] | None,
        cache: TieredCache,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        code_uses: Callable[[str], list[CodeUses]] | None = None,
        waitlist: Callable[[str, str], Line] | None = None,
    ) -> None:
        self._code_uses = code_uses
        self._waitlist = waitlist  # an event's line counters (read only for events with a waitlist)
        self._inventory = inventory
        self._regs = registrations
        self._unwritten = unwritten  # per event: queued and not confirmed yet (stats.pulse)
        self._cache = cache
        self._now = clock

    def stats(self, race: Race, events: list[Event], minutes: int = 60) -> RaceStatsView:
        """The figures with the last ``minutes`` of the series: one cache entry per race whatever
        is asked (the whole day's series, kept sparse: the minutes that had confirmations, laid
        out with zeros per call), so callers asking for other windows share one computation
        instead of each costing its own (issue 42)."""
        doc = self._cache.get_or_load(
            f"stats:{race.raceId}:v{race.version}",
            lambda: self._compute(race, events, MAX_MINUTES).model_dump(mode="json"),
            ttl=STATS_TTL,
            local_ttl=STATS_LOCAL_TTL,
        )
        view = RaceStatsView.model_validate(doc)
        shown = min(minutes, MAX_MINUTES)
        window = [(view.asOf - timedelta(minutes=m)).strftime("%Y-%m-%dT%H:%M") for m in range(shown - 1, -1, -1)]

        def dense(sparse: list[MinuteCount]) -> list[MinuteCount]:
            counts = {c.minute: c.confirmed for c in sparse}
            return [MinuteCount(minute=m, confirmed=counts.get(m, 0)) for m in window]

        laid_out = [e.model_copy(update={"perMinute": dense(e.perMinute)}) for e in view.events]
        return view.model_copy(update={"minutes": shown, "events": laid_out})

    def _compute(self, race: Race, events: list[Event], minutes: int) -> RaceStatsView:
        now = self._now()
        first = (now - timedelta(minutes=minutes - 1)).strftime("%Y-%m-%dT%H:%M")
        unwritten = self._unwritten(race.raceId) if self._unwritten else {}
        out: list[EventStats] = []
        for e in events:
            usage = self._inventory.usage(race.raceId, e.eventId, consistent=True)
            counters = self._regs.stats(race.raceId, e.eventId)
            per_minute = self._regs.per_minute(race.raceId, e.eventId, first)
            line = self._waitlist(race.raceId, e.eventId) if self._waitlist and e.waitlist.enabled else Line()
            # Read at slightly different instants: never a negative count. The waitlist's pooled and
            # offered places stay taken on the shards: neither held nor queued.
            held = max(0, usage.taken - counters["confirmed"] - line.pool - line.offered)
            queued = min(held, max(0, unwritten.get(e.eventId, 0)))
            # Revenue is the confirmed registrations'; a cancelled one's payment stays in the gross.
            gross = counters["revenueCents"] + counters.get("cancelledCents", 0) + counters.get("otherPaidCents", 0)
            refunded = counters["refundedCents"]
            out.append(
                EventStats(
                    eventId=e.eventId,
                    name=e.name,
                    cap=usage.cap,
                    held=held,
                    queued=queued,
                    confirmed=counters["confirmed"],
                    cancelled=counters["cancelled"],
                    # Who cancelled: counted since the split was added (older ones read 0 here).
                    cancelledByRunners=counters.get("cancelledByRunners", 0),
                    cancelledByOrganiser=counters.get("cancelledByOrganiser", 0),
                    cancelledByProvider=counters.get("cancelledByProvider", 0),
                    cancelledBySystem=counters.get("cancelledBySystem", 0),
                    placesLeft=usage.left,
                    currency=e.currency,
                    revenueCents=counters["revenueCents"],
                    grossCents=gross,
                    refundedCents=refunded,
                    netCents=gross - refunded,
                    outsideRefunds=counters.get("outsideRefunds", 0),
                    transfers=counters.get("transfers", 0),
                    switchedIn=counters.get("switchedIn", 0),
                    switchedOut=counters.get("switchedOut", 0),
                    deferred=counters.get("deferred", 0),
                    otherPaymentsCents=counters.get("otherPaidCents", 0),
                    perMinute=[MinuteCount(minute=m, confirmed=n) for m, n in sorted(per_minute.items()) if n],
                    waitlistLength=line.waiting,
                    waitlistPooled=line.pool,
                    offersOut=line.offered,
                    offersAccepted=line.claimed,
                    offersExpired=line.expired,
                    soldOutAt=_instant(counters.get("soldOutAt", 0)),
                )
            )
        totals = {
            k: sum(getattr(s, k) for s in out)
            for k in (
                *("cap", "held", "queued", "confirmed", "cancelled", "placesLeft"),
                *CANCELLED_BY_FIELDS.values(),
                *("revenueCents", "refundedCents", "grossCents", "netCents", "outsideRefunds"),
                *("transfers", "otherPaymentsCents", "switchedIn", "switchedOut", "deferred"),
                *("waitlistLength", "waitlistPooled", "offersOut", "offersAccepted", "offersExpired"),
            )
        }
        return RaceStatsView(
            raceId=race.raceId,
            status=race_status(race, now),
            asOf=now,
            minutes=minutes,
            totals=totals,
            events=out,
            codes=self._code_uses(race.raceId) if self._code_uses else [],
        )


def _instant(epoch_ms: int) -> datetime | None:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC) if epoch_ms else None
