"""How many places one client may hold at once, and under which counters.

A hold counts against its device (or, while the queue is on, its admission — which names
the same device) and against its address; each counter is a conditional increment in the
hold's own transaction (``holds/store.claim``), so concurrency cannot overshoot, and it is
decremented in the transaction that releases, expires or pays for the place. A client
with no device token counts against its address only; an unknown address (local calls
without the trusted header) against nothing.

A free entry (nothing to pay: a free event, or a code taking the whole price) is never paid
for, so its place keeps counting once registered (``registration/attempts.mark_queued`` does
not decrement): without it one device took a free race's places one after another, each
registration freeing the slot for the next hold. So for one race a device holds at most
``holdLimit`` places and free entries together, an address ``addressHoldLimit``. The paid path
writes what it wrote before; the free one one write fewer.
"""

from __future__ import annotations

from racecap.fairness.identity import Client
from racecap.fairness.queue import FairnessSettings


def client_limits(race_id: str, client: Client, settings: FairnessSettings) -> dict[str, int]:
    limits: dict[str, int] = {}
    if client.device_id is not None:
        limits[f"CLIENT#{race_id}#D#{client.device_id}"] = settings.holdLimit
    if client.address is not None:
        limits[f"CLIENT#{race_id}#A#{client.address}"] = settings.addressHoldLimit
    return limits
