"""Free entries and the per-client limits (racecap.fairness.limits): a free place keeps counting
against its device and its address once registered, so one device cannot take a free race's
places one after another; a paid place stops counting once paid, with no write added for it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from racecap.errors import TooManyHolds
from racecap.fairness.identity import Client
from racecap.fairness.limits import client_limits
from racecap.fairness.queue import FairnessSettings
from racecap.holds.models import Attempt, Hold, HoldPhase
from racecap.registration.attempts import DynamoAttempts

from tests.unit.core_world import World, request

DEVICE, ADDRESS = "CLIENT#kids#D#dev-1", "CLIENT#kids#A#203.0.113.7"


def _limits(device: str = "dev-1", hold_limit: int = 4, address_limit: int = 100) -> dict[str, int]:
    settings = FairnessSettings.model_construct(holdLimit=hold_limit, addressHoldLimit=address_limit)
    return client_limits("kids", Client(address="203.0.113.7", device_id=device, headers={}), settings)


def _register_in_turn(w: World, limits: dict[str, int], tries: int, first: int = 0) -> list[str]:
    """Hold a place, send made-up details, next: as many as the limits let through."""
    done = []
    for i in range(first, first + tries):
        try:
            hold_id = w.hold_service.hold("kids", "ev0", limits=limits).holdId
        except TooManyHolds:
            break
        done.append(w.registration.register(hold_id, request(f"kid{i}@example.com", card=None)).registrationId)
    return done


def test_one_device_registers_at_most_its_limit_of_free_places_in_turn():
    # Given a free kids' race of 20 places and a device with the default limit of 4
    w = World()
    w.race("kids", caps=(20,), price_cents=0)
    assert _limits() == {DEVICE: 4, ADDRESS: 100}
    # When it holds and registers a place, then the next, six times over (made-up emails)
    registered = _register_in_turn(w, _limits(), tries=6)
    # Then four are registered, the fifth hold is refused, and they stay counted once confirmed
    assert len(registered) == 4
    assert w.write_queued() == []
    assert {w.regs.get(r).status for r in registered} == {"CONFIRMED"}
    assert (w.tables.client_holds[DEVICE], w.tables.client_holds[ADDRESS]) == (4, 4)
    with pytest.raises(TooManyHolds):
        w.hold_service.hold("kids", "ev0", limits=_limits())
    assert w.tables.taken("kids", "ev0") == 4


def test_the_address_bounds_free_places_across_device_tokens():
    # A script fetching a new device token per place meets the address's ceiling (here 10).
    w = World()
    w.race("kids", caps=(20,), price_cents=0)
    registered: list[str] = []
    for d in range(20):
        got = _register_in_turn(w, _limits(f"dev-{d}", address_limit=10), tries=1, first=d)
        if not got:
            break
        registered += got
    assert len(registered) == 10 and w.tables.client_holds[ADDRESS] == 10


def test_a_paid_place_still_stops_counting_once_paid():
    w = World()
    w.race("kids", caps=(20,), price_cents=2500)
    limits = _limits(hold_limit=1)
    for i in range(3):  # hold, pay, and hold again: the slot came back each time
        hold_id = w.hold_service.hold("kids", "ev0", limits=limits).holdId
        assert w.registration.register(hold_id, request(f"runner{i}@example.com")).status == "QUEUED"
    assert (w.tables.client_holds[DEVICE], w.tables.client_holds[ADDRESS]) == (0, 0)


class _Recorder:
    """A DynamoDB client that records every write it is asked for (all succeed)."""

    def __init__(self) -> None:
        self.writes: list[dict[str, Any]] = []

    def transact_write_items(self, TransactItems: list[dict[str, Any]]) -> None:  # boto3 names it
        self.writes += TransactItems

    def update_item(self, **params: Any) -> None:
        self.writes.append({"Update": params})


@pytest.mark.parametrize(("amount", "writes"), [(2500, 3), (0, 1)])
def test_queueing_writes_the_hold_and_frees_the_slots_of_a_paid_place_only(amount: int, writes: int):
    # The adapter's one transaction: the hold's move, plus one decrement per client limit when
    # paid (as before this change: nothing added); a free entry writes the move alone.
    now = datetime.now(UTC)
    hold = Hold(
        holdId="hold_x", registrationId="reg_x", raceId="kids", eventId="ev0", status=HoldPhase.PAYING,
        createdAt=now, expiresAt=now + timedelta(minutes=10), clientLimits=_limits(), amountCents=amount,
        currency="USD",
    )  # fmt: skip
    attempt = Attempt("k", "ann@example.com", "Ann", "Lee", "2015-01-01", amount, "USD", now.isoformat())
    db = _Recorder()
    DynamoAttempts(db, "Inventory").mark_queued(hold, attempt, "pi_1" if amount else "", now, now)
    assert len(db.writes) == writes
    counters = [w["Update"]["Key"]["pk"]["S"] for w in db.writes if "ADD n" in w["Update"]["UpdateExpression"]]
    assert sorted(counters) == (sorted([DEVICE, ADDRESS]) if amount else [])
