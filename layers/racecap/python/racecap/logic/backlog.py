"""How long a runner on the waiting screen should wait before asking again: the writer's real
backlog, not a fixed schedule.

The paper's waiting screen polled after 10, 20, 40, then every 60 s whatever the load: on a
quiet day a runner waited 10 s for a bib the writer had given in one. The status answer's
``Retry-After`` is now the time the writer still needs for this registration, estimated
from what it measured itself (``WriterPace``): how long a registration took lately from the
queue to its bib, and how many it confirmed per second, against how many are on its queue.
It is 1 s when the writer is idle; the paper's schedule stays the ceiling, so a burst never
makes runners poll more often than the paper's screen did.

The estimate is shared by every environment and rebuilt at most every couple of seconds
(``dal/backlog``): a poll costs no database or queue call for it.
"""

from __future__ import annotations

from racecap.domain import Backlog

# The paper's waiting screen: poll after 10, 20, 40, then every 60 seconds.
BACKOFF_SCHEDULE = ((10, 10), (30, 20), (70, 40))
BACKOFF_LAST = 60

# How many registrations a second the writer confirms at the least while it works through a
# backlog, for the first seconds of a burst before it has measured itself. Conservative: two
# environments (its trigger's maximum concurrency) confirming one 25-item transaction a second
# each would be 50.
SLOWEST_CONFIRMATIONS_PER_S = 20.0
# A registration's time from the queue to its bib when nothing waits before it, until the
# writer has measured it: its trigger gathers a batch for up to a second (blueprint: the
# RegistrationWriter QueueTrigger's max_batching_window_s, kept in step by a unit test).
IDLE_LATENCY_S = 1.0
# Later than its estimate by this much, a registration is not behind the queue the estimate
# knows of (its message was lost, the writer is failing): the paper's back-off, rather than
# asking every second for the minutes until the sweeper re-sends it.
OVERDUE_AFTER_S = 5.0


def paper_wait_s(queued_for_s: float) -> int:
    for until, wait in BACKOFF_SCHEDULE:
        if queued_for_s < until:
            return wait
    return BACKOFF_LAST


def wait_s(queued_for_s: float, backlog: Backlog | None) -> int:
    """Seconds until a registration queued ``queued_for_s`` ago is likely confirmed."""
    ceiling = paper_wait_s(queued_for_s)
    if backlog is None:
        return ceiling
    rate = max(backlog.per_second, SLOWEST_CONFIRMATIONS_PER_S)
    # The writer's last measured latency already includes the queue as it was; the queue as
    # it is now, at the writer's pace, can say it is longer (a burst just arrived). Rounded to
    # the nearest second: asking a little early costs one more read, a little late nothing.
    expected = max(backlog.latency_s or IDLE_LATENCY_S, backlog.waiting / rate)
    if queued_for_s > expected + OVERDUE_AFTER_S:
        return ceiling
    return max(1, min(ceiling, round(expected - queued_for_s)))
