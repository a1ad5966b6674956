"""Results use cases: directors upload and publish; the processor validates and installs;
runners read through the caching hierarchy.

Caching (paper §3 and §6.2). A version never changes once installed, so every answer
about it is keyed by the version and kept long, at the edge (``Cache-Control`` set by
the handler) and in the in-process → Redis tiers, rebuilt under a stampede lock. The
one thing that changes is which version is current: that small answer is cached for at
most a second here and two seconds at the edge, and the director's publish, unpublish or
new upload deletes its shared copy at once.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from racecap.audit.service import AuditTrail
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.cache import TieredCache
from racecap.errors import Conflict, EventNotFound, NotFound, RaceNotFound
from racecap.models import Director
from racecap.observability import logger
from racecap.questions.rules import division_of
from racecap.races.catalog import RaceCatalog
from racecap.races.models import Event, Race
from racecap.races.store import RaceStore
from racecap.registration.store import RegistrationStore
from racecap.results.dataset import Dataset, format_ms
from racecap.results.models import (
    EventResultsAdminView,
    EventResultsPointer,
    RaceResultsView,
    ResultRow,
    ResultsPage,
    RunnerResult,
    RunnerResultView,
    Split,
    Suggestion,
    SuggestionList,
    TeamMemberResult,
    TeamStandingRow,
    TeamStandingsView,
    UploadRequest,
    UploadTicket,
    UploadView,
)
from racecap.results.ranking import Runner, rank, team_standings
from racecap.results.sheet import Entrant, SheetRules, read_sheet
from racecap.results.store import DynamoResults, S3Files, upload_key

MAX_FILE_BYTES = 50 * 1024 * 1024
UPLOAD_URL_SECONDS = 900
RECENT_UPLOADS = 5
INSTALL_TRIES = 5
POINTER_TTL = 1.0  # Redis; a director's change also deletes it
POINTER_LOCAL_TTL = 0.5
VERSIONED_TTL = 3600.0  # Redis: immutable, kept while it is read
VERSIONED_LOCAL_TTL = 300.0
DATASETS_PER_ENVIRONMENT = 3
PAGE_SIZE_MAX = 100
# Longer than ResultsProcessor's timeout (blueprint; a unit test keeps them in step). An
# upload still PROCESSING after this was cut off mid-check (a timeout, an out-of-memory
# kill): Lambda's retries of its S3 event find it PROCESSING and stand aside, so nothing will
# finish it, and the director is told to upload it again instead of "being checked" forever.
PROCESSING_GIVES_UP_AFTER = timedelta(minutes=6)
CUT_OFF = "Checking the file stopped before it finished (it took too long); nothing changed: upload it again."


class ResultsNotFound(NotFound):
    code = "RESULTS_NOT_FOUND"


class RunnerNotFound(NotFound):
    code = "RUNNER_NOT_FOUND"


def pointer_cache_key(race_id: str) -> str:
    return f"results:{race_id}:pointers"


def _now() -> datetime:
    return datetime.now(UTC)


# ===========================================================================
# Directors
# ===========================================================================
class ResultsAdmin:
    def __init__(
        self,
        store: DynamoResults,
        files: S3Files,
        races: RaceStore,
        transact: Callable[[list[TransactItem]], None],
        audit: AuditTrail,
        cache: TieredCache,
    ) -> None:
        self._store, self._files, self._races = store, files, races
        self._transact, self._audit, self._cache = transact, audit, cache

    def owned_event(self, director: Director, race_id: str, event_id: str) -> tuple[Race, Event]:
        """The race and event if ``director`` owns the race; another director's is not found."""
        found = self._races.get_race(race_id)
        if found is None or found[0].ownerId != director.sub:
            raise RaceNotFound(f"No race with id {race_id}.")
        event = next((e for e in found[1] if e.eventId == event_id), None)
        if event is None:
            raise EventNotFound(f"Race {race_id} has no event {event_id}.")
        return found[0], event

    def start_upload(self, director: Director, race_id: str, event_id: str, rules: UploadRequest) -> UploadTicket:
        self.owned_event(director, race_id, event_id)
        now = _now()
        upload_id = f"upl_{now:%Y%m%d%H%M%S%f}_{secrets.token_hex(4)}"
        key = f"{upload_key(race_id, event_id)}{upload_id}.csv"
        clean = rules.model_copy(update={"categories": sorted({c.strip().upper() for c in rules.categories if c})})
        doc = {
            "uploadId": upload_id,
            "raceId": race_id,
            "eventId": event_id,
            "status": "WAITING_FOR_FILE",
            "createdAt": now.isoformat(),
            "objectKey": key,
            "rules": clean.model_dump(),
            "actor": director.model_dump(),
        }
        self._transact(
            [
                self._store.new_upload_item(doc),
                self._audit.item(
                    director, race_id, "results.upload", event_id, uploadId=upload_id, **clean.model_dump()
                ),
            ]
        )
        return UploadTicket(
            **upload_view(doc).model_dump(),
            uploadUrl=self._files.upload_url(key, "text/csv", UPLOAD_URL_SECONDS),
            uploadHeaders={"Content-Type": "text/csv"},
            expiresAt=now + timedelta(seconds=UPLOAD_URL_SECONDS),
        )

    def upload(self, director: Director, race_id: str, event_id: str, upload_id: str) -> UploadView:
        self.owned_event(director, race_id, event_id)
        doc = self._store.upload(race_id, event_id, upload_id)
        if doc is None:
            raise NotFound(f"No upload {upload_id} for this event.")
        return upload_view(doc)

    def status(self, director: Director, race_id: str, event_id: str) -> EventResultsAdminView:
        self.owned_event(director, race_id, event_id)
        return self._status(race_id, event_id)

    def _status(self, race_id: str, event_id: str) -> EventResultsAdminView:
        pointer = self._store.pointer(race_id, event_id) or {}
        return EventResultsAdminView(
            raceId=race_id,
            eventId=event_id,
            version=pointer.get("version"),
            published=bool(pointer.get("published")),
            publishedAt=pointer.get("publishedAt"),
            rows=pointer.get("rows"),
            uploads=[upload_view(d) for d in self._store.recent_uploads(race_id, event_id, RECENT_UPLOADS)],
        )

    def publish(self, director: Director, race_id: str, event_id: str, published: bool) -> EventResultsAdminView:
        self.owned_event(director, race_id, event_id)
        pointer = self._store.pointer(race_id, event_id)
        if pointer is None:
            raise Conflict("There are no valid results for this event yet: upload a file first.")
        if bool(pointer.get("published")) != published:
            action = "results.publish" if published else "results.unpublish"
            try:
                self._transact(
                    [
                        self._store.publish_item(race_id, event_id, published, _now().isoformat()),
                        self._audit.item(director, race_id, action, event_id, version=pointer["version"]),
                    ]
                )
            except ConditionFailed as exc:  # pragma: no cover - the pointer was just read
                raise Conflict("The results changed meanwhile; try again.") from exc
            self._cache.delete(pointer_cache_key(race_id))
        return self._status(race_id, event_id)


def upload_view(doc: dict[str, Any], now: datetime | None = None) -> UploadView:
    now = now or _now()
    started = doc.get("startedAt")
    if doc["status"] == "PROCESSING" and started and datetime.fromisoformat(started) < now - PROCESSING_GIVES_UP_AFTER:
        doc = {**doc, "status": "REJECTED", "errorCount": 1, "errors": [{"line": 0, "reason": CUT_OFF}]}
    # Still waiting after its URL expired: no file can come any more (a PUT started in time
    # may still land, so the status stays as stored), and the director should start again.
    url_expired = datetime.fromisoformat(doc["createdAt"]) + timedelta(seconds=UPLOAD_URL_SECONDS) < now
    message = {
        "WAITING_FOR_FILE": "The upload URL expired before a file arrived: start a new upload."
        if url_expired
        else "PUT the CSV file to the upload URL; it is processed as soon as it arrives.",
        "PROCESSING": "The file arrived and is being checked.",
        "READY": f"Valid: installed as version {doc.get('version')}. Publish to show it to runners.",
        "REJECTED": "Nothing changed: fix the lines listed and upload the file again.",
    }[doc["status"]]
    return UploadView(
        uploadId=doc["uploadId"],
        raceId=doc["raceId"],
        eventId=doc["eventId"],
        status=doc["status"],
        createdAt=doc["createdAt"],
        finishedAt=doc.get("finishedAt"),
        rows=doc.get("rows"),
        version=doc.get("version"),
        errorCount=int(doc.get("errorCount", 0)),
        errors=doc.get("errors", []),
        message=doc.get("message") or message,
    )


# ===========================================================================
# The processor (S3 ObjectCreated)
# ===========================================================================
class ResultsProcessor:
    def __init__(
        self,
        store: DynamoResults,
        files: S3Files,
        races: RaceStore,
        registrations: RegistrationStore,
        transact: Callable[[list[TransactItem]], None],
        audit: AuditTrail,
        cache: TieredCache,
    ) -> None:
        self._store, self._files, self._races, self._regs = store, files, races, registrations
        self._transact, self._audit, self._cache = transact, audit, cache

    def process(self, key: str, size: int) -> str:
        """Check the uploaded file and install it as a new version; returns the outcome.

        S3 delivers events at least once: only the delivery that moves the upload from
        WAITING_FOR_FILE to PROCESSING does the work; any other is a no-op."""
        parts = key.split("/")
        if len(parts) != 4 or parts[0] != "results" or not parts[3].endswith(".csv"):
            logger.warning("not a results upload key", extra={"key": key})
            return "ignored"
        _, race_id, event_id, name = parts
        upload_id = name.removesuffix(".csv")
        doc = self._store.upload(race_id, event_id, upload_id)
        if doc is None:
            logger.warning("no upload record for this object", extra={"key": key})
            return "ignored"
        if not self._store.claim_upload(race_id, event_id, upload_id, _now().isoformat()):
            return "duplicate"
        try:
            return self._process(doc, key, size)
        except Exception:
            logger.exception("results upload failed", extra={"key": key})
            self._reject(
                doc, [(0, "The file could not be processed because of an error on our side; upload it again.")], 1
            )
            raise

    def _process(self, doc: dict[str, Any], key: str, size: int) -> str:
        race_id, event_id = doc["raceId"], doc["eventId"]
        if size > MAX_FILE_BYTES:
            self._reject(doc, [(0, f"The file is {size:,} bytes; at most {MAX_FILE_BYTES:,} are accepted.")], 1)
            return "rejected"
        found = self._races.get_race(race_id)
        event = next((e for e in found[1] if e.eventId == event_id), None) if found else None
        if found is None or event is None:
            self._reject(doc, [(0, "The race or event no longer exists.")], 1)
            return "rejected"
        race = found[0]
        started = time.monotonic()
        entrants = self.entrants(race_id, event_id)
        rules = SheetRules(
            categories=tuple(doc["rules"]["categories"]),
            age_group_years=int(doc["rules"]["ageGroupYears"]),
            rank_by=doc["rules"]["rankBy"],
            team_scoring=int(doc["rules"].get("teamScoring", 3)),
        )
        sheet = read_sheet(self._files.read(key), entrants, rules, date.fromisoformat(race.raceDate))
        if sheet.error_count:
            self._reject(doc, sheet.errors, sheet.error_count)
            return "rejected"
        runners = rank(sheet.runners, rules.rank_by)
        dataset = Dataset(
            {
                "eventName": event.name,
                "splitNames": sheet.split_names,
                "rankBy": rules.rank_by,
                "ageGroupYears": rules.age_group_years,
                "uploadId": doc["uploadId"],
                "teamScoring": rules.team_scoring,
            },
            runners,
        )
        counts = {"rows": len(runners), "finishers": dataset.finishers}
        version = self.install(doc, dataset.encode(), counts)
        logger.info(
            "results version installed",
            extra={"raceId": race_id, "eventId": event_id, "version": version, **counts,
                   "seconds": round(time.monotonic() - started, 2)},
        )  # fmt: skip
        return "installed"

    def install(self, doc: dict[str, Any], blob: bytes, counts: dict[str, int]) -> int:
        """Install a checked upload as the event's next version; returns its number.

        Uploads of one event may be processed at once: each claims a number no other has
        written (``_claim_version``) and points the event at it only if the pointer is
        older, so the last to install is current and no version's content is another's.
        """
        race_id, event_id = doc["raceId"], doc["eventId"]
        actor = Director.model_validate(doc["actor"])
        version = 0  # the number this upload's chunks are written under, once claimed
        for _ in range(INSTALL_TRIES):
            current = int((self._store.pointer(race_id, event_id) or {}).get("version", 0))
            if version <= current:  # none yet, or another upload installed past ours
                version = self._claim_version(race_id, event_id, current + 1, blob)
            now = _now().isoformat()
            audit = self._audit.item(
                actor, race_id, "results.version", event_id, version=version, uploadId=doc["uploadId"], **counts
            )
            try:
                self._transact(
                    [*self._store.install_items(race_id, event_id, version, doc["uploadId"], counts, now), audit]
                )
            except ConditionFailed:
                continue  # another upload installed a later version meanwhile: claim past it
            self._cache.delete(pointer_cache_key(race_id))
            return version
        raise Conflict("Other uploads kept installing versions; upload again.")

    def _claim_version(self, race_id: str, event_id: str, first: int, blob: bytes) -> int:
        """Write ``blob`` under the first free version number from ``first``: one whose chunks
        another upload wrote (installed or still on its way) is never overwritten."""
        for version in range(first, first + INSTALL_TRIES):
            if self._store.write_version(race_id, event_id, version, blob):
                return version
        raise Conflict("Other uploads kept installing versions; upload again.")

    def entrants(self, race_id: str, event_id: str) -> dict[int, Entrant]:
        out: dict[int, Entrant] = {}
        for row in self._regs.event_rows(race_id, event_id):
            if row.get("status") != "CONFIRMED" or row.get("bib") is None:
                continue
            dob = row.get("dateOfBirth")
            try:
                born = date.fromisoformat(dob) if dob else None
            except ValueError:
                born = None
            age = row.get("ageOnRaceDay")
            out[int(row["bib"])] = Entrant(
                row.get("firstName") or "",
                row.get("lastName") or "",
                born,
                int(age) if age is not None else None,
                division=division_of(row.get("answers")),
                team=row.get("teamName") or None,
            )
        return out

    def _reject(self, doc: dict[str, Any], errors: list[tuple[int, str]], count: int) -> None:
        self._store.reject_upload(
            doc["raceId"],
            doc["eventId"],
            doc["uploadId"],
            [{"line": line, "reason": reason} for line, reason in errors],
            count,
            _now().isoformat(),
        )


# ===========================================================================
# Runners
# ===========================================================================
class ResultsReader:
    def __init__(self, store: DynamoResults, catalog: RaceCatalog, cache: TieredCache) -> None:
        self._store = store
        self._catalog = catalog
        self._cache = cache
        self._datasets: OrderedDict[str, Dataset] = OrderedDict()
        self._loading = threading.Lock()

    # -- the short-cached pointer ----------------------------------------------------------
    def _pointers(self, race_id: str) -> dict[str, dict[str, Any]]:
        return self._cache.get_or_load(
            pointer_cache_key(race_id),
            lambda: self._store.pointers(race_id),
            ttl=POINTER_TTL,
            local_ttl=POINTER_LOCAL_TTL,
        )

    def race_results(self, race_id: str) -> RaceResultsView:
        race, events = self._catalog.definition(race_id)
        pointers = self._pointers(race_id)
        shown = []
        for e in events:
            p = pointers.get(e.eventId) or {}
            published = bool(p.get("published"))
            shown.append(
                EventResultsPointer(
                    eventId=e.eventId,
                    name=e.name,
                    published=published,
                    version=p.get("version") if published else None,
                    finishers=p.get("finishers") if published else None,
                )
            )
        return RaceResultsView(raceId=race_id, raceName=race.name, events=shown)

    def _check(self, race_id: str, event_id: str, version: int) -> None:
        _, events = self._catalog.definition(race_id)
        if not any(e.eventId == event_id for e in events):
            raise EventNotFound(f"Race {race_id} has no event {event_id}.")
        p = self._pointers(race_id).get(event_id) or {}
        if not p.get("published") or not 1 <= version <= int(p.get("version", 0)):
            raise ResultsNotFound(f"No published results version {version} for this event.")

    # -- immutable, versioned answers --------------------------------------------------------
    def page(
        self, race_id: str, event_id: str, version: int, page: int, size: int, gender: str | None, group: str | None
    ) -> dict[str, Any]:
        self._check(race_id, event_id, version)
        gender = gender.strip().upper() if gender else None
        key = f"results:{race_id}:{event_id}:v{version}:page:{size}:{page}:{gender or ''}:{group or ''}"

        def build() -> dict[str, Any]:
            data = self.dataset(race_id, event_id, version)
            ix = data.filtered(gender, group)
            rows = [_row(data.runners[i]) for i in ix[(page - 1) * size : page * size]]
            return ResultsPage(
                raceId=race_id,
                eventId=event_id,
                eventName=data.meta["eventName"],
                version=version,
                page=page,
                size=size,
                total=len(ix),
                pages=max(1, math.ceil(len(ix) / size)),
                gender=gender,
                ageGroup=group,
                genders=data.categories,
                ageGroups=data.age_groups,
                results=rows,
            ).model_dump(mode="json")

        return self._cache.get_or_load(key, build, ttl=VERSIONED_TTL, local_ttl=VERSIONED_LOCAL_TTL)

    def runner(self, race_id: str, event_id: str, version: int, bib: int) -> dict[str, Any]:
        self._check(race_id, event_id, version)

        def build() -> dict[str, Any] | None:
            data = self.dataset(race_id, event_id, version)
            i = data.by_bib.get(bib)
            if i is None:
                return None
            r = data.runners[i]
            names = data.meta.get("splitNames", [])
            result = RunnerResult(
                **_row(r).model_dump(),
                splits=[Split(name=n, time=format_ms(t)) for n, t in zip(names, r.splits, strict=False)],
                of=data.counts(r),
            )
            view = RunnerResultView(
                raceId=race_id, eventId=event_id, eventName=data.meta["eventName"], version=version, result=result
            )
            return view.model_dump(mode="json")

        found = self._cache.get_or_load(
            f"results:{race_id}:{event_id}:v{version}:bib:{bib}",
            build,
            ttl=VERSIONED_TTL,
            local_ttl=VERSIONED_LOCAL_TTL,
        )
        if found is None:
            raise RunnerNotFound(f"Bib {bib} has no result in this event.")
        return found

    def teams(self, race_id: str, event_id: str, version: int) -> dict[str, Any]:
        """The version's team standings (teams entered with racecap.teams): the sum of each
        team's best ``teamScoring`` times, computed once per version like its places."""
        self._check(race_id, event_id, version)

        def build() -> dict[str, Any]:
            data = self.dataset(race_id, event_id, version)
            k = int(data.meta.get("teamScoring", 3))
            rank_by = data.meta.get("rankBy", "chip")
            rows = []
            for t in team_standings(data.runners, k, rank_by):
                counted = set(t.scored)
                members = [data.runners[data.by_bib[b]] for b in t.members]
                rows.append(
                    TeamStandingRow(
                        place=t.place,
                        team=t.team,
                        total=format_ms(t.total_ms),
                        totalMs=t.total_ms,
                        members=[
                            TeamMemberResult(
                                bib=m.bib,
                                name=m.name,
                                time=format_ms(m.chip_ms if rank_by == "chip" else m.gun_ms),
                                scored=m.bib in counted,
                            )
                            for m in sorted(members, key=lambda m: (m.bib not in counted, m.place or 10**9, m.bib))
                        ],
                    )
                )
            view = TeamStandingsView(raceId=race_id, eventId=event_id, version=version, teamScoring=k, teams=rows)
            return view.model_dump(mode="json")

        return self._cache.get_or_load(
            f"results:{race_id}:{event_id}:v{version}:teams", build, ttl=VERSIONED_TTL, local_ttl=VERSIONED_LOCAL_TTL
        )

    def suggest(self, race_id: str, event_id: str, version: int, q: str) -> dict[str, Any]:
        self._check(race_id, event_id, version)
        query = " ".join(q.split())

        def build() -> dict[str, Any]:
            data = self.dataset(race_id, event_id, version)
            found = [
                Suggestion(
                    bib=r.bib, name=r.name, place=r.place, gender=r.category, ageGroup=r.age_group, status=r.status
                )
                for r in data.suggest(query)
            ]
            return SuggestionList(version=version, q=query, suggestions=found).model_dump(mode="json")

        return self._cache.get_or_load(
            f"results:{race_id}:{event_id}:v{version}:q:{query.casefold()}",
            build,
            ttl=VERSIONED_TTL,
            local_ttl=VERSIONED_LOCAL_TTL,
        )

    # -- the version itself, once per execution environment -----------------------------------
    def dataset(self, race_id: str, event_id: str, version: int) -> Dataset:
        key = f"{race_id}:{event_id}:{version}"
        with self._loading:  # one load per environment, however many requests wait for it
            found = self._datasets.get(key)
            if found is None:
                blob = self._store.read_version(race_id, event_id, version)
                if blob is None:
                    raise ResultsNotFound(f"No results version {version} for this event.")
                found = Dataset.decode(blob)
                self._datasets[key] = found
                while len(self._datasets) > DATASETS_PER_ENVIRONMENT:
                    self._datasets.popitem(last=False)
            self._datasets.move_to_end(key)
            return found


def _row(r: Runner) -> ResultRow:
    return ResultRow(
        place=r.place,
        genderPlace=r.gender_place,
        ageGroupPlace=r.age_group_place,
        bib=r.bib,
        name=r.name,
        gender=r.category,
        age=r.age,
        ageGroup=r.age_group,
        status=r.status,  # type: ignore[arg-type]
        chipTime=format_ms(r.chip_ms),
        gunTime=format_ms(r.gun_ms),
    )
