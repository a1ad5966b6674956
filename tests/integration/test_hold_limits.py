"""Per-client hold limits: one device holds at most N places, one address at most its ceiling.

Runs against the real stack: the counters are conditional writes in each hold's own
transaction, so concurrency cannot overshoot them.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import blueprint

from .admin import race_body
from .flows import event_ids, runner, wait_confirmed
from .runners import Runner, fresh_address, why

LIMIT = 4
CEILING = 12
RATE = float(blueprint.param("RunnerRateLimitPerSecond").default)


def _race(kim: Any) -> tuple[str, str]:
    race_id: str = kim.create_race((200,))["raceId"]
    kim.open_now(race_id)
    resp = kim.patch(f"/api/admin/races/{race_id}/fairness", json={"holdLimit": LIMIT, "addressHoldLimit": CEILING})
    assert resp.status_code == 200, resp.text
    return race_id, event_ids(kim, race_id)[0]  # the director's session reads public pages too


def test_given_one_device_when_50_holds_race_then_exactly_its_limit_are_held(api: Any, director: Any) -> None:
    kim = director("kim-limits")
    race_id, event_id = _race(kim)
    bot = Runner(api)
    url = f"/api/races/{race_id}/events/{event_id}/holds"
    # One device token from 50 addresses (a bot rotating addresses): the per-device limit
    # decides, and the per-address rate limit never does, however fast the machine is.
    fresh = [{"CloudFront-Viewer-Address": f"{fresh_address()}:443"} for _ in range(50)]
    with ThreadPoolExecutor(12) as pool:  # twice the gateway's workers: every one busy at once
        answers = list(pool.map(lambda h: bot.call("POST", url, headers=h, timeout=120), fresh))
    counts = Counter(r.status_code for r in answers)
    assert counts[201] == LIMIT, counts
    refused = [r for r in answers if r.status_code == 429]
    assert refused and all(r.json()["error"] == "TOO_MANY_HOLDS" for r in refused)
    assert int(refused[0].headers["Retry-After"]) >= 1 and refused[0].json()["message"]

    # Releasing one frees one slot, and only one.
    held = [r.json()["holdId"] for r in answers if r.status_code == 201]
    assert bot.call("DELETE", f"/api/holds/{held[0]}").status_code == 204
    assert bot.hold(race_id, event_id).status_code == 201
    assert bot.hold(race_id, event_id).status_code == 429


def test_given_one_device_taking_free_places_in_turn_then_at_most_its_limit_are_registered(
    api: Any, director: Any
) -> None:
    # A free kids' race of 20 places: each registration used to give its hold's slot back, so
    # one device registered place after place with made-up emails.
    kim = director("kim-limits-free")
    body = race_body((20,))
    body["events"][0]["priceCents"] = 0
    race = kim.post("/api/admin/races", json=body).json()
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    kim.open_now(race_id)
    resp = kim.patch(f"/api/admin/races/{race_id}/fairness", json={"holdLimit": LIMIT, "addressHoldLimit": CEILING})
    assert resp.status_code == 200, resp.text
    bot = Runner(api)
    registered: list[str] = []
    answers = []
    for i in range(LIMIT + 2):  # one after another: hold, made-up details, the next
        held = bot.hold(race_id, event_id)
        answers.append(held)
        if held.status_code != 201:
            continue
        details = runner(f"kid{i}.{race_id[-6:].lower()}@example.com", token=None)
        sent = bot.call("POST", f"/api/holds/{held.json()['holdId']}/registration", json=details)
        assert sent.status_code == 202 and sent.json()["status"] == "QUEUED", why(sent)
        registered.append(sent.json()["registrationId"])
    assert len(registered) == LIMIT, [why(a) for a in answers]
    refused = answers[LIMIT:]
    assert {r.status_code for r in refused} == {429}, [why(r) for r in refused]
    assert {r.json()["error"] for r in refused} == {"TOO_MANY_HOLDS"}
    assert "free entries" in refused[0].json()["message"]
    # Confirmed by the writer, they still count; another device elsewhere still registers.
    wait_confirmed(api, registered)
    assert bot.hold(race_id, event_id).status_code == 429
    assert Runner(api).hold(race_id, event_id).status_code == 201


def test_given_one_address_cycling_tokens_then_at_most_its_ceiling_and_others_unaffected(
    api: Any, director: Any
) -> None:
    kim = director("kim-limits-2")
    race_id, event_id = _race(kim)
    bots = [Runner(api) for _ in range(20)]  # 20 device tokens, fetched anywhere...
    for b in bots:
        b.address = "203.0.113.99"  # ...then all used from one address (within its rate limit)
    with ThreadPoolExecutor(12) as pool:
        flat = list(pool.map(lambda b: b.hold(race_id, event_id), bots))
    counts = Counter(r.status_code for r in flat)
    assert counts[201] == CEILING, counts
    assert {r.json()["error"] for r in flat if r.status_code != 201} == {"TOO_MANY_HOLDS"}

    honest = Runner(api)  # another address, another device
    assert honest.hold(race_id, event_id).status_code == 201


def test_given_one_address_cycling_500_tokens_then_at_most_its_ceiling_and_others_unaffected(
    api: Any, director: Any, stack: Any
) -> None:
    from racecap.fairness.tokens import Signer

    kim = director("kim-limits-3")
    race_id, event_id = _race(kim)
    # 500 genuine device tokens (a bot can collect them from anywhere, over days), all
    # used from one address as fast as it can.
    signer = Signer(stack.fairness_key.encode())
    address = fresh_address()
    bots = [_with_device(Runner(api, address, device=False), signer, f"rotating-{race_id}-{i}") for i in range(500)]
    answers = _at_most_the_ceiling_held(bots, race_id, event_id)
    # Whichever refused it, the bot was told when to retry, in the contract's shape.
    assert all(int(r.headers["Retry-After"]) >= 1 for r in answers if r.status_code == 429)

    # The bot keeps at it, within its address's rate limit: still no more than the ceiling.
    for b in bots[: CEILING + 5]:
        time.sleep(1 / RATE)
        assert b.hold(race_id, event_id).status_code in (201, 429)
    time.sleep(2.5)  # past the places-left cache
    taken = next(e for e in api.get(f"/api/races/{race_id}").json()["events"] if e["eventId"] == event_id)
    assert taken["cap"] - taken["spotsLeft"] == CEILING

    honest = [Runner(api) for _ in range(3)]  # other addresses, other devices
    assert [h.hold(race_id, event_id).status_code for h in honest] == [201, 201, 201]


def test_given_200_addresses_of_one_ipv6_64_each_with_a_fresh_device_then_at_most_the_ceiling_is_held(
    api: Any, director: Any, stack: Any
) -> None:
    from racecap.fairness.tokens import Signer

    # A home IPv6 line is a whole /64: one person can send each request from a new address
    # of it, with a new device token each time. Keyed on the single address, all 200 were held.
    kim = director("kim-limits-ipv6")
    race_id, event_id = _race(kim)
    network = f"2001:db8:{secrets.randbelow(0xFFFF):x}:{secrets.randbelow(0xFFFF):x}"
    signer = Signer(stack.fairness_key.encode())
    bots = [  # CloudFront's format: the address, then ":port", no brackets
        _with_device(
            Runner(api, f"{network}:{secrets.randbelow(0xFFFF):x}:{i:x}:{secrets.randbelow(0xFFFF):x}:1", device=False),
            signer,
            f"v6-{race_id}-{i}",
        )
        for i in range(200)
    ]
    _at_most_the_ceiling_held(bots, race_id, event_id)

    # The next /64 (a neighbour on the same provider) is another subscriber: not affected.
    neighbour = f"{network.rsplit(':', 1)[0]}:{(int(network.rsplit(':', 1)[1], 16) + 1) % 0xFFFF:x}"
    others = [Runner(api, f"{neighbour}::{i + 1:x}") for i in range(3)]
    assert [o.hold(race_id, event_id).status_code for o in others] == [201, 201, 201]


def _with_device(bot: Runner, signer: Any, device_id: str) -> Runner:
    """A genuine device token (a bot can collect them from anywhere, over days)."""
    now = int(time.time())
    bot.device_token = signer.sign("dev", {"d": device_id, "iat": now, "exp": now + 3600})
    return bot


def _at_most_the_ceiling_held(bots: list[Runner], race_id: str, event_id: str) -> list[Any]:
    """Every bot holds at once: at most the address ceiling is held, the rest told to back off."""
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda b: b.hold(race_id, event_id), bots))
    counts = Counter(r.status_code for r in answers)
    assert counts[201] <= CEILING, counts
    assert set(counts) <= {201, 429}, counts
    refusals = {r.json()["error"] for r in answers if r.status_code == 429}
    assert refusals <= {"TOO_MANY_HOLDS", "TOO_MANY_REQUESTS"}, refusals
    return answers
