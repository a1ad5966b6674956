"""A hold as the call that last wrote it knows it, kept in the shared cache for the next step of
the same runner's flow (issue 38: a read of an item the flow itself just wrote is a DynamoDB round
trip on every registration, twice).

The hold call keeps the hold it created; the registration call reads it instead of the table and,
once the hold is PAYING with its intent, keeps that; the confirm call reads it instead of the
table. A snapshot is a hint, never the truth, and that is why it is safe:

* every decision taken from it is a conditional write on the hold (HELD and unexpired with the
  same code to begin paying; PAYING with the same attempt to be queued), so a snapshot that is
  out of date fails its condition and changes nothing;
* any answer other than the plain one (a condition failed, the email taken, the payment not
  succeeded, the amounts not matching) is worked out again from the table, as before;
* the writes that change a hold without going through those conditions first (a discount code
  applied or changed, the runner's release) forget it, so the next step reads the table.

Lost with Redis (or expired): the steps read the table, as they did.
"""

from __future__ import annotations

from racecap.cache import TieredCache
from racecap.holds.models import Hold

# Longer than a hold lasts while the runner types and pays (the race's hold minutes, then the
# payment's extension), short enough that an opening's snapshots leave Redis soon after it.
HOLD_SNAPSHOT_TTL_S = 30 * 60.0


class HoldSnapshots:
    def __init__(self, cache: TieredCache) -> None:
        self._cache = cache

    def keep(self, hold: Hold) -> None:
        self._cache.put_many({_key(hold.holdId): hold.model_dump(mode="json")}, HOLD_SNAPSHOT_TTL_S)

    def get(self, hold_id: str) -> Hold | None:
        raw = self._cache.peek(_key(hold_id))
        return Hold.model_validate(raw) if raw else None

    def forget(self, hold_id: str) -> None:
        self._cache.delete(_key(hold_id))


def _key(hold_id: str) -> str:
    return f"hold:{hold_id}"
