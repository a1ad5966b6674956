"""The results capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import ConfigurationError, get_settings

if TYPE_CHECKING:
    from racecap.results.service import ResultsAdmin, ResultsProcessor, ResultsReader
    from racecap.results.store import DynamoResults, S3Files


def _table() -> str:
    name = get_settings().results_table
    if name is None:
        raise ConfigurationError("RESULTS_TABLE is not set for this function")
    return name


@lru_cache(maxsize=1)
def results_store() -> DynamoResults:
    from racecap.results.store import DynamoResults

    return DynamoResults(clients.dynamodb(), _table())


@lru_cache(maxsize=1)
def files() -> S3Files:
    from racecap.results.store import S3Files

    bucket = get_settings().results_bucket
    if bucket is None:
        raise ConfigurationError("RESULTS_BUCKET is not set for this function")
    return S3Files(clients.aws("s3"), bucket)


@lru_cache(maxsize=1)
def results_admin() -> ResultsAdmin:
    from racecap.audit.wiring import audit_trail
    from racecap.aws.wiring import transact
    from racecap.cache import shared as cache
    from racecap.races.wiring import race_store
    from racecap.results.service import ResultsAdmin

    return ResultsAdmin(results_store(), files(), race_store(), transact, audit_trail(), cache())


@lru_cache(maxsize=1)
def results_processor() -> ResultsProcessor:
    from racecap.audit.wiring import audit_trail
    from racecap.aws.wiring import transact
    from racecap.cache import shared as cache
    from racecap.races.wiring import race_store
    from racecap.registration.wiring import registrations
    from racecap.results.service import ResultsProcessor

    return ResultsProcessor(results_store(), files(), race_store(), registrations(), transact, audit_trail(), cache())


@lru_cache(maxsize=1)
def results_reader() -> ResultsReader:
    from racecap.cache import shared as cache
    from racecap.races.wiring import catalog
    from racecap.results.service import ResultsReader

    return ResultsReader(results_store(), catalog(), cache())
