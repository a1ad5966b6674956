"""The real local stack for integration tests: started once per session on free ports."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
import redis
import requests
from aws_lambda_powertools.utilities import parameters
from racecap import clients, config
from racecap.cache import TieredCache
from racecap.holds.store import DynamoHolds
from racecap.observability import metrics
from racecap.places.store import DynamoInventory
from racecap.races.catalog import RaceCatalog
from racecap.races.store import DynamoRaceStore
from racecap.registration.store import DynamoRegistrations
from racecap.setup.models import EventDraft, RaceDraft
from racecap.setup.service import RaceAdmin

import blueprint
from local.stack import LocalStack, Ports


@dataclass
class Backend:
    """Direct handles on the local servers, for arranging state and auditing outcomes."""

    stack: LocalStack
    dynamodb: Any
    sqs: Any
    redis: redis.Redis

    def table(self, table_id: str) -> str:
        return blueprint.table(table_id).local_name

    def store(self) -> DynamoRaceStore:
        return DynamoRaceStore(self.dynamodb, self.table("Races"))

    def inventory(self) -> DynamoInventory:
        return DynamoInventory(self.dynamodb, self.table("Inventory"))

    def cache(self) -> TieredCache:
        return TieredCache(lambda: self.redis)

    def catalog(self, cache: TieredCache | None = None) -> RaceCatalog:
        return RaceCatalog(self.store(), self.inventory(), cache or self.cache())

    def holds(self) -> DynamoHolds:
        return DynamoHolds(self.dynamodb, self.table("Inventory"))

    def registrations(self) -> DynamoRegistrations:
        return DynamoRegistrations(self.dynamodb, self.table("Registrations"), self.table("Inventory"))

    def admin(self) -> RaceAdmin:
        return RaceAdmin(self.store(), self.inventory(), catalog=self.catalog())

    def create_race(self, caps: list[int], *, open_now: bool = True, owner: str = "director-test", **kw: Any) -> str:
        now = datetime.now(UTC)
        kw.setdefault("location", "Test Park")
        kw.setdefault("listing", "LISTED")
        draft = RaceDraft(
            name=kw.pop("name", "Test Race"),
            raceDate=(now + timedelta(days=30)).date().isoformat(),
            registrationOpensAt=now - timedelta(minutes=1),
            registrationClosesAt=now + timedelta(days=1),
            events=[EventDraft(name=f"Event {i}", cap=c, priceCents=2500) for i, c in enumerate(caps)],
            **kw,
        )
        return self.admin().create_race(owner, draft, open_now=open_now).raceId


def local_stack(work: Path) -> LocalStack:
    """The stack the test suites run against: each invocation in an environment of its own,
    as on Lambda, and the sweeper's schedule shrunk so expiry tests take seconds (its look for
    refunds with no answer too: a refund's key makes an early look harmless; a waitlist offer's
    window too)."""
    return LocalStack(
        work,
        Ports.free(),
        gateway_environments="own",
        schedule_scale=0.05,
        # An offer from a waitlist waits 20 s rather than its event's hours (test_waitlist_offers).
        params={"RefundSettleAfterSeconds": "2", "WaitlistOfferWindowSeconds": "20"},
        quiet=True,
    )


def backend_for(stack: LocalStack) -> Backend:
    env = stack.aws_env()
    session = boto3.session.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1")
    return Backend(
        stack=stack,
        dynamodb=session.client("dynamodb", endpoint_url=env["AWS_ENDPOINT_URL_DYNAMODB"]),
        sqs=session.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL_SQS"]),
        redis=redis.Redis(host="127.0.0.1", port=stack.ports.redis, decode_responses=True),
    )


def api_session(stack: LocalStack) -> requests.Session:
    """A requests session whose relative URLs go to the stack's gateway."""
    session = requests.Session()
    session.headers["Accept"] = "application/json"
    original = session.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 30)
        return original(method, stack.url + url if url.startswith("/") else url, *args, **kwargs)

    session.request = request  # type: ignore[method-assign]
    return session


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with local_stack(tmp_path_factory.mktemp("stack")) as running:
        yield running


@pytest.fixture(scope="session")
def backend(stack: LocalStack) -> Backend:
    return backend_for(stack)


@pytest.fixture
def director(stack: LocalStack) -> Iterator[Any]:
    """``director(name)``: an API session signed in as that race director (local issuer)."""
    from .admin import DirectorSession

    sessions: list[DirectorSession] = []

    def sign_in(name: str) -> DirectorSession:
        sessions.append(DirectorSession(stack, name))
        return sessions[-1]

    yield sign_in
    for s in sessions:
        s.close()


@pytest.fixture
def in_process_env(stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The stack's function environment in this process, with cold clients and settings."""
    env = stack.function_env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # The process-wide Metrics object was made before this environment existed.
    monkeypatch.setattr(metrics, "namespace", env["POWERTOOLS_METRICS_NAMESPACE"])
    _clear_built()
    yield
    _clear_built()


def _clear_built() -> None:
    """Forget the settings, clients and everything the wirings built from them: a store
    built earlier holds a client this test cannot see (its calls go uncounted) or an
    environment that is gone."""
    for cached in (config.get_settings, clients.aws, clients.cache):
        cached.cache_clear()
    # Powertools' parameter providers keep the client (and endpoint) of the first stack that used
    # them in this process: a stack a test started and stopped before would answer nothing.
    parameters.clear_caches()
    for name, module in list(sys.modules.items()):
        if name.startswith("racecap.") and (name.endswith(".wiring") or name == "racecap.cache"):
            for value in vars(module).values():
                if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", "") == name:
                    value.cache_clear()
