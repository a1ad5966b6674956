"""An event's waitlist on in-memory stores (issue 40): joining is for a sold-out event with its
list on, behind the device token, a spent proof-of-work and rate limits; an entry counts only
once its address is confirmed, gets the next join number then, and its place is seq - head;
the director's cap refuses the one over it; leaving drops the runner's data; the director's
removal is audited without the address."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from racecap.errors import Busy, NotSoldOut, WaitlistClosed, WaitlistEntryNotFound, WaitlistFull
from racecap.fairness import work
from racecap.fairness.buckets import Decision
from racecap.fairness.identity import Client, DeviceTokenRequired
from racecap.fairness.tokens import InvalidToken, Signer, TokenExpired
from racecap.models import Director
from racecap.races.models import Event, Race, WaitlistSettings
from racecap.waitlist.admin import WaitlistAdmin
from racecap.waitlist.models import WaitlistJoin
from racecap.waitlist.rules import position
from racecap.waitlist.service import CONFIRM_KIND, ON_LIST_KIND, Waitlist

from tests.fakes.catalog import FakeAudit, FakeCatalog
from tests.fakes.stores import FakeQueue, FakeTables
from tests.fakes.waitlist import FakeWaitlist

KEY = b"w" * 32
NOW = 1_900_000_000.0
DIRECTOR = Director(sub="kim", username="Kim")


class Races(FakeCatalog):
    def __init__(self) -> None:
        super().__init__()
        self.left: dict[str, int] = {}

    def availability(self, race_id: str, events: list[Event]) -> dict[str, int]:
        return {e.eventId: self.left.get(e.eventId, 0) for e in events}


class Buckets:
    def __init__(self) -> None:
        self.taken: list[str] = []
        self.refuse: set[str] = set()

    def take(self, address: str | None) -> Decision:
        self.taken.append(str(address))
        return Decision(False, 30) if any(str(address).startswith(r) for r in self.refuse) else Decision(True)


class Proofs:
    def __init__(self) -> None:
        self.spent: set[str] = set()

    def spend_challenge(self, challenge_id: str, ttl_s: int) -> bool:
        if challenge_id in self.spent:
            return False
        self.spent.add(challenge_id)
        return True


class World:
    def __init__(self, *, enabled: bool = True, max_length: int | None = None) -> None:
        self.now = NOW
        self.races = Races()
        opens = datetime.fromtimestamp(NOW, UTC) - timedelta(days=1)
        race = Race(
            raceId="race_1", ownerId="kim", name="City 10K", raceDate="2030-05-01",
            registrationOpensAt=opens, registrationClosesAt=opens + timedelta(days=30), registrationState="OPEN",
        )  # fmt: skip
        self.event = Event(
            raceId="race_1", eventId="evt_1", name="10K", cap=10, priceCents=2500,
            waitlist=WaitlistSettings(enabled=enabled, maxLength=max_length),
        )  # fmt: skip
        self.races.add(race, [self.event])
        self.store = FakeWaitlist()
        self.emails = FakeQueue()
        self.buckets = Buckets()
        self.proofs = Proofs()
        self.signer = Signer(KEY)
        self.waitlist = Waitlist(
            self.races, self.store, self.emails, self.buckets, self.proofs, lambda: self.signer,
            "https://site.example", clock=lambda: self.now, sleep=lambda s: None,
        )  # fmt: skip
        self.tables = FakeTables()
        self.admin = WaitlistAdmin(self.store, FakeAudit(self.tables), clock=lambda: self.now)
        self.devices = 0

    def client(self, device: str | None = "dev_1", address: str | None = "203.0.113.7") -> Client:
        return Client(address=address, device_id=device, headers={})

    def join(self, email: str, device: str = "dev_1", **over: Any) -> None:
        ch = work.issue(self.signer, "race_1", device, 4, now=self.now)
        body = {"email": email, "firstName": "Ada", "lastName": "Lovelace", "challenge": ch["challenge"]}
        body["nonce"] = work.solve(ch["challenge"], 4)
        self.waitlist.join("race_1", "evt_1", over.pop("client", self.client(device)), WaitlistJoin(**body | over))

    def link(self, email: str) -> str:
        """The token in the newest confirmation email to ``email``."""
        sent = [m for m in self.emails.sent if m.to == email and m.kind == CONFIRM_KIND]  # type: ignore[attr-defined]
        return str(sent[-1].data["confirmUrl"]).rsplit("/", 1)[1]  # type: ignore[attr-defined]

    def joined(self, email: str, device: str | None = None) -> str:
        """Joined and confirmed: the entry's token."""
        self.devices += 1
        self.join(email, device or f"dev_{self.devices}")
        token = self.link(email)
        self.waitlist.confirm(token)
        return token


def test_joining_twice_is_one_entry_and_it_counts_only_once_confirmed():
    w = World()
    w.join("Ada@Example.com ")
    w.join("ada@example.com", device="dev_2")
    entries = w.store.entries("race_1", "evt_1")
    assert [(e.state, e.email, e.seq) for e in entries] == [("PENDING", "ada@example.com", None)]
    assert w.store.line("race_1", "evt_1").waiting == 0  # not confirmed: it does not count
    assert [m.kind for m in w.emails.sent] == [CONFIRM_KIND, CONFIRM_KIND]  # type: ignore[attr-defined]
    assert w.waitlist.mine(w.link("ada@example.com")).state == "PENDING"

    view = w.waitlist.confirm(w.link("ada@example.com"))
    assert (view.state, view.position, view.number) == ("WAITING", 1, 1)
    again = w.waitlist.confirm(w.link("ada@example.com"))  # a second click: the same answer, no new number
    assert (again.state, again.number) == ("WAITING", 1)
    assert w.store.line("race_1", "evt_1").seq == 1 and w.store.line("race_1", "evt_1").waiting == 1
    on_list = [m for m in w.emails.sent if m.kind == ON_LIST_KIND]  # type: ignore[attr-defined]
    assert len(on_list) == 1 and on_list[0].data["position"] == 1  # type: ignore[attr-defined]

    # Joining again once on the list changes nothing: the entry keeps its number.
    w.join("ada@example.com", device="dev_3")
    (entry,) = w.store.entries("race_1", "evt_1")
    assert (entry.state, entry.seq) == ("WAITING", 1)


def test_numbers_follow_confirmation_not_joining_and_the_place_is_seq_minus_head():
    w = World()
    for email in ("a@x.io", "b@x.io", "c@x.io"):
        w.join(email, device=email)
    tokens = {e: w.link(e) for e in ("a@x.io", "b@x.io", "c@x.io")}
    w.waitlist.confirm(tokens["c@x.io"])  # c confirms first: c is first in line
    w.waitlist.confirm(tokens["a@x.io"])
    assert w.waitlist.mine(tokens["c@x.io"]).position == 1
    assert w.waitlist.mine(tokens["a@x.io"]).position == 2
    assert w.waitlist.mine(tokens["b@x.io"]).position is None  # still to confirm
    w.store.set_head("race_1", "evt_1", 1)  # offers got past number 1
    assert w.waitlist.mine(tokens["a@x.io"]).position == 1
    assert position(7, 3) == 4 and position(3, 3) == 1


def test_the_directors_cap_refuses_the_one_over_it_at_joining_and_at_confirming():
    w = World(max_length=2)
    w.join("late@x.io", device="late")  # joined while there was room, confirms after the list filled
    w.joined("a@x.io")
    w.joined("b@x.io")
    with pytest.raises(WaitlistFull):
        w.waitlist.confirm(w.link("late@x.io"))
    assert w.store.get("race_1", "evt_1", w.store.entries("race_1", "evt_1")[0].entryId) is not None
    assert w.store.line("race_1", "evt_1").waiting == 2
    with pytest.raises(WaitlistFull):
        w.join("more@x.io", device="more")
    # Someone leaves: there is room again.
    w.waitlist.leave(w.link("a@x.io"))
    assert w.waitlist.confirm(w.link("late@x.io")).number == 3


def test_leaving_drops_the_runners_data_shortens_the_line_and_joining_again_goes_to_the_back():
    w = World()
    first = w.joined("a@x.io")
    w.joined("b@x.io")
    w.waitlist.leave(first)
    w.waitlist.leave(first)  # a repeat does nothing more
    left = w.waitlist.mine(first)
    assert (left.state, left.firstName, left.position) == ("LEFT", None, None)
    stored = [e for e in w.store.entries("race_1", "evt_1") if e.state == "LEFT"]
    assert [(e.email, e.firstName, e.lastName) for e in stored] == [("", "", "")]
    assert w.store.line("race_1", "evt_1").waiting == 1
    w.now += 700  # a new email window
    again = w.joined("a@x.io", device="dev_9")
    assert w.waitlist.mine(again).number == 3  # to the back, with a new number


def test_joining_is_for_a_sold_out_event_with_its_list_on():
    closed = World(enabled=False)
    with pytest.raises(WaitlistClosed):
        closed.join("a@x.io")
    w = World()
    w.races.left["evt_1"] = 2
    with pytest.raises(NotSoldOut):
        w.join("a@x.io")
    assert w.emails.sent == [] and w.store.entries("race_1", "evt_1") == []


def test_joining_needs_a_device_a_fresh_proof_and_room_in_the_buckets():
    w = World()
    with pytest.raises(DeviceTokenRequired):
        w.join("a@x.io", client=w.client(device=None))
    with pytest.raises(work.ProofRefused):
        w.join("a@x.io", nonce=None)
    ch = work.issue(w.signer, "race_1", "dev_1", 4, now=w.now)
    body = WaitlistJoin(email="a@x.io", firstName="A", lastName="B", challenge=ch["challenge"],
                        nonce=work.solve(ch["challenge"], 4))  # fmt: skip
    w.waitlist.join("race_1", "evt_1", w.client(), body)
    with pytest.raises(work.ProofRefused):  # the same proof twice: spent
        w.waitlist.join("race_1", "evt_1", w.client(), body)
    w.buckets.refuse = {"net:"}
    with pytest.raises(Busy) as busy:
        w.join("b@x.io", device="dev_2")
    assert busy.value.retry_after == 30
    # Every bucket is keyed without the address in clear: the address's is its entry id.
    assert not any("@" in key for key in w.buckets.taken)


def test_a_link_of_another_kind_or_forged_or_expired_opens_nothing():
    w = World()
    token = w.joined("a@x.io")
    with pytest.raises(InvalidToken):
        w.waitlist.mine("reg" + token[3:])
    with pytest.raises(InvalidToken):
        Waitlist(w.races, w.store, w.emails, w.buckets, w.proofs, lambda: Signer(b"x" * 32), "https://s").mine(token)
    w.now = datetime(2030, 5, 3, tzinfo=UTC).timestamp()  # after race day
    with pytest.raises(TokenExpired):
        w.waitlist.mine(token)


def test_an_unconfirmed_entry_expires_and_its_address_may_join_afresh():
    w = World()
    w.join("a@x.io")
    token = w.link("a@x.io")
    w.now += 8 * 86400
    with pytest.raises(WaitlistEntryNotFound):
        w.waitlist.confirm(token)
    w.join("a@x.io", device="dev_2")
    assert w.waitlist.confirm(w.link("a@x.io")).number == 1


def test_the_director_sees_the_line_in_order_and_removes_someone_without_their_address_in_the_trail():
    w = World()
    w.joined("a@x.io")
    b = w.joined("b@x.io")
    w.join("pending@x.io", device="p")
    view = w.admin.view("race_1", w.event)
    assert (view.length, view.joined, view.head) == (2, 2, 0)
    assert [(e.email, e.state, e.position) for e in view.entries] == [
        ("a@x.io", "WAITING", 1),
        ("b@x.io", "WAITING", 2),
        ("pending@x.io", "PENDING", None),
    ]
    target = view.entries[0].entryId
    w.admin.remove(DIRECTOR, "race_1", "evt_1", target)
    w.admin.remove(DIRECTOR, "race_1", "evt_1", target)  # a repeat does nothing more
    assert w.admin.view("race_1", w.event).length == 1
    assert [(a["action"], a["target"]) for a in w.tables.audit] == [("waitlist.entry.remove", target)]
    assert "a@x.io" not in repr(w.tables.audit)
    assert w.waitlist.mine(b).position == 2  # seq - head: the number stays, not recounted
    # Removed: joining again does not bring the address back.
    w.join("a@x.io", device="dev_8")
    assert w.waitlist.confirm(w.link("a@x.io")).state == "REMOVED"
    with pytest.raises(WaitlistEntryNotFound):
        w.admin.remove(DIRECTOR, "race_1", "evt_1", "nope")


def test_the_waitlists_emails_say_the_link_and_the_position_and_escape_what_runners_typed():
    from racecap.emails.models import EmailMessage
    from racecap.emails.templates import render

    w = World()
    w.join("ada@x.io", firstName="<Ada>")
    w.waitlist.confirm(w.link("ada@x.io"))
    confirm, joined = (render(m) for m in w.emails.sent if isinstance(m, EmailMessage))
    url = f"https://site.example/#/waitlist/{w.link('ada@x.io')}"
    assert url in confirm.text and url in confirm.html and "&lt;Ada&gt;" in confirm.html
    assert confirm.subject == "Confirm your place on the waitlist for City 10K — 10K"
    assert joined.subject.endswith("at position 1") and url in joined.text and "waitlist entry" in joined.html
    assert "registration" not in joined.html.split("Racecap ·")[1]  # the footer names the entry, not a registration
