"""The hold's snapshots (issue 38): the registration and confirm calls read the hold the flow's
previous step wrote instead of the table, and a snapshot out of date never decides anything —
its conditional write fails and the table answers, as it did before snapshots."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from racecap.errors import HoldExpired
from racecap.holds.models import HoldPhase

from tests.unit.core_world import World, request


@pytest.fixture
def world() -> World:
    w = World()
    w.race(caps=(3,))
    return w


@contextmanager
def hold_reads(world: World) -> Iterator[list[str]]:
    """The registration service's reads of holds from the table inside the block."""
    reads: list[str] = []
    real = world.attempts.get

    def counted(hold_id: str):  # type: ignore[no-untyped-def]
        reads.append(hold_id)
        return real(hold_id)

    world.attempts.get = counted  # type: ignore[method-assign]
    try:
        yield reads
    finally:
        world.attempts.get = real  # type: ignore[method-assign]


def _pay_in_browser(world: World, hold_id: str) -> None:
    intent_id = world.holds.get(hold_id).intentId
    world.payments.confirm_intent(intent_id, payment_method="pm_card_visa", idempotency_key=f"browser-{intent_id}")


def test_the_registration_and_the_confirm_call_read_no_hold_from_the_table() -> None:
    world = World()
    world.race(caps=(3,))
    hold_id = world.hold_service.hold("race-1", "ev0").holdId
    with hold_reads(world) as reads:
        answer = world.registration.register(hold_id, request(card=None))
    assert answer.status == "PAYMENT_REQUIRED" and reads == []
    _pay_in_browser(world, hold_id)
    with hold_reads(world) as reads:
        assert world.registration.confirm(hold_id).status == "QUEUED"
    assert reads == []
    assert world.holds.get(hold_id).status == HoldPhase.QUEUED
    assert world.write_queued() == []
    assert world.holds.get(hold_id).status == HoldPhase.CONFIRMED


def test_without_snapshots_the_table_answers_the_same(world: World) -> None:
    hold_id = world.hold_service.hold("race-1", "ev0").holdId
    world.hints.kept.clear()  # Redis lost them
    with hold_reads(world) as reads:
        world.registration.register(hold_id, request(card=None))
    assert reads == [hold_id]
    world.hints.kept.clear()
    _pay_in_browser(world, hold_id)
    with hold_reads(world) as reads:
        assert world.registration.confirm(hold_id).status == "QUEUED"
    assert reads == [hold_id]


def test_a_snapshot_of_a_hold_released_since_does_not_register_it(world: World) -> None:
    hold_id = world.hold_service.hold("race-1", "ev0").holdId
    hold = world.holds.get(hold_id)
    world.holds.release(hold, HoldPhase.RELEASED)  # behind the snapshot's back (a sweeper's own release)
    assert world.hints.get(hold_id).status == HoldPhase.HELD
    with pytest.raises(HoldExpired):
        world.registration.register(hold_id, request(card=None))
    # The intent comes before the write that finds the hold gone: created, recorded nowhere,
    # its client secret never handed out, so nobody can pay it.
    assert world.holds.get(hold_id).intentId is None
    assert world.payments.succeeded == [] and world.queue.sent == []


def test_a_confirm_whose_snapshot_is_behind_the_writer_answers_from_the_table_and_registers_once(
    world: World,
) -> None:
    hold_id = world.hold_service.hold("race-1", "ev0").holdId
    world.registration.register(hold_id, request(card=None))
    _pay_in_browser(world, hold_id)
    paying = world.hints.get(hold_id)
    world.registration.confirm(hold_id)
    assert world.write_queued() == []
    world.hints.keep(paying)  # the snapshot still says PAYING (it stays so after the confirm)
    assert world.registration.confirm(hold_id).status == "CONFIRMED"
    assert world.write_queued() == []  # the duplicate message changed nothing
    assert list(world.tables.regs) == [world.holds.get(hold_id).registrationId]


def test_after_a_declined_card_the_next_send_reads_the_hold_from_the_table(world: World) -> None:
    """The snapshot of a paying hold is the confirm call's: a re-send reads the table, where a
    decline's return to HELD (its options' stock given back) would show."""
    hold_id = world.hold_service.hold("race-1", "ev0").holdId
    with pytest.raises(Exception, match="declined"):
        world.registration.register(hold_id, request(card="pm_card_chargeDeclined"))
    assert world.hints.get(hold_id).status == HoldPhase.PAYING
    with hold_reads(world) as reads:
        answer = world.registration.register(hold_id, request(card="pm_card_visa"))
    assert answer.status == "QUEUED" and reads[:1] == [hold_id]
