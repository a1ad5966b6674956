"""The opening queue: a waiting room a race director switches on per race.

* Before the opening, entrants get arrival numbers; at the opening a seed is drawn and the
  pool is admitted in the lottery's order (``lottery``); later arrivals queue FIFO.
* "Now serving" is ``anchorCount + rate * (now - anchorAt)`` while not paused — a function
  of one durable item and the clock, read through the cache (about a second stale), so a
  poll verifies its token, reads one shared figure and does no per-runner database work.
* A runner's arrival number lives in the signed queue token their device keeps; the same
  device asking again (a refresh, a second tab) gets the same entry back.
* Admission issues a short-lived admission token bound to the device; the hold endpoint
  requires it while the queue is on. An entry is admitted once (``admittedAt``): its
  admission window does not restart however often it polls.
* When every number issued has been admitted, the queue switches itself off and the race
  runs without it (the director can switch it on again).
"""

from __future__ import annotations

import hashlib
import math
import secrets
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

from annotated_types import Ge, Le
from pydantic import ConfigDict, Field, Strict, StrictBool

from racecap.audit.service import AuditTrail
from racecap.cache import TieredCache
from racecap.errors import Conflict, DomainError
from racecap.fairness import work
from racecap.fairness.identity import ADMISSION_HEADER, QUEUE_HEADER, Client
from racecap.fairness.lottery import admission_number
from racecap.fairness.store import DynamoQueueStore
from racecap.fairness.tokens import Signer, TokenNotYours
from racecap.models import WHOLE_NUMBER, Director, Model
from racecap.observability import logger, metrics
from racecap.races.catalog import RaceCatalog, race_status
from racecap.races.models import Event

STATE_TTL = 1.0  # the shared "now serving" figure: about a second stale at most
STATE_LOCAL_TTL = 0.5
ADMISSION_TTL_S = 600  # an admitted runner has ten minutes to take their places
DEFAULT_HOLD_LIMIT = 4
DEFAULT_ADDRESS_HOLD_LIMIT = 100
DEFAULT_DIFFICULTY = 18  # ~2^18 SHA-256s: about a second in a phone's Web Worker
SPIKE_WINDOW_S = 10
# The queue switches itself off once nobody has waited for this long: not at the first
# empty instant (at the opening it is empty until the burst's first second arrives).
DRAIN_AFTER_EMPTY_S = 10.0
MAX_SPIKE_BITS = 4
# Before the opening a runner checks in at most this often; within the last stretch the next
# check is after the opening, spread per device (``first_check_after_opening``).
MAX_WAIT_RETRY_S = 30
# The checks that learn each pool entrant's number are spread so they arrive at about this
# rate (the shared now-serving answers everything after that), over at least MIN_SPREAD_S and
# at most MAX_SPREAD_S: the front of the line learns its turn within that much of the opening.
FIRST_CHECKS_PER_S = 50
MIN_SPREAD_S = 5
MAX_SPREAD_S = 30

QueueStateName = Literal["OFF", "WAITING_FOR_DRAW", "WAITING", "PAUSED", "ADMITTED", "EXPIRED"]


MAX_RATE_PER_MIN = 100_000  # the settings' own ceiling: a default must be a value a director could set


class AdmissionRequired(DomainError):
    code, status = "QUEUE_ADMISSION_REQUIRED", 403


class FairnessSettings(Model):
    """The director's fairness settings for one race."""

    queueEnabled: bool = Field(description="The opening queue (waiting room) is on.")
    paused: bool = Field(description="Admission from the queue is paused.")
    admissionRatePerMinute: int = Field(ge=1, le=MAX_RATE_PER_MIN, description="Runners admitted per minute.")
    holdLimit: int = Field(ge=1, le=50, description="Places one device (or admission) may hold at once.")
    addressHoldLimit: int = Field(ge=1, le=100_000, description="Places one address may hold at once.")
    powDifficulty: int = Field(ge=0, le=28, description="Proof-of-work difficulty in bits (raised on spikes).")


class FairnessPatch(Model):
    model_config = ConfigDict(extra="forbid")

    expectedVersion: Annotated[int, Strict(), Ge(0), WHOLE_NUMBER] | None = Field(
        default=None,
        description="The settings' version you edited (FairnessView.version); a Conflict if they changed "
        "meanwhile (another director, a pause or resume, the opening's draw).",
    )
    # Strict per field, as in the race's own settings: `true` is not a hold limit.
    queueEnabled: StrictBool | None = None
    admissionRatePerMinute: Annotated[int, Strict(), Ge(1), Le(MAX_RATE_PER_MIN), WHOLE_NUMBER] | None = None
    holdLimit: Annotated[int, Strict(), Ge(1), Le(50), WHOLE_NUMBER] | None = None
    addressHoldLimit: Annotated[int, Strict(), Ge(1), Le(100_000), WHOLE_NUMBER] | None = None
    powDifficulty: Annotated[int, Strict(), Ge(0), Le(28), WHOLE_NUMBER] | None = None


class QueueStats(Model):
    entered: int = Field(description="Queue numbers issued so far.")
    admitted: int = Field(description="Numbers admitted so far (now serving).")
    length: int = Field(description="Runners still waiting.")
    admissionRatePerMinute: int
    estimatedWaitSeconds: int | None = Field(description="For the last in line; null while paused or before the draw.")
    drawn: bool = Field(description="The pre-opening lottery has been drawn.")
    pool: int | None = Field(description="Pre-opening arrivals in the lottery.")


class FairnessView(FairnessSettings):
    raceId: str
    version: int = Field(description="Bumped by every change of the settings; send it back as expectedVersion.")
    queue: QueueStats


class QueueView(Model):
    raceId: str
    state: QueueStateName
    position: int | None = Field(default=None, description="1 = next to be admitted.")
    estimatedWaitSeconds: int | None = None
    admissionRatePerMinute: int | None = None
    opensAt: str | None = None
    queueToken: str | None = Field(default=None, description="Keep it (with the device token) to keep your place.")
    admissionToken: str | None = Field(default=None, description="Send as X-Racecap-Admission when holding.")
    admissionExpiresAt: float | None = Field(default=None, description="Epoch seconds.")
    number: int | None = Field(
        default=None,
        description="Your number in the admission order, once known: while waiting, your position is "
        "this minus nowServing (GET …/queue/now-serving, the same figure for everyone, cached at the edge).",
    )
    retryAfterSeconds: int = Field(description="Poll again after this many seconds.")
    message: str


class NowServingView(Model):
    """The one figure every waiting runner shares: cacheable for a second at the edge, so
    polls between a runner's own checks cost the origin nothing."""

    raceId: str
    queueEnabled: bool
    drawn: bool = Field(description="The opening's lottery has been drawn: numbers are known.")
    paused: bool
    nowServing: int = Field(description="Admission numbers up to this one have been admitted.")
    admissionRatePerMinute: int
    at: float = Field(description="Epoch seconds the figure was computed (it may be a second old).")


class ChallengeView(Model):
    challenge: str
    difficulty: int
    expiresInSeconds: int
    algorithm: str = (
        "sha256: find a decimal nonce so that SHA-256(challenge + ':' + nonce) has `difficulty` leading zero bits"
    )


class EnterRequest(Model):
    model_config = ConfigDict(extra="forbid")

    challenge: str | None = Field(default=None, max_length=2048)
    nonce: str | None = Field(default=None, max_length=64)


def default_rate(events: list[Event]) -> int:
    """Admit the race's places' worth of runners in about ten minutes (at least one a second)."""
    return min(MAX_RATE_PER_MIN, max(60, math.ceil(sum(e.cap for e in events) / 10)))


def _empty_for(state: dict[str, Any], now: float) -> float:
    """Seconds the queue has had nobody waiting (0 while paused: a pause never drains it)."""
    if state.get("drawnAt") is None or state.get("paused"):
        return 0.0
    return (serving(state, now) - int(state.get("seq", 0))) * 60 / int(state["ratePerMin"])


def first_check_after_opening(race_id: str, device: str, wait_to_open: float, pool: int) -> int:
    """Seconds until a runner waiting for the draw should check in again.

    The lottery decides the order whenever a runner checks, so there is no reason to check at
    the opening second; had everyone been told "half the time that is left, at least 2 s",
    the whole pool would converge on a check every 2 s just before the opening and all
    arrive again right after it (a full run measured 70 -> 676 requests/s). So: every
    ``MAX_WAIT_RETRY_S`` while the opening is far off, then one check after the opening at a
    point of its own in a window sized to the pool (``FIRST_CHECKS_PER_S``). The point is a
    hash of the device, not a random draw, so a reload keeps it."""
    if wait_to_open > 2 * MAX_WAIT_RETRY_S:
        return MAX_WAIT_RETRY_S
    spread = min(MAX_SPREAD_S, max(MIN_SPREAD_S, math.ceil(pool / FIRST_CHECKS_PER_S)))
    digest = hashlib.blake2b(f"{race_id}/{device}".encode(), digest_size=8).digest()
    point = int.from_bytes(digest, "big") / 2**64 * spread
    if wait_to_open <= 0:
        # The announced time has passed without a draw (the director has not opened yet):
        # every device keeps the same cadence, so the checks stay as spread as they were.
        return spread
    return max(1, math.ceil(wait_to_open + point))


def serving(state: dict[str, Any], now: float) -> int:
    if state.get("drawnAt") is None:
        return 0
    count = int(state.get("anchorCount", 0))
    if state.get("paused"):
        return count
    return count + int(max(0.0, now - float(state["anchorAt"])) * int(state["ratePerMin"]) / 60)


class OpeningQueue:
    def __init__(
        self,
        catalog: RaceCatalog,
        store: DynamoQueueStore,
        cache: TieredCache,
        signer: Callable[[], Signer],
        clock: Callable[[], float] = time.time,
        audit: Callable[[], AuditTrail] | None = None,
    ) -> None:
        self._catalog = catalog
        self._store = store
        self._cache = cache
        self._signer = signer
        self._clock = clock
        self._audit = audit  # a factory: only the admin API's changes need (and may reach) the trail

    # -- the shared state ----------------------------------------------------------------
    def state(self, race_id: str, *, fresh: bool = False) -> dict[str, Any]:
        """The queue's state (cached ~1 s; ``fresh``: read from the table, the cache left as it
        is for the runners who read it), drawing the lottery / draining lazily when due."""
        race, events = self._catalog.definition(race_id)
        key = f"queue:{race_id}:state"
        if fresh:
            state = self._store.state(race_id) or {}
        else:
            state = self._cache.get_or_load(
                key, lambda: self._store.state(race_id) or {}, ttl=STATE_TTL, local_ttl=STATE_LOCAL_TTL
            )
        now = self._clock()
        is_open = race_status(race) == "OPEN"
        if state.get("enabled") and is_open and state.get("drawnAt") is None:
            # A backstop: whoever opened the race drew already (``opened``), unless that failed.
            if self._store.draw(race_id, secrets.token_hex(16), now, default_rate(events)):
                metrics.add_metric(name="QueueDrawn", unit="Count", value=1)
            state = self._reload(race_id)
        elif state.get("enabled") and is_open and _empty_for(state, now) >= DRAIN_AFTER_EMPTY_S:
            if self._store.drain(race_id, int(state.get("seq", 0)), now):
                metrics.add_metric(name="QueueDrained", unit="Count", value=1)
            state = self._reload(race_id)
        return {**state, "_defaultRate": default_rate(events), "_opensAt": race.registrationOpensAt.isoformat()}

    def opened(self, race_id: str, events: list[Event]) -> None:
        """Registration has just opened: close the pre-opening pool now, in the change's own
        environment. Every other environment sees the opening only when the race's version
        stamp reaches it (about a second); had the draw waited for them, runners arriving in
        that second would join the lottery instead of queueing behind it. A number issued
        after this draw is past ``drawSize``, so it is first in, first out, whatever a stale
        environment believes about the race. Nothing happens for a race without a queue."""
        if self._store.draw(race_id, secrets.token_hex(16), self._clock(), default_rate(events)):
            metrics.add_metric(name="QueueDrawn", unit="Count", value=1)
        self._cache.delete(f"queue:{race_id}:state")

    def _reload(self, race_id: str) -> dict[str, Any]:
        self._cache.delete(f"queue:{race_id}:state")
        fresh = self._store.state(race_id) or {}
        return fresh

    def settings(self, race_id: str, state: dict[str, Any] | None = None) -> FairnessSettings:
        state = state if state is not None else self.state(race_id)
        return FairnessSettings(
            queueEnabled=bool(state.get("enabled", False)),
            paused=bool(state.get("paused", False)),
            admissionRatePerMinute=int(state.get("ratePerMin") or state["_defaultRate"]),
            holdLimit=int(state.get("holdLimit") or DEFAULT_HOLD_LIMIT),
            addressHoldLimit=int(state.get("addressHoldLimit") or DEFAULT_ADDRESS_HOLD_LIMIT),
            powDifficulty=int(state["difficulty"]) if state.get("difficulty") is not None else DEFAULT_DIFFICULTY,
        )

    # -- runners -------------------------------------------------------------------------
    def challenge(self, race_id: str, client: Client) -> ChallengeView:
        device = client.require_device()
        s = self.settings(race_id)
        count = self._cache.incr_window(f"queue:{race_id}:challenges", SPIKE_WINDOW_S)
        threshold = max(100, s.admissionRatePerMinute)
        extra = 0 if count <= threshold else min(MAX_SPIKE_BITS, int(math.log2(count / threshold)) + 1)
        if extra:
            metrics.add_metric(name="ProofOfWorkRaised", unit="Count", value=1)
        return ChallengeView(
            **work.issue(self._signer(), race_id, device, min(work.MAX_DIFFICULTY, s.powDifficulty + extra))
        )

    def enter(self, race_id: str, client: Client, request: EnterRequest) -> QueueView:
        device = client.require_device()
        challenge_id = work.check(self._signer(), race_id, device, request.challenge, request.nonce)
        state = self.state(race_id)
        if not state.get("enabled"):
            return self._off(race_id)
        if not self._store.spend_challenge(challenge_id, work.CHALLENGE_TTL_S * 2):
            raise work.ProofRefused("This proof-of-work was already used; ask for a new challenge.")
        existing = self._store.entry(race_id, device)
        if existing is not None and not self._expired(existing):
            metrics.add_metric(name="QueueSameDevice", unit="Count", value=1)
            return self._view(race_id, device, int(existing["arrival"]), self.state(race_id))
        old = int(existing["arrival"]) if existing is not None else None
        issued = self._store.next_arrival(race_id, device, old)
        if issued is None:
            return self._off(race_id)
        arrival, _ = issued
        if not self._store.put_entry(race_id, device, arrival, self._clock(), old):
            # Another tab of this device entered at the same moment: keep its place. (The
            # same number, unless its binding was already dropped: then this one is left
            # unused, admitted with nobody behind it.)
            found = self._store.entry(race_id, device)
            arrival = int(found["arrival"]) if found else arrival
        try:
            self._store.settle_arrival(race_id, device, old)
        except Exception:
            # The place is written; a binding left behind only costs a few bytes.
            logger.exception("queue binding not dropped", extra={"raceId": race_id})
        metrics.add_metric(name="QueueEntered", unit="Count", value=1)
        return self._view(race_id, device, arrival, self.state(race_id))

    def poll(self, race_id: str, client: Client) -> QueueView:
        device = client.require_device()
        state = self.state(race_id)
        token = client.header(QUEUE_HEADER)
        if not token:
            if not state.get("enabled"):
                return self._off(race_id)
            return QueueView(
                raceId=race_id,
                state="WAITING",
                retryAfterSeconds=0,
                message="Join the queue to get a place in line.",
            )
        claims = self._signer().verify("que", token)
        if claims.get("r") != race_id or claims.get("d") != device:
            raise TokenNotYours("This queue token belongs to another device or another race.")
        return self._view(race_id, device, int(claims["a"]), state)

    def _expired(self, entry: dict[str, Any]) -> bool:
        admitted = entry.get("admittedAt")
        return admitted is not None and self._clock() >= float(admitted) + ADMISSION_TTL_S

    def _off(self, race_id: str) -> QueueView:
        return QueueView(
            raceId=race_id,
            state="OFF",
            retryAfterSeconds=0,
            message="There is no queue for this race right now: go ahead.",
        )

    def _view(self, race_id: str, device: str, arrival: int, state: dict[str, Any]) -> QueueView:
        signer = self._signer()
        now = self._clock()
        s = self.settings(race_id, state)
        queue_token = signer.sign("que", {"r": race_id, "d": device, "a": arrival})
        seed = state.get("drawSeed")
        number = admission_number(bytes.fromhex(seed) if seed else None, state.get("drawSize"), arrival)
        if number is None:
            wait_to_open = max(0.0, _epoch(state["_opensAt"]) - now)
            return QueueView(
                raceId=race_id,
                state="WAITING_FOR_DRAW",
                opensAt=state["_opensAt"],
                queueToken=queue_token,
                admissionRatePerMinute=s.admissionRatePerMinute,
                retryAfterSeconds=first_check_after_opening(race_id, device, wait_to_open, int(state.get("seq", 0))),
                message=(
                    "You're in. Everyone who joins before the opening is put in a random order at the opening,"
                    " so neither arriving earlier nor checking at the opening second helps: this page checks"
                    " for your place by itself shortly after the opening."
                ),
            )
        now_serving = serving(state, now)
        if number <= now_serving or not state.get("enabled"):
            admitted_at = self._store.mark_admitted(race_id, device, arrival, now)
            if admitted_at < 0:
                raise TokenNotYours("This queue token was replaced: this device joined the queue again.")
            expires = admitted_at + ADMISSION_TTL_S
            if now >= expires:
                return QueueView(
                    raceId=race_id,
                    state="EXPIRED",
                    retryAfterSeconds=0,
                    message="Your turn came and went: your admission has expired. You may join the queue again.",
                )
            admission = signer.sign("adm", {"r": race_id, "d": device, "n": number, "exp": int(expires)})
            return QueueView(
                raceId=race_id,
                state="ADMITTED",
                position=0,
                number=number,
                queueToken=queue_token,
                admissionToken=admission,
                admissionExpiresAt=expires,
                retryAfterSeconds=0,
                message="It's your turn: choose your places.",
            )
        position = number - now_serving
        rate = s.admissionRatePerMinute
        if s.paused:
            return QueueView(
                raceId=race_id,
                state="PAUSED",
                position=position,
                number=number,
                queueToken=queue_token,
                admissionRatePerMinute=rate,
                retryAfterSeconds=10,
                message="The race director has paused admission for a moment; you keep your place.",
            )
        wait = math.ceil(position * 60 / rate)
        return QueueView(
            raceId=race_id,
            state="WAITING",
            position=position,
            number=number,
            estimatedWaitSeconds=wait,
            admissionRatePerMinute=rate,
            queueToken=queue_token,
            # Back off while far from the front; poll often near it.
            retryAfterSeconds=int(min(30, max(1, wait / 4))),
            message="You're in the queue; keep this page open.",
        )

    def now_serving(self, race_id: str) -> NowServingView:
        """The shared figure (no token, nothing about any one runner): the site derives a
        waiting runner's position from it and its own number."""
        state = self.state(race_id)
        now = self._clock()
        s = self.settings(race_id, state)
        return NowServingView(
            raceId=race_id,
            queueEnabled=s.queueEnabled,
            drawn=state.get("drawnAt") is not None,
            paused=s.paused,
            nowServing=min(int(state.get("seq", 0)), serving(state, now)),
            admissionRatePerMinute=s.admissionRatePerMinute,
            at=round(now, 3),
        )

    # -- the hold endpoint's check -----------------------------------------------------------
    def admit_hold(self, race_id: str, client: Client) -> FairnessSettings:
        """While the queue is on, a hold needs this device's admission token (else 401/403)."""
        state = self.state(race_id)
        s = self.settings(race_id, state)
        if not s.queueEnabled:
            return s
        token = client.header(ADMISSION_HEADER)
        if not token:
            raise AdmissionRequired("This race has a waiting room: join the queue, and hold your places when admitted.")
        claims = self._signer().verify("adm", token)
        if claims.get("r") != race_id or claims.get("d") != client.device_id:
            raise TokenNotYours("This admission token was issued to another device or for another race.")
        return s

    # -- the race director -----------------------------------------------------------------------
    # Every change is audited in its own transaction (who, what, when), as other admin changes are.
    def configure(self, race_id: str, patch: FairnessPatch, director: Director | None = None) -> FairnessView:
        given = patch.model_dump(exclude_none=True, exclude={"expectedVersion"})
        changes = {
            {"queueEnabled": "enabled", "admissionRatePerMinute": "ratePerMin", "powDifficulty": "difficulty"}.get(
                k, k
            ): v
            for k, v in given.items()
        }
        return self._change(
            race_id, lambda st, now: changes, director, "fairness.update", given, expected=patch.expectedVersion
        )

    def pause(self, race_id: str, director: Director | None = None) -> FairnessView:
        return self._change(
            race_id,
            lambda st, now: {"paused": True, "anchorCount": serving(st, now), "anchorAt": now},
            director,
            "queue.pause",
            {},
        )

    def resume(self, race_id: str, director: Director | None = None) -> FairnessView:
        return self._change(race_id, lambda st, now: {"paused": False, "anchorAt": now}, director, "queue.resume", {})

    def _change(
        self,
        race_id: str,
        compute: Callable[[dict[str, Any], float], dict[str, Any]],
        director: Director | None,
        action: str,
        details: dict[str, Any],
        expected: int | None = None,
    ) -> FairnessView:
        self._catalog.definition(race_id)  # 404 for an unknown race
        for _ in range(5):
            current = self._store.state(race_id) or {}
            # Checked on every try: a change that lands between the read and the conditional
            # save below makes the loop read again, and then this refuses it.
            if expected is not None and expected != int(current.get("version", 0)):
                raise Conflict(
                    f"The fairness settings are at version {int(current.get('version', 0))}, not {expected}: "
                    "they were changed meanwhile; reload them and retry."
                )
            now = self._clock()
            changes = dict(compute(current, now))
            if not current:
                changes.setdefault("seq", 0)
                changes.setdefault("enabled", False)
            drawn = current.get("drawnAt") is not None
            if drawn and ("ratePerMin" in changes or (changes.get("enabled") and not current.get("enabled"))):
                # Re-anchor so the new rate (or the re-opened queue) starts from now, not from
                # the opening: nobody already waiting is admitted early or late.
                restart = changes.get("enabled") and not current.get("enabled")
                changes.setdefault("anchorCount", int(current.get("seq", 0)) if restart else serving(current, now))
                changes["anchorAt"] = now
            for k in ("anchorAt",):
                if k in changes:
                    changes[k] = _dec(changes[k])
            audited = []
            if director is not None and self._audit is not None:
                audited = [self._audit().item(director, race_id, action, race_id, **details)]
            if self._store.save_settings(race_id, changes, int(current.get("version", 0)), audited):
                self._cache.delete(f"queue:{race_id}:state")
                return self.view(race_id)
        raise Conflict("The queue's settings changed meanwhile; please retry.", retry_after=1)

    def view(self, race_id: str, *, fresh: bool = True) -> FairnessView:
        """The queue as a director sees it: read from the table (``fresh``: the fairness page, which
        shows what was just changed), or as waiting runners read it (cached about a second: the
        stats' polls). Neither drops the runners' cached state, as this did: every stats poll of a
        watching director cost every environment a fresh read mid-opening (issue 42); a settings
        change drops it itself, before its own view."""
        state = self.state(race_id, fresh=fresh)  # with the lazy draw or drain any look makes
        return FairnessView(
            raceId=race_id,
            **self.settings(race_id, state).model_dump(),
            version=int(state.get("version", 0)),
            queue=self.stats(state),
        )

    def stats(self, state: dict[str, Any]) -> QueueStats:
        now = self._clock()
        entered = int(state.get("seq", 0))
        admitted = min(entered, serving(state, now))
        length = entered - admitted
        rate = int(state.get("ratePerMin") or state["_defaultRate"])
        drawn = state.get("drawnAt") is not None
        wait = math.ceil(length * 60 / rate) if drawn and not state.get("paused") else None
        return QueueStats(
            entered=entered,
            admitted=admitted,
            length=length,
            admissionRatePerMinute=rate,
            estimatedWaitSeconds=wait,
            drawn=drawn,
            pool=int(state["drawSize"]) if state.get("drawSize") is not None else None,
        )


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


def _dec(value: float) -> Any:
    from decimal import Decimal

    return Decimal(str(round(value, 3)))
