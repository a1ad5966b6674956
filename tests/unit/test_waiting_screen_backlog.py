"""The waiting screen's Retry-After follows the writer's real backlog: 1 s when it is idle,
longer behind a queue, never past the paper's 10/20/40/60 s, and the paper's schedule when
the backlog cannot be told."""

from __future__ import annotations

import pytest
from racecap.registration import status as backlog
from racecap.registration.status import Backlog, wait_s

import blueprint

IDLE = Backlog(waiting=0, per_second=0.0, latency_s=0.0)


def test_an_idle_writer_means_ask_again_in_a_second():
    assert wait_s(0.1, IDLE) == 1
    assert wait_s(0.3, Backlog(waiting=1, per_second=0.0, latency_s=1.2)) == 1
    assert wait_s(3.0, IDLE) == 1  # a little late: keep asking each second


def test_long_past_its_estimate_a_registration_backs_off_like_the_papers_screen():
    assert wait_s(6.5, IDLE) == 10
    assert [wait_s(s, IDLE) for s in (11, 31, 71, 3600)] == [20, 40, 60, 60]
    assert wait_s(9.0, Backlog(waiting=100, per_second=20.0, latency_s=1.0)) == 1  # the queue said 5 s: not yet


def test_behind_a_queue_the_wait_is_the_queue_at_the_writers_measured_pace():
    assert wait_s(0.0, Backlog(waiting=200, per_second=50.0, latency_s=1.0)) == 4
    assert wait_s(1.0, Backlog(waiting=200, per_second=50.0, latency_s=1.0)) == 3  # part of it already waited
    assert wait_s(0.0, Backlog(waiting=0, per_second=40.0, latency_s=3.4)) == 3  # the last ones took 3.4 s


def test_before_the_writer_has_measured_itself_it_is_assumed_slow_not_fast():
    assert wait_s(0.0, Backlog(waiting=100, per_second=0.0, latency_s=0.0)) == round(
        100 / backlog.SLOWEST_CONFIRMATIONS_PER_S
    )


@pytest.mark.parametrize(("queued_for", "ceiling"), [(0, 10), (12, 20), (40, 40), (500, 60)])
def test_the_papers_schedule_stays_the_ceiling_under_a_burst(queued_for, ceiling):
    huge = Backlog(waiting=1_000_000, per_second=100.0, latency_s=600.0)
    assert wait_s(queued_for, huge) == ceiling


def test_without_a_backlog_the_papers_schedule_answers():
    assert [wait_s(s, None) for s in (0, 10, 30, 70)] == [10, 20, 40, 60]


def test_the_idle_latency_is_the_writers_batching_window():
    trigger = next(t for t in blueprint.QUEUE_TRIGGERS if t.function == "RegistrationWriter")
    assert trigger.max_batching_window_s == backlog.IDLE_LATENCY_S
