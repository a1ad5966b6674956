"""The opening-queue burst's verdicts (``tools/burst/opening_queue.py``): Spearman's rank
correlation and the bounds it is judged by, and the checks on what the runners saw."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from tools.burst.config import BurstConfig, BurstRun
from tools.burst.opening_queue import PRE_RHO_MAX, after, phases, pre_bound, spearman


def test_spearman_is_one_for_the_same_order_minus_one_reversed_and_averages_ties() -> None:
    xs = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert spearman(xs, [10.0, 20.0, 30.0, 40.0, 50.0]) == pytest.approx(1.0)
    assert spearman(xs, [5.0, 4.0, 3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    # The textbook example: d^2 sums to 2 over n = 5 -> 1 - 6*2/(5*24) = 0.9
    assert spearman(xs, [1.0, 3.0, 2.0, 4.0, 5.0]) == pytest.approx(0.9)
    assert spearman([1.0, 1.0, 2.0], [1.0, 2.0, 3.0]) == pytest.approx(math.sqrt(3) / 2)
    assert spearman([1.0, 2.0], [2.0, 1.0]) is None  # too few to say anything


def test_the_pool_bound_is_the_issues_for_the_full_run_and_wider_where_a_fair_draw_varies_more() -> None:
    assert pre_bound(2000) == PRE_RHO_MAX == 0.1
    assert pre_bound(160) == pytest.approx(4.4 / math.sqrt(159))
    # A fair draw's rho has standard deviation 1/sqrt(n-1): the bound is 4.4 of them.
    rng = random.Random(11)
    n = 160
    rhos = []
    for _ in range(300):
        drawn = list(range(n))
        rng.shuffle(drawn)
        rhos.append(spearman([float(i) for i in range(n)], [float(d) for d in drawn]) or 0.0)
    sd = math.sqrt(sum(r * r for r in rhos) / len(rhos))
    assert sd == pytest.approx(1 / math.sqrt(n - 1), rel=0.2)
    assert max(abs(r) for r in rhos) < pre_bound(n)


class _Clients:
    def __init__(self, state: dict[str, Any]) -> None:
        self.dynamodb = self
        self._state = state

    def get_item(self, **_: Any) -> dict[str, Any]:
        from racecap.aws.items import to_item

        return {"Item": to_item(self._state)}


def _run(tmp_path: Path, rows: list[dict[str, Any]], seq: int, pool: int, later: int) -> list[str]:
    cfg = BurstConfig(scenario="opening-queue", runners=pool, options={"later_runners": later})
    run = BurstRun(
        cfg,
        "http://x",
        "race_1",
        [],
        tmp_path,
        lambda _m: None,
        clients=_Clients(  # type: ignore[arg-type]
            {"pk": "QUEUE#race_1", "sk": "STATE", "seq": seq, "drawSize": pool}
        ),
    )
    (tmp_path / "outcomes.jsonl").write_text("".join(json.dumps({"e": "queue", **r}) + "\n" for r in rows))
    return after(run, {"event_caps": []})


def _runners(pool: int, later: int, order: list[int]) -> list[dict[str, Any]]:
    rows = []
    for a in range(1, pool + later + 1):
        number = order[a - 1] if a <= pool else a
        row = {"joined": 1000 * a, "answered": 1000 * a + 500, "arrival": a, "number": number, "tab2": None}
        rows.append({**row, "admitted": 10**6 + number})
    return rows


def test_a_fair_queue_passes_and_an_arrival_ordered_pool_a_reordered_tail_or_a_second_place_fail(
    tmp_path: Path,
) -> None:
    pool, later = 200, 40
    shuffled = list(range(1, pool + 1))
    random.Random(5).shuffle(shuffled)
    fair = _runners(pool, later, shuffled)
    fair[3]["tab2"] = fair[3]["arrival"]
    assert _run(tmp_path, fair, pool + later, pool, later) == []

    in_order = _runners(pool, later, list(range(1, pool + 1)))
    assert any("pool rho" in p for p in _run(tmp_path, in_order, pool + later, pool, later))

    reversed_tail = _runners(pool, later, shuffled)
    for r in reversed_tail[pool:]:
        r["number"] = 2 * pool + later + 1 - r["arrival"]
    assert any(
        "admitted before one that joined earlier" in p for p in _run(tmp_path, reversed_tail, pool + later, pool, later)
    )

    # Joins in flight together may swap (a loaded machine answers them late): not a violation.
    overlapping = _runners(pool, later, shuffled)
    for r in overlapping[pool:]:
        r["answered"] = r["joined"] + 5000  # each still in flight when the next four were sent
    for a, b in zip(overlapping[pool::2], overlapping[pool + 1 :: 2], strict=False):
        a["number"], b["number"] = b["number"], a["number"]
    assert _run(tmp_path, overlapping, pool + later, pool, later) == []

    second = _runners(pool, later, shuffled)
    second[3]["tab2"] = pool + later + 1
    problems = _run(tmp_path, second, pool + later + 1, pool, later)
    assert any("second tab" in p for p in problems) and any("issued" in p for p in problems)


def test_the_phases_put_a_pause_between_the_arrivals_before_and_after_the_opening() -> None:
    cfg = BurstConfig(scenario="opening-queue", runners=2000, arrival_s=300)
    assert phases(cfg) == [
        {"name": "before the opening", "duration": 300, "arrivalCount": 2000},
        {"pause": 10},
        {"name": "after the opening", "duration": 60, "arrivalCount": 300},
    ]


def test_given_runners_who_stay_on_the_form_by_design_when_summarized_then_success_counts_those_who_registered(
    tmp_path: Path,
) -> None:
    from tools.burst.summary import summarize

    # Three runners got a place; one stayed on the form (queue.js's "held" outcome), two
    # registered and both were confirmed: that is every runner who tried.
    lines = [{"e": "arrive", "t": 1000 + i} for i in range(3)]
    lines += [{"e": "held", "t": 2000 + i} for i in range(3)]
    lines += [{"e": "confirmed", "t": 5000 + i} for i in range(2)]
    lines += [{"e": "runner", "outcome": "confirmed"}] * 2 + [{"e": "runner", "outcome": "held"}]
    outcomes = tmp_path / "outcomes.jsonl"
    outcomes.write_text("\n".join(json.dumps(x) for x in lines))
    cfg = BurstConfig(scenario="opening-queue", runners=3)
    s = summarize(cfg, outcomes, tmp_path / "no-report.json", None, None)
    assert s["held"] == 3
    assert s["held_without_registering"] == 1
    assert s["success_rate"] == 1
    # One of the two who registered not confirmed: half of them, not two thirds of everyone.
    short = [x for x in lines if x["e"] in ("arrive", "held")] + [{"e": "confirmed", "t": 5000}]
    short += [{"e": "runner", "outcome": o} for o in ("confirmed", "not_confirmed", "held")]
    outcomes.write_text("\n".join(json.dumps(x) for x in short))
    assert summarize(cfg, outcomes, tmp_path / "no-report.json", None, None)["success_rate"] == 0.5
