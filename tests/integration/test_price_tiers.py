"""Price tiers on the real stack: a place held before a tier starts is charged the price it was
held at, by the payment provider too, even when the runner pays after the new price started;
the race page shows the price now and the one to come."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from .admin import iso, race_body
from .flows import hold, intents_for, register, runner

pytestmark = pytest.mark.integration


def test_a_tier_boundary_crossed_during_a_hold_keeps_the_held_price_on_the_payment_intent(
    director: Any, api: Any, stack: Any
) -> None:
    kim = director("kim-tiers")
    starts = datetime.now(UTC) + timedelta(seconds=6)
    body = race_body((10,))
    body["events"][0] |= {"priceCents": 3500, "priceTiers": [{"startsAt": iso(starts), "priceCents": 4500}]}
    race = kim.post("/api/admin/races", json=body).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    kim.open_now(rid)
    page = api.get(f"/api/races/{rid}").json()["events"][0]
    assert page["priceCents"] == 3500 and [t["priceCents"] for t in page["priceChanges"]] == [4500]

    early = hold(api, rid, eid)
    assert early.status_code == 201 and early.json()["priceCents"] == 3500
    time.sleep(max(0.0, (starts - datetime.now(UTC)).total_seconds()) + 0.5)
    late = hold(api, rid, eid)
    assert late.json()["priceCents"] == 4500  # the standard price has started

    paid = register(api, early.json()["holdId"], runner())  # paying after the boundary
    assert paid.status_code == 202, paid.text
    (intent,) = intents_for(stack, hold_id=early.json()["holdId"])
    assert (intent["amount"], intent["status"]) == (3500, "succeeded")
