"""Offers from an event's waitlist on in-memory stores (issue 40, slice 2): the batch offers pooled
places in line order (head moves, one email each with a ``wto`` link), ends expired offers and
offers their places on, gives back what nobody waits for; a claim is the runner's own hold at the
price in force then, repeatable, refused past its window (410, passed on), after registration
closed (409), or once the address registered another way; closing returns every place and tells
each runner still waiting once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from racecap.errors import EmailAlreadyRegistered, OfferExpired, OfferGone, RegistrationClosed
from racecap.fairness.tokens import Signer
from racecap.races.models import Event, PriceTier, Race, WaitlistSettings
from racecap.waitlist.closing import CLOSED_KIND, WaitlistClosing
from racecap.waitlist.models import WaitlistEntry
from racecap.waitlist.offers import OFFER_KIND, OfferBatch, OfferClaims
from racecap.waitlist.rules import iso

from tests.fakes.catalog import FakeCatalog
from tests.fakes.stores import FakeHolds, FakeQueue, FakeTables
from tests.fakes.waitlist import FakeWaitlist

NOW = 1_900_000_000.0
EV = ("race_1", "evt_1")


class World:
    def __init__(self, waiting: int = 5, cap: int = 3) -> None:
        self.now = NOW
        self.tables = FakeTables()
        self.catalog = FakeCatalog(self.tables)
        opens = datetime.fromtimestamp(NOW, UTC) - timedelta(days=1)
        self.race = Race(
            raceId="race_1", ownerId="kim", name="City 10K", raceDate="2030-05-01", registrationOpensAt=opens,
            registrationClosesAt=opens + timedelta(days=2), registrationState="OPEN",
        )  # fmt: skip
        later = datetime.fromtimestamp(NOW + 3600, UTC)
        self.event = Event(
            raceId="race_1", eventId="evt_1", name="10K", cap=cap, priceCents=2500, shards=1,
            priceTiers=[PriceTier(startsAt=later, priceCents=3500)],
            waitlist=WaitlistSettings(enabled=True, offerWindowHours=2),
        )  # fmt: skip
        self.catalog.add(self.race, [self.event])
        self.tables.shards[EV]["SHARD#000"][1] = cap  # sold out
        self.store = FakeWaitlist(self.tables)
        self.emails = FakeQueue()
        self.signer = Signer(b"o" * 32)
        self.came_back: list[tuple[str, str]] = []
        clock = lambda: self.now  # noqa: E731
        self.closing = WaitlistClosing(
            self.store, self.catalog, self.emails, came_back=lambda r, e: self.came_back.append((r, e)), clock=clock
        )  # type: ignore[arg-type]
        self.batch = OfferBatch(
            self.store, self.catalog, self.emails, lambda: self.signer, "https://site.example",  # type: ignore[arg-type]
            came_back=lambda r, e: self.came_back.append((r, e)), closing=self.closing,
            registered=self.store.registered, clock=clock,
        )  # fmt: skip
        self.holds = FakeHolds(self.tables)
        self.claims = OfferClaims(
            self.store, self.catalog, self.holds, self.batch, lambda: self.signer,  # type: ignore[arg-type]
            self.store.registered, clock=clock,
        )  # fmt: skip
        self.emails_in_line = [f"r{i}@example.com" for i in range(1, waiting + 1)]
        for email in self.emails_in_line:
            entry = WaitlistEntry(
                entryId=email.split("@")[0], raceId="race_1", eventId="evt_1", state="PENDING", email=email,
                firstName="R", joinedAt=iso(NOW),
            )  # fmt: skip
            self.store.put_pending(entry, int(NOW))
            self.store.confirm(entry, self.store.line(*EV), None, iso(NOW))

    def free(self, k: int = 1) -> None:
        """``k`` places freed to the pool (what ``places.returns`` does while runners wait)."""
        self.store.pool(*EV, "SHARD#000", k)

    def offered_to(self) -> list[str]:
        return [m.to for m in self.emails.sent if m.kind == OFFER_KIND]  # type: ignore[attr-defined]

    def token(self, email: str) -> str:
        sent = [m for m in self.emails.sent if m.kind == OFFER_KIND and m.to == email]  # type: ignore[attr-defined]
        return str(sent[-1].data["claimUrl"]).rsplit("/", 1)[1]  # type: ignore[attr-defined]


@pytest.fixture
def w() -> World:
    return World()


def test_pooled_places_go_to_the_next_runners_in_line_order_and_the_head_moves(w):
    w.free(2)
    assert w.batch.run() == {"expired": 0, "useless": 0, "offered": 2, "returned": 0}
    assert w.offered_to() == ["r1@example.com", "r2@example.com"]
    line = w.store.line(*EV)
    assert (line.head, line.pool, line.offered, line.waiting) == (2, 0, 2, 3)
    assert w.tables.taken(*EV) == 3  # the offered places never left their shard
    assert w.token("r1@example.com").startswith("wto.")
    offer = w.store.get_offer(*EV, "r1")
    assert offer.expiresAt == iso(NOW + 2 * 3600) and offer.priceCents == 2500
    assert w.batch.run()["offered"] == 0  # nothing pooled: nothing more offered
    assert EV not in w.store.working or w.store.line(*EV).offered  # offers out keep it on the list


def test_an_offer_never_outlives_registration(w):
    w.catalog.races["race_1"] = (
        w.race.model_copy(update={"registrationClosesAt": datetime.fromtimestamp(NOW + 600, UTC)}),
        [w.event],
    )
    w.free()
    w.batch.run()
    assert w.store.get_offer(*EV, "r1").expiresAt == iso(NOW + 600)


def test_an_expired_offer_passes_its_place_to_the_next_runner(w):
    w.free()
    w.batch.run()
    w.now += 2 * 3600
    assert w.batch.run() == {"expired": 1, "useless": 0, "offered": 1, "returned": 0}
    assert w.store.get_offer(*EV, "r1").state == "EXPIRED"
    assert w.offered_to() == ["r1@example.com", "r2@example.com"]
    assert w.store.line(*EV).expired == 1


def test_a_claim_is_the_runners_own_hold_at_the_price_in_force_then_and_a_repeat_answers_the_same(w):
    w.free()
    w.batch.run()
    w.now += 3601  # the next tier began after the offer
    created = w.claims.claim(w.token("r1@example.com"))
    assert created.priceCents == 3500
    hold = w.holds.get(created.holdId)
    assert (hold.offerEntry, hold.offerEmail, hold.shard, hold.clientLimits) == (
        "r1",
        "r1@example.com",
        "SHARD#000",
        {},
    )
    assert w.tables.taken(*EV) == 3  # the place was already counted: nothing taken from the public
    assert w.claims.claim(w.token("r1@example.com")).holdId == created.holdId
    line = w.store.line(*EV)
    assert (line.offered, line.claimed) == (0, 1)


def test_a_claim_past_its_window_is_refused_and_the_place_goes_to_the_next_at_once(w):
    w.free()
    w.batch.run()
    w.now += 2 * 3600 + 1
    with pytest.raises(OfferExpired):
        w.claims.claim(w.token("r1@example.com"))
    assert w.offered_to() == ["r1@example.com", "r2@example.com"]  # not at the next run: now
    with pytest.raises(OfferGone):
        w.claims.claim(w.token("r1@example.com"))


def test_declining_and_registering_another_way_pass_the_place_on(w):
    w.free()
    w.batch.run()
    w.claims.decline(w.token("r1@example.com"))
    w.claims.decline(w.token("r1@example.com"))  # a repeat does nothing more
    assert w.offered_to() == ["r1@example.com", "r2@example.com"]
    w.store.claims.add(("race_1", "r2@example.com"))
    with pytest.raises(EmailAlreadyRegistered):
        w.claims.claim(w.token("r2@example.com"))
    assert w.store.get_offer(*EV, "r2").state == "USELESS"
    assert w.offered_to()[-1] == "r3@example.com"


def test_a_runner_who_registered_another_way_meanwhile_is_passed_over_at_the_next_run(w):
    w.free()
    w.batch.run()
    w.store.claims.add(("race_1", "r1@example.com"))  # the public sale, before their claim
    assert w.batch.run() == {"expired": 0, "useless": 1, "offered": 1, "returned": 0}
    assert w.store.get_offer(*EV, "r1").state == "USELESS"
    assert w.offered_to() == ["r1@example.com", "r2@example.com"]
    assert w.tables.taken(*EV) == 3  # the place stayed counted: offered on, never on sale
    with pytest.raises(OfferGone):
        w.claims.claim(w.token("r1@example.com"))


def test_places_nobody_waits_for_go_back_to_the_public(w):
    w.free(7)  # a team's places, more than the five waiting
    counts = w.batch.run()
    assert (counts["offered"], counts["returned"]) == (5, 2)
    assert w.tables.taken(*EV) == 1 and w.came_back == [EV]
    assert w.store.line(*EV).pool == 0


def test_closing_returns_offered_and_pooled_places_and_tells_each_waiting_or_offered_runner_once(w):
    w.free(2)
    w.batch.run()  # r1, r2 offered
    w.free(1)  # pooled, not offered yet
    w.closing.close(*EV)
    w.closing.close(*EV)  # safe to repeat
    assert w.tables.taken(*EV) == 0
    assert {o.state for o in w.store.offers(*EV)} == {"CLOSED"}
    closed = [m for m in w.emails.sent if m.kind == CLOSED_KIND]  # type: ignore[attr-defined]
    # r1 and r2 were told a place was theirs: they hear it went with the list.
    told = {m.to: m.data["offerEnded"] for m in closed}
    assert told == {f"r{i}@example.com": i <= 2 for i in range(1, 6)}
    assert len({m.dedupKey for m in closed}) == 5
    with pytest.raises((RegistrationClosed, OfferGone)):
        w.claims.claim(w.token("r1@example.com"))


def test_after_registration_closed_a_claim_is_a_409(w):
    w.free()
    w.batch.run()
    w.now = w.race.registrationClosesAt.timestamp() + 1
    with pytest.raises(RegistrationClosed):
        w.claims.claim(w.token("r1@example.com"))


def test_a_ballots_group_is_offered_together_or_passed_over_whole_and_offered_first_once_it_fits():
    """A ballot's line (issue 43): r1-r2 and r3-r5 were drawn as groups, r6 and r7 alone."""
    w = World(waiting=7, cap=7)
    for entry_id, group in (("r1", "G"), ("r2", "G"), ("r3", "H"), ("r4", "H"), ("r5", "H")):
        item = w.store.items[(*EV, entry_id)]
        w.store.items[(*EV, entry_id)] = item.model_copy(update={"groupId": group, "ballotApplicationId": entry_id})
    w.free(3)
    assert w.batch.run()["offered"] == 3
    # G fits the three places and is offered whole; H (three) does not fit the one left: passed
    # over whole, never split, and r6 behind it gets the place, as the draw's walk does.
    assert w.offered_to() == ["r1@example.com", "r2@example.com", "r6@example.com"]
    line = w.store.line(*EV)
    assert (line.head, line.pool, line.offered, line.waiting) == (6, 0, 3, 4)

    # The three offers lapse: H, first in line, fits the three places now and is offered whole;
    # the head stays where the offers had got to (r6), since H is behind it.
    w.now += 3 * 3600
    counts = w.batch.run()
    assert (counts["expired"], counts["offered"]) == (3, 3)
    assert w.offered_to()[3:] == ["r3@example.com", "r4@example.com", "r5@example.com"]
    line = w.store.line(*EV)
    assert (line.head, line.pool, line.offered, line.waiting) == (6, 0, 3, 1)
    assert w.store.get(*EV, "r7").state == "WAITING"


def test_a_group_that_does_not_fit_keeps_the_places_for_a_runner_behind_it_and_nothing_is_split():
    w = World(waiting=3, cap=3)
    for entry_id in ("r1", "r2"):
        item = w.store.items[(*EV, entry_id)]
        w.store.items[(*EV, entry_id)] = item.model_copy(update={"groupId": "G", "ballotApplicationId": entry_id})
    w.free(1)
    w.batch.run()
    assert w.offered_to() == ["r3@example.com"]  # the group of two waits whole for two places
    w.free(1)
    w.batch.run()
    assert w.offered_to() == ["r3@example.com"]  # one place, nobody it fits: kept in the pool
    assert w.store.line(*EV).pool == 1
    w.free(1)
    w.batch.run()
    assert w.offered_to()[1:] == ["r1@example.com", "r2@example.com"]
