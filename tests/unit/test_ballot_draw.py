"""The ballot's draw (issue 43), pure: the seed and its commitment, the order the seed alone
decides, winners that fill the places without splitting a group, and the published script
(``tools/verify_draw.py``, run as the public would run it) agreeing with the product."""

from __future__ import annotations

import csv
import io
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from racecap.ballot.draw import (
    Ticket,
    check_seed,
    commitment,
    new_seed,
    order,
    tickets_of,
    winners,
    write_list,
)
from racecap.errors import SeedRefused, ValidationFailed

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools/verify_draw.py"
ZERO_SEED = "00" * 32


def applications(count: int, grouped: float, rng: random.Random) -> list[tuple[str, str | None]]:
    """``count`` applications, ``grouped`` of them in groups of 2 to 4 (the last group takes what
    is left, at least 2), as ``(application id, group id or None)``."""
    in_groups = round(count * grouped)
    apps: list[tuple[str, str | None]] = []
    while len(apps) < in_groups:
        left = in_groups - len(apps)
        size = left if left <= 4 else rng.randint(2, min(4, left - 2))  # never leave a group of 1
        group = f"grp_{len(apps)}"
        apps += [(f"{group}_{m}", group) for m in range(size)]
    apps += [(f"app_{n}", None) for n in range(count - in_groups)]
    rng.shuffle(apps)
    return apps


# -- the seed and its commitment ---------------------------------------------------------------
def test_the_commitment_is_the_sha256_of_the_seeds_32_bytes():
    # SHA-256 of 32 zero bytes, as `xxd -r -p | sha256sum` gives it: the bytes, not the 64 characters.
    assert commitment(ZERO_SEED) == "66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925"


def test_the_committed_seed_is_accepted_in_either_case_and_another_is_refused():
    seed = new_seed()
    published = commitment(seed)
    check_seed(seed, published)
    check_seed(seed.upper(), published.upper())
    with pytest.raises(SeedRefused) as refused:
        check_seed(new_seed(), published)
    assert (refused.value.status, refused.value.code) == (409, "SEED_REFUSED")


@pytest.mark.parametrize("seed", ["", "zz" * 32, "00" * 31, "00" * 33])
def test_a_seed_that_is_not_32_bytes_of_hex_is_invalid(seed):
    with pytest.raises(ValidationFailed):
        order(seed, [Ticket("app_a")])


def test_new_seeds_are_32_random_bytes():
    seeds = {new_seed() for _ in range(50)}
    assert len(seeds) == 50 and all(len(bytes.fromhex(s)) == 32 for s in seeds)


# -- the order -----------------------------------------------------------------------------------
def test_the_order_is_pinned_to_the_documented_bytes():
    """Computed independently: ``printf %s <id> | openssl dgst -sha256 -mac HMAC -macopt hexkey:<seed>``,
    sorted by digest. A published draw must re-compute identically for ever."""
    tickets = [Ticket(i) for i in ["app_a", "app_b", "app_c", "grp_d", "app_e"]]
    assert [t.id for t in order(ZERO_SEED, tickets)] == ["app_b", "app_c", "grp_d", "app_e", "app_a"]


def test_the_same_seed_draws_the_same_order_and_another_seed_a_different_one():
    tickets = [Ticket(f"app_{n}") for n in range(1000)]
    seed = new_seed()
    first = order(seed, tickets)
    assert order(seed, tickets) == first
    assert winners(order(seed, tickets), 100) == winners(first, 100)
    assert order(new_seed(), tickets) != first


def test_a_ticket_listed_twice_is_refused():
    with pytest.raises(ValueError, match="app_a"):
        order(ZERO_SEED, [Ticket("app_a"), Ticket("app_b"), Ticket("app_a")])


@given(st.permutations([Ticket(f"app_{n}", 1 + n % 4) for n in range(40)]))
def test_the_order_does_not_depend_on_the_order_tickets_come_in(shuffled):
    assert order(ZERO_SEED, shuffled) == order(ZERO_SEED, sorted(shuffled))


# -- tickets and winners -----------------------------------------------------------------------
def test_a_group_is_one_ticket_sized_by_its_applications():
    tickets = tickets_of([("a1", None), ("a2", "g1"), ("a3", "g1"), ("a4", None), ("a5", "g1")])
    assert sorted(tickets) == [Ticket("a1", 1), Ticket("a4", 1), Ticket("g1", 3)]


def test_a_group_that_does_not_fit_waits_whole_and_a_later_single_takes_the_place():
    drawn = [Ticket("a", 1), Ticket("g", 3), Ticket("b", 1), Ticket("h", 2)]
    assert winners(drawn, 2) == ([Ticket("a", 1), Ticket("b", 1)], [Ticket("g", 3), Ticket("h", 2)])
    assert winners(drawn, 0) == ([], drawn)


def test_a_ticket_of_no_runner_is_refused():
    with pytest.raises(ValueError, match="size 0"):
        winners([Ticket("g", 0)], 5)


@pytest.mark.parametrize("seed", [ZERO_SEED, "ab" * 32, "5e" * 32])
def test_ten_thousand_applications_fill_exactly_a_thousand_places_with_no_group_split(seed):
    """The issue's case: 10,000 applications, 30 % of them in groups of 2 to 4, 1,000 places."""
    apps = applications(10_000, 0.30, random.Random(43))
    members: dict[str, list[str]] = {}
    for app, group in apps:
        members.setdefault(group or app, []).append(app)
    assert len(apps) == 10_000 and sum(1 for _, g in apps if g) == 3_000
    assert {len(m) for k, m in members.items() if k.startswith("grp_")} == {2, 3, 4}

    drawn = winners(order(seed, tickets_of(apps)), 1_000)

    won_apps = [app for t in drawn.winners for app in members[t.id]]
    waiting_apps = [app for t in drawn.rest for app in members[t.id]]
    assert len(won_apps) == sum(t.size for t in drawn.winners) == 1_000
    assert len(set(won_apps)) == 1_000 and not set(won_apps) & set(waiting_apps)
    assert len(won_apps) + len(waiting_apps) == 10_000
    assert any(t.size > 1 for t in drawn.winners), "groups win too, whole"
    assert winners(order(seed, reversed(tickets_of(apps))), 1_000) == drawn  # a re-run changes nothing


unique_tickets = st.lists(
    st.tuples(st.text(min_size=1, max_size=12), st.integers(min_value=1, max_value=5)),
    max_size=60,
    unique_by=lambda t: t[0],
).map(lambda pairs: [Ticket(i, s) for i, s in pairs])


@given(unique_tickets, st.integers(min_value=0, max_value=80), st.binary(min_size=32, max_size=32))
def test_winners_never_overfill_split_or_reorder(tickets, places, seed):
    drawn = order(seed.hex(), tickets)
    won, rest = winners(drawn, places)
    filled = sum(t.size for t in won)
    assert filled <= places
    assert sorted(won + rest) == sorted(tickets) and not {t.id for t in won} & {t.id for t in rest}
    position = {t.id: n for n, t in enumerate(drawn)}
    assert [position[t.id] for t in rest] == sorted(position[t.id] for t in rest)
    assert [position[t.id] for t in won] == sorted(position[t.id] for t in won)
    assert all(t.size > places - filled for t in rest), "a ticket that fits was passed over"
    if any(t.size == 1 for t in rest):
        assert filled == places


# -- the published list and the public's script --------------------------------------------------
def _verify(tmp_path: Path, tickets: list[Ticket], seed: str, committed: str, places: int):
    published = tmp_path / "list.csv"
    with published.open("w", newline="", encoding="utf-8") as f:
        write_list(tickets, f)
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--seed", seed, "--commitment", committed, "--places", str(places), published],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_published_script_reproduces_the_draw(tmp_path):
    tickets = tickets_of(applications(2_000, 0.30, random.Random(7)))
    tickets.append(Ticket('app_ü,"quoted"', 1))  # UTF-8 and CSV quoting survive the round trip
    seed = new_seed()
    drawn = winners(order(seed, tickets), 200)

    run = _verify(tmp_path, tickets, seed, commitment(seed), 200)

    assert run.returncode == 0, run.stderr
    rows = list(csv.DictReader(io.StringIO(run.stdout)))
    assert [r["ticket"] for r in rows] == [t.id for t in order(seed, tickets)]
    assert [Ticket(r["ticket"], int(r["size"])) for r in rows if r["result"] == "won"] == drawn.winners
    assert [Ticket(r["ticket"], int(r["size"])) for r in rows if r["result"] == "waitlist"] == drawn.rest


@pytest.mark.parametrize("seed", ["other", "not hex"])
def test_the_published_script_refuses_a_seed_other_than_the_committed_one(tmp_path, seed):
    committed = commitment(new_seed())
    run = _verify(tmp_path, [Ticket("app_a")], new_seed() if seed == "other" else seed, committed, 1)
    assert run.returncode == 1 and "REFUSED" in run.stderr and run.stdout == ""


def test_the_published_list_says_nothing_of_the_order():
    out = io.StringIO()
    write_list([Ticket("b", 2), Ticket("a")], out)
    assert out.getvalue() == "ticket,size\na,1\nb,2\n"
