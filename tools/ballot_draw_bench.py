"""The ballot's draw at size: seconds and memory to draw 100,000 and 1,000,000 applications in
memory on this machine, the figures ``docs/ballot.md`` sizes the draw's Lambda by.

    python -m tools.ballot_draw_bench                          # 100,000 and 1,000,000, 30 % in groups
    python -m tools.ballot_draw_bench --grouped 0 1000000      # the worst case: every one a ticket

Each size runs in a fresh interpreter, so its peak resident memory is its own:

* **seconds**: tickets from the applications, their order and the winners (``racecap.ballot.draw``)
  for applications already in a list, as the batch job will have read them;
* **traced peak**: ``tracemalloc``'s peak while applications with fresh ids stream into the same
  draw (as pages from DynamoDB would), so it counts the ids, the tickets, the sort's keys and the
  two result lists: what the job holds beyond the interpreter;
* **max RSS**: the whole process at its peak (``getrusage``), interpreter and both runs included.

Not a section of ``tools/bench``: that bench measures the running stack; this needs no stack.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import secrets
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator

from local.runtime import install_layer_path

install_layer_path()

from racecap.ballot.draw import new_seed, order, tickets_of, winners  # noqa: E402

PLACES_SHARE = 0.10  # the case: 1,000 places for 10,000 applications


def applications(count: int, grouped: float, rng: random.Random) -> Iterator[tuple[str, str | None]]:
    """``count`` applications, ``grouped`` of them in groups of 2 to 4, ids shaped as Racecap's
    (a prefix and 22 URL-safe characters)."""
    # A group holds 3 applications on average: this share of tickets puts ``grouped`` of the
    # applications in groups.
    group_share = grouped / (grouped + 3 * (1 - grouped))
    made = 0
    while made < count:
        token = secrets.token_urlsafe(16)
        if rng.random() < group_share:
            size = min(rng.randint(2, 4), count - made)
            yield from ((f"app_{token}-{m}", f"grp_{token}") for m in range(size))
            made += size
        else:
            yield f"app_{token}", None
            made += 1


def measure(count: int, grouped: float) -> dict[str, float]:
    places = int(count * PLACES_SHARE)
    tracemalloc.start()
    drawn = winners(order(new_seed(), tickets_of(applications(count, grouped, random.Random(43)))), places)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tickets = len(drawn.winners) + len(drawn.rest)
    del drawn

    listed = list(applications(count, grouped, random.Random(43)))
    started = time.perf_counter()
    winners(order(new_seed(), tickets_of(listed)), places)
    seconds = time.perf_counter() - started
    return {
        "applications": count,
        "tickets": tickets,
        "seconds": round(seconds, 2),
        "traced_peak_mb": round(peak / 2**20, 1),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("counts", nargs="*", type=int, default=[100_000, 1_000_000])
    cli.add_argument("--grouped", type=float, default=0.30, help="the share of applications in groups")
    cli.add_argument("--one", action="store_true", help="measure one count here and print it as JSON")
    args = cli.parse_args()
    if args.one:
        print(json.dumps(measure(args.counts[0], args.grouped)))
        return
    print(f"{'applications':>12} {'tickets':>9} {'seconds':>8} {'traced peak MB':>15} {'max RSS MB':>11}")
    for count in args.counts:
        child = [sys.executable, "-m", "tools.ballot_draw_bench", "--one", "--grouped", str(args.grouped), str(count)]
        row = json.loads(subprocess.run(child, check=True, capture_output=True, text=True).stdout)
        print(
            f"{row['applications']:>12,} {row['tickets']:>9,} {row['seconds']:>8} "
            f"{row['traced_peak_mb']:>15} {row['max_rss_mb']:>11}"
        )


if __name__ == "__main__":
    main()
