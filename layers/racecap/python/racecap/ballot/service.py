"""The runners' side of an event's ballot: apply (alone or as a group), confirm the address,
see the application, withdraw it. The waitlist's join (``waitlist.service``) is the model.

* **Applying** is open only while the ballot's window is, and sits behind the opening queue's
  protections, reused: the device token, a solved proof-of-work challenge (bound to the race and
  the device, spent once) and token buckets per address, network and device, so that a fake
  application costs what a fake place in the queue costs. The age rule on race day is checked
  for each runner. A group (up to the event's largest team) is written in one transaction, each
  runner an application of their own with the group's id: drawn together or not at all.
* **One application per address per race's ballot**, by a claim of its own (``ballot.store``),
  not the race's registration claim: a single applicant whose address has one already gets the
  same 202 and the link to it again (nobody learns whose address applied); a group with such an
  address is refused whole (409), as it cannot be written in part.
* **An application counts once its address is confirmed** by the signed link (``bal`` token), in
  the window; it is counted on its day in the race's zone, in the same transaction.
* **Withdrawing** with the same link, until the window closes, drops the runner's data at once,
  frees the address to apply again and leaves the rest of a group in the ballot.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from racecap.aws.keys import address_digest, waitlist_entry_id
from racecap.aws.queues import MessageQueue
from racecap.aws.transactions import ConditionFailed
from racecap.ballot.models import Applicant, Application, BallotApply, DrawResult, DrawView, MyApplication
from racecap.ballot.store import LIST, BallotStore
from racecap.emails.models import EmailMessage
from racecap.errors import (
    BallotApplicationNotFound,
    BallotApplied,
    BallotClosed,
    BallotNotDrawn,
    Conflict,
    ValidationFailed,
)
from racecap.fairness.identity import Client
from racecap.fairness.tokens import InvalidToken, Signer
from racecap.observability import metrics
from racecap.questions.models import AnswerView, StoredAnswers
from racecap.races.models import Event, Race
from racecap.races.rules import check_age
from racecap.setup.rules import new_id
from racecap.waitlist.rules import PENDING_DAYS, iso, link_expiry
from racecap.waitlist.service import Buckets, Proofs, Races, pass_protections, runners_event
from racecap.waitlist.store import WaitlistStore as Line

CONFIRM_KIND = "ballot-confirm"
# Applying sends an email: each address, network and device may apply this many times at once,
# then once every APPLY_EVERY_S (a runner applies once; a script meets the buckets).
APPLY_BURST = 3
APPLY_EVERY_S = 60
CONFIRM_EMAIL_WINDOW_S = 600  # one confirmation email per application in this window
VERIFY = (
    'for p in $(seq 0 $((PAGES - 1))); do curl -s "$RACE_API/ballot/list?page=$p"; done > list.csv && '
    "python3 tools/verify_draw.py --seed {seed} --commitment {commitment} --places {places} list.csv > drawn.csv"
)


class AnswerCheck(Protocol):
    """The event's questions (``questions.service.Questions``): check a runner's answers, read them back."""

    def check(self, race_id: str, event_id: str, answers: Any) -> StoredAnswers | None: ...

    def described(self, race_id: str, event_id: str, answers: str | None, version: int | None) -> list[AnswerView]: ...


class Ballots:
    def __init__(
        self,
        races: Races,
        store: BallotStore,
        emails: MessageQueue,
        buckets: Buckets,
        proofs: Proofs,
        signer: Callable[[], Signer],
        site_url: str,
        line: Line | None = None,
        questions: AnswerCheck | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._questions = questions  # the event's questions, asked at apply as at registration
        self._line = line  # the drawn line (the event's waitlist): an application's result
        self._races = races
        self._store = store
        self._emails = emails
        self._buckets = buckets
        self._proofs = proofs
        self._signer = signer  # read on first use: the key comes from the secret store
        self._site = site_url.rstrip("/")
        self._clock = clock

    # -- applying ----------------------------------------------------------------------------------
    def apply(self, race_id: str, event_id: str, client: Client, body: BallotApply) -> None:
        """Queue a confirmation link to each runner's address; raises ``BallotClosed``,
        ``BallotApplied`` (a group with an address that applied already), the age rule's and
        the group size's 400s, the proof's and the buckets' refusals."""
        device = client.require_device()
        race, event = self._event(race_id, event_id)
        now = self._clock()
        self._in_window(race, event, now, "takes no applications")
        runners: list[Applicant] = [body, *body.partners]
        self._check_group(event, len(runners))
        if len({r.email for r in runners}) != len(runners):
            # One address, one application: the second runner with it has "applied already" (a
            # conflict of values the document cannot state, not a malformed request).
            raise BallotApplied("Each runner in a group needs an address of their own: one is given twice.")
        for i, runner in enumerate(runners):
            try:
                check_age(race, event, runner.dateOfBirth)
            except ValidationFailed as exc:
                raise ValidationFailed(exc.message, fields=_runners({"dateOfBirth": exc.message}, i)) from exc
        answered = [self._answers(race_id, event_id, runner, i) for i, runner in enumerate(runners)]
        # The address's bucket under a digest (no address in Redis's keys), as the waitlist's.
        address = address_digest(race_id, body.email)
        pass_protections(
            self._signer(), self._buckets, self._proofs, race_id, client, device, address, body.challenge, body.nonce,
            busy="You applied a moment ago: check your inbox (and spam folder), or try later.",
        )  # fmt: skip
        group_id = new_id("grp") if body.partners else None
        at = iso(now)
        apps = [
            Application(
                applicationId=new_id("app"),
                raceId=race_id,
                eventId=event_id,
                state="PENDING",
                email=runner.email,
                firstName=runner.firstName,
                lastName=runner.lastName,
                dateOfBirth=runner.dateOfBirth.isoformat(),
                groupId=group_id,
                groupSize=len(runners),
                answers=stored.to_json() if stored else None,
                questionsVersion=stored.questionsVersion if stored else None,
                appliedAt=at,
                ttl=int(now) + PENDING_DAYS * 86400,
            )
            for runner, stored in zip(runners, answered, strict=True)
        ]
        try:
            self._store.put_pending(apps, int(now))
        except ConditionFailed as exc:
            if body.partners:
                raise BallotApplied(
                    "One of these addresses has applied to this race's ballot already: each runner applies once "
                    "(withdraw the other application from its emailed link first). Nothing was written."
                ) from exc
            # The address applied already: the same answer, and the link to that application again.
            kept = self._store.claim(race_id, body.email)
            old = self._store.get(race_id, kept[1], kept[0]) if kept else None
            if old is not None:
                self._send_link(race, old, now)
            return
        for app in apps:
            self._send_link(race, app, now, leader=body.firstName if app.email != body.email else None)
        metrics.add_metric(name="BallotApplicationsAsked", unit="Count", value=len(apps))

    def _answers(self, race_id: str, event_id: str, runner: Applicant, i: int) -> StoredAnswers | None:
        """A runner's answers checked against the event's questions as they stand; a partner's
        errors under their own path (``partners.<n>.answers.<id>``)."""
        if self._questions is None:
            return None
        try:
            return self._questions.check(race_id, event_id, runner.answers)
        except ValidationFailed as exc:
            raise ValidationFailed(exc.message, fields=_runners(exc.fields or {}, i)) from exc

    # -- the link ------------------------------------------------------------------------------
    def confirm(self, token: str) -> MyApplication:
        """The address is confirmed: the application counts (a repeat answers the same)."""
        race, event, app = self._application(token)
        now = self._clock()
        if app.state == "PENDING" and (app.ttl or 0) <= now:
            raise BallotApplicationNotFound("This link's application expired before it was confirmed: apply again.")
        if app.state != "PENDING":
            return self._view(race, event, app, token)
        self._in_window(race, event, now, "closed before this application was confirmed: it does not count")
        try:
            self._store.confirm(app, _day(now, race.timeZone), iso(now))
            metrics.add_metric(name="BallotApplicationsConfirmed", unit="Count", value=1)
        except ConditionFailed:
            pass  # a second click of the same link got there first: show what it did
        again = self._store.get(app.raceId, app.eventId, app.applicationId)
        if again is None:
            raise BallotApplicationNotFound("This link's application is gone: apply again.")
        return self._view(race, event, again, token)

    def mine(self, token: str | None) -> MyApplication:
        race, event, app = self._application(token)
        return self._view(race, event, app, token or "")

    def withdraw(self, token: str | None) -> None:
        """Out of the ballot (a repeat does nothing more); the runner's name and address go at once."""
        for _ in range(3):
            race, event, app = self._application(token)
            if app.state == "WITHDRAWN":
                return
            self._in_window(race, event, self._clock(), "has closed: the application stays in the draw", upcoming=True)
            confirmed_day = (
                _day(datetime.fromisoformat(app.confirmedAt).timestamp(), race.timeZone) if (app.confirmedAt) else None
            )
            try:
                self._store.withdraw(app, iso(self._clock()), confirmed_day)
                metrics.add_metric(name="BallotApplicationsWithdrawn", unit="Count", value=1)
                return
            except ConditionFailed:
                continue  # confirmed in between: withdraw from where it is now
        raise Conflict("Your application kept changing while you withdrew it; please retry.")

    # -- the published draw ---------------------------------------------------------------------------
    def published(self, race_id: str, event_id: str) -> DrawView:
        """The draw as the race page shows it once it ran: the seed revealed, the figures."""
        self._event(race_id, event_id)
        record = self._store.draw_record(race_id, event_id)
        if record is None:
            raise BallotNotDrawn(f"The ballot for event {event_id} has not been drawn.")
        return DrawView(
            raceId=race_id,
            eventId=event_id,
            commitment=record.commitment,
            seed=record.seed,
            places=record.places,
            applications=record.applications,
            tickets=record.tickets,
            winners=record.winners,
            winningTickets=record.winningTickets,
            listPages=record.listPages,
            drawnAt=record.drawnAt,
            verify=VERIFY.format(seed=record.seed, commitment=record.commitment, places=record.places),
        )

    def list_page(self, race_id: str, event_id: str, page: int) -> str:
        """One page of the published list (``ticket,size``, by id; the first page has the header)."""
        view = self.published(race_id, event_id)
        if page >= view.listPages:
            raise BallotNotDrawn(f"The list has {view.listPages} pages (0 to {view.listPages - 1}).")
        text = self._store.page(race_id, event_id, LIST, page) or ""
        return text + "\n" if text else ""

    def url(self, token: str) -> str:
        # In the fragment: never sent to a server, so never in an access log or a Referer.
        return f"{self._site}/#/ballot/{token}"

    # -- helpers -------------------------------------------------------------------------------
    def _event(self, race_id: str, event_id: str) -> tuple[Race, Event]:
        return runners_event(self._races, race_id, event_id)

    @staticmethod
    def _in_window(race: Race, event: Event, now: float, what: str, *, upcoming: bool = False) -> None:
        ballot = event.ballot
        phase = ballot.phase(datetime.fromtimestamp(now, UTC))
        if phase == "OPEN" or (upcoming and phase == "UPCOMING"):
            return
        if phase == "NONE":
            raise BallotClosed(f"{event.name} has no ballot.")
        if phase == "UPCOMING":
            raise BallotClosed(f"The ballot for {event.name} opens {_local(ballot.opensAt, race.timeZone)}.")
        raise BallotClosed(f"The ballot for {event.name} {what}.")

    @staticmethod
    def _check_group(event: Event, size: int) -> None:
        if size == 1:
            return
        if event.teamMaxSize is None:
            message = f"{event.name} takes single applications only (it has no team entries)."
            raise ValidationFailed(message, fields={"partners": message})
        if size > event.teamMaxSize:
            message = f"A group for {event.name} is at most {event.teamMaxSize} runners; this one is {size}."
            raise ValidationFailed(message, fields={"partners": message})

    def _token(self, race: Race, app: Application) -> str:
        claims = {
            "r": race.raceId,
            "e": app.eventId,
            "a": app.applicationId,
            "exp": link_expiry(race.raceDate, self._clock()),
        }
        return self._signer().sign("bal", claims)

    def _send_link(self, race: Race, app: Application, now: float, leader: str | None = None) -> None:
        _, event = self._event(race.raceId, app.eventId)
        token = self._token(race, app)
        window = int(now // CONFIRM_EMAIL_WINDOW_S)
        self._emails.send(
            EmailMessage(
                kind=CONFIRM_KIND,
                dedupKey=f"{CONFIRM_KIND}:{app.applicationId}:{window}",
                to=app.email,
                data={
                    "firstName": app.firstName,
                    "raceName": race.name,
                    "eventName": event.name,
                    "applicationId": app.applicationId,
                    "confirmUrl": self.url(token),
                    "groupSize": app.groupSize,
                    **({"appliedBy": leader} if leader else {}),
                    "closesAt": _local(event.ballot.closesAt, race.timeZone),
                },
            )
        )

    def _application(self, token: str | None) -> tuple[Race, Event, Application]:
        claims = self._signer().verify("bal", token or "", now=self._clock())
        race_id, event_id, app_id = claims.get("r"), claims.get("e"), claims.get("a")
        if not (isinstance(race_id, str) and isinstance(event_id, str) and isinstance(app_id, str)):
            raise InvalidToken("The link to your ballot application is malformed.")
        race, event = self._event(race_id, event_id)
        app = self._store.get(race_id, event_id, app_id)
        if app is None:
            raise BallotApplicationNotFound("This link no longer leads to an application: apply again.")
        return race, event, app

    def _result(self, app: Application) -> tuple[DrawResult | None, int | None]:
        """After the draw: WON (numbers up to the winners' places) or WAITLIST and the number
        after the winners; None before (or for an application that is not in the draw)."""
        if app.state != "CONFIRMED" or not app.email or self._line is None:
            return None, None
        record = self._store.draw_record(app.raceId, app.eventId)
        if record is None or record.state == "ORDERED":
            return None, None
        entry = self._line.get(app.raceId, app.eventId, waitlist_entry_id(app.raceId, app.eventId, app.email))
        if entry is None or entry.seq is None:
            return None, None
        return ("WON", None) if entry.seq <= record.winners else ("WAITLIST", entry.seq - record.winners)

    def _answers_of(self, app: Application) -> list[AnswerView]:
        if self._questions is None or not app.answers:
            return []
        return self._questions.described(app.raceId, app.eventId, app.answers, app.questionsVersion)

    def _view(self, race: Race, event: Event, app: Application, token: str) -> MyApplication:
        ballot = event.ballot
        phase = ballot.phase(datetime.fromtimestamp(self._clock(), UTC))
        result, number = self._result(app) if phase == "CLOSED" else (None, None)
        return MyApplication(
            raceId=race.raceId,
            eventId=event.eventId,
            raceName=race.name,
            eventName=event.name,
            applicationId=app.applicationId,
            state=app.state,
            ballot=phase,
            firstName=app.firstName or None,
            groupId=app.groupId,
            groupSize=app.groupSize,
            closesAt=ballot.closesAt,
            drawAt=ballot.drawAt,
            ballotToken=token,
            answers=self._answers_of(app),
            result=result,
            waitlistNumber=number,
            message=_message(app, event, result, number),
        )


def _local(at: datetime | None, zone: str) -> str:
    """An instant as the race's runners read it: its wall clock and zone, e.g. 2027-01-05 09:00 CET."""
    return f"{at.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M %Z}" if at else ""


def _runners(fields: dict[str, str], i: int) -> dict[str, str]:
    """A runner's field errors under their path in the body: the applicant's as they are, the
    ``i``-th runner's under ``partners.<i - 1>.``."""
    return fields if i == 0 else {f"partners.{i - 1}.{k}": v for k, v in fields.items()}


def _day(epoch: float, zone: str) -> str:
    return datetime.fromtimestamp(epoch, ZoneInfo(zone)).date().isoformat()


def _message(app: Application, event: Event, result: str | None = None, number: int | None = None) -> str:
    if result == "WON":
        return f"The ballot drew you: you have a place in {event.name}. Claim it from the email we sent you."
    if result == "WAITLIST":
        return f"The ballot has been drawn: you are number {number:,} on the waitlist for {event.name}."
    group = f" with your group of {app.groupSize}" if app.groupId else ""
    return {
        "PENDING": f"Confirm your address from the email we sent: until then your application for {event.name} "
        "does not count.",
        "CONFIRMED": f"Your application for {event.name}{group} is in the ballot. The draw's result comes by email.",
        "WITHDRAWN": f"You withdrew your application for {event.name}.",
    }[app.state]
