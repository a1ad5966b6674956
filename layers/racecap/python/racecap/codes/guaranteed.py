"""Guaranteed entries on an event drawn by ballot (issue 43): charity places, qualifiers,
deferrals. The director keeps places out of the draw (``keptPlaces``) and gives guaranteed-entry
codes (``CodeTerms.guaranteed``, a use each, the code's discount as any code's) to the runners
those places are for. Nobody else holds a place of a ballot event first-come (``BALLOT_ONLY``).

* **Once the ballot is drawn**: the draw moved exactly the winners' places from the event's
  shards to its line (``waitlist.store.DynamoBallotLine.open_line``); what the shards still have
  room for is the kept places. A guaranteed hold checks, in its own transaction, that the line
  was opened by the draw (``holds.store``): before that, 409 ``KEPT_PLACES_NOT_OPEN``, so a hold
  can never take a place the draw is about to move.
* **Code first, then place**: the code is checked (it exists, is a guaranteed entry, valid now and
  for the event) before any place is taken; then the place is held and the code applied to it
  (its use taken with a conditional write on its shards, as any code's). A use gone meanwhile
  releases the place at once and answers why: no place is kept without its code.
* **The place keeps its code**: removing it, or replacing it with a code that is not a
  guaranteed entry, is refused (409 ``CODE_REQUIRED``). Freed unpaid or cancelled, the place goes
  back to the kept places (the shards), not to the ballot's line: the director decides what the
  kept places become (their release to the line is the waitlist's admin action).
"""

from __future__ import annotations

from datetime import UTC, datetime

from racecap.codes.service import Discounts, usable
from racecap.codes.store import CodeStore
from racecap.errors import CodeError, DomainError
from racecap.holds.models import HoldCreated
from racecap.holds.service import HoldService, hold_created
from racecap.observability import metrics


class GuaranteedEntries:
    def __init__(self, store: CodeStore, holds: HoldService, discounts: Discounts) -> None:
        self._store = store
        self._holds = holds
        self._discounts = discounts

    def hold(
        self,
        race_id: str,
        event_id: str,
        typed: str,
        limits: dict[str, int] | None = None,
        now: datetime | None = None,
    ) -> HoldCreated:
        now = now or datetime.now(UTC)
        code = typed.strip().upper()
        stored = usable(self._store, race_id, event_id, code, now)
        if not stored.terms.guaranteed:
            raise CodeError(
                f"Code {code} is a discount, not a guaranteed entry: apply it to a place you hold.",
                fields={"code": "Not a guaranteed entry."},
            )
        hold = self._holds.hold_place(race_id, event_id, now, limits, guaranteed=True)
        try:
            applied = self._discounts.apply(hold.holdId, code, now)
        except DomainError:
            self._holds.release(hold.holdId)  # the code's last use went meanwhile: no place without it
            raise
        metrics.add_metric(name="GuaranteedHold", unit="Count", value=1)
        return hold_created(applied)
