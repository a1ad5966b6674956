"""The fairness building blocks on their own: tokens, the draw, proof-of-work, addresses."""

from __future__ import annotations

import hashlib
import random

import pytest
from racecap.fairness import work
from racecap.fairness.identity import AddressPrefixes, address_from
from racecap.fairness.lottery import admission_number, draw
from racecap.fairness.tokens import InvalidToken, Signer, TokenExpired

KEY = b"k" * 32


def test_a_token_verifies_under_its_key_and_kind_only():
    signer = Signer(KEY)
    token = signer.sign("adm", {"r": "race_1", "d": "dev_1", "exp": 2_000})
    assert signer.verify("adm", token, now=1_000)["d"] == "dev_1"
    with pytest.raises(InvalidToken):
        Signer(b"x" * 32).verify("adm", token, now=1_000)  # forged: another key
    with pytest.raises(InvalidToken):
        signer.verify("que", token.replace("adm.", "que.", 1), now=1_000)  # a kind cannot pass for another
    with pytest.raises(TokenExpired):
        signer.verify("adm", token, now=2_000)
    head, body, mac = token.split(".")
    with pytest.raises(InvalidToken):
        signer.verify("adm", f"{head}.{body}x.{mac}", now=1_000)  # tampered payload


@pytest.mark.parametrize("pool", [1, 2, 3, 7, 64, 65, 1000, 2000])
def test_the_draw_is_a_permutation_of_the_pool(pool):
    seed = random.randbytes(16)
    assert sorted(draw(seed, pool, a) for a in range(1, pool + 1)) == list(range(1, pool + 1))


def test_the_draw_ignores_arrival_order_and_later_arrivals_keep_theirs():
    pool = 2000
    order = [draw(b"opening-seed-1234", pool, a) for a in range(1, pool + 1)]
    n = pool
    d2 = sum((a - 1 - (o - 1)) ** 2 for a, o in zip(range(1, n + 1), order, strict=True))
    rho = 1 - 6 * d2 / (n * (n * n - 1))
    assert abs(rho) < 0.1
    assert admission_number(b"s" * 16, pool, pool + 5) == pool + 5
    assert admission_number(None, None, 3) is None


def test_a_solved_challenge_passes_once_checked_and_a_wrong_one_is_refused():
    signer = Signer(KEY)
    ch = work.issue(signer, "race_1", "dev_1", 8)
    nonce = work.solve(ch["challenge"], 8)
    assert work.check(signer, "race_1", "dev_1", ch["challenge"], nonce)
    bad = next(
        str(n)
        for n in range(1000)
        if work.leading_zero_bits(hashlib.sha256(f"{ch['challenge']}:{n}".encode()).digest()) < 8
    )
    with pytest.raises(work.ProofRefused):
        work.check(signer, "race_1", "dev_1", ch["challenge"], bad)
    with pytest.raises(work.ProofRefused):
        work.check(signer, "race_1", "dev_1", None, None)


@pytest.mark.parametrize(
    ("header", "address"),
    [
        ("203.0.113.7:443", "203.0.113.7"),
        # IPv6 by its /64: every address of a subscriber's network is one client.
        ("2001:db8::1:51234", "2001:db8::/64"),
        ("2001:db8:0:0:ffff:ffff:ffff:ffff:443", "2001:db8::/64"),
        ("2001:db8:0:1::1:443", "2001:db8:0:1::/64"),
        ("[2001:db8::7]:443", "2001:db8::/64"),
        # An IPv4 client reaching a dual-stack edge counts as its IPv4 address.
        ("::ffff:203.0.113.7:443", "203.0.113.7"),
        ("203.0.113.7", "203.0.113.7"),
        ("not an address", None),
        ("[2001:db8::1:443", None),
        ("", None),
    ],
)
def test_the_viewer_address_is_read_from_cloudfronts_header_as_the_callers_network(header, address):
    assert address_from({"cloudfront-viewer-address": header}) == address


def test_the_prefix_lengths_are_settings():
    wider = AddressPrefixes(ipv4=24, ipv6=48)
    assert address_from({"cloudfront-viewer-address": "203.0.113.7:443"}, wider) == "203.0.113.0/24"
    assert address_from({"cloudfront-viewer-address": "2001:db8:0:ffff::1:443"}, wider) == "2001:db8::/48"
    with pytest.raises(ValueError, match="out of range"):
        AddressPrefixes(ipv6=8)


def test_the_deployed_prefixes_are_an_ipv4_address_and_an_ipv6_64():
    import blueprint

    assert (blueprint.COMMON_ENV["ADDRESS_IPV4_PREFIX"], blueprint.COMMON_ENV["ADDRESS_IPV6_PREFIX"]) == ("32", "64")


def test_runners_waiting_for_the_draw_check_in_spread_after_the_opening_not_in_step_before_it():
    """The herd a full opening-queue run measured: told "half the time left, at least 2 s",
    a pool of 2,000 converged on a check every 2 s before the opening, then all again after."""
    from racecap.fairness.queue import MAX_SPREAD_S, MAX_WAIT_RETRY_S, first_check_after_opening

    devices = [f"device-{i}" for i in range(2000)]
    # Far from the opening: a bounded check-in interval.
    assert {first_check_after_opening("r1", d, 300, 2000) for d in devices} == {MAX_WAIT_RETRY_S}
    for wait_to_open in (59.0, 20.0, 3.0, 0.4):
        told = [first_check_after_opening("r1", d, wait_to_open, 2000) for d in devices]
        # Nobody checks again before the opening: the lottery makes it pointless...
        assert min(told) >= wait_to_open
        # ...and the checks after it are spread over the pool's window, about evenly.
        assert max(told) - min(told) >= MAX_SPREAD_S - 2
        assert max(told) <= wait_to_open + MAX_SPREAD_S + 1
        per_second: dict[int, int] = {}
        for t in told:
            per_second[t] = per_second.get(t, 0) + 1
        assert max(per_second.values()) <= 2000 / MAX_SPREAD_S * 1.5
    # A reload asks again and is told the same point; a small pool is not made to wait long.
    assert first_check_after_opening("r1", "a", 10, 2000) == first_check_after_opening("r1", "a", 10, 2000)
    assert max(first_check_after_opening("r1", d, 10, 40) for d in devices) <= 10 + 5
    # Overdue (the director has not opened yet): a steady cadence, never every second.
    assert {first_check_after_opening("r1", d, 0, 2000) for d in devices} == {MAX_SPREAD_S}


def test_a_directors_view_of_the_queue_reads_the_shared_state_and_leaves_it_for_the_runners() -> None:
    # Issue 42: each stats poll used to drop the cached state every waiting runner reads, so ten
    # watching tabs made every environment read the table again mid-opening.
    from racecap.fairness.queue import OpeningQueue

    from tests.fakes.races import local_cache
    from tests.unit.core_world import World

    world = World()
    world.race(caps=(5,))
    reads: list[str] = []

    class Store:
        def state(self, race_id: str) -> dict[str, object]:
            reads.append(race_id)
            return {"enabled": False, "seq": 3, "version": 2}

    cache = local_cache()
    queue = OpeningQueue(world.catalog, Store(), cache, signer=lambda: None)  # type: ignore[arg-type]
    first = queue.view("race-1", fresh=False)  # the stats' polls
    for _ in range(10):
        assert queue.view("race-1", fresh=False).queue == first.queue
    assert (reads, first.version, first.queue.entered) == (["race-1"], 2, 3)
    # The fairness page reads the table, and leaves the runners' cached state where it was.
    assert queue.view("race-1").queue == first.queue
    assert reads == ["race-1", "race-1"]
    queue.view("race-1", fresh=False)
    assert reads == ["race-1", "race-1"]
