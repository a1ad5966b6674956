"""The questions capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.questions.service import Questions
    from racecap.questions.store import DynamoQuestions


@lru_cache(maxsize=1)
def question_store() -> DynamoQuestions:
    from racecap.questions.store import DynamoQuestions

    return DynamoQuestions(clients.dynamodb(), get_settings().races_table)


@lru_cache(maxsize=1)
def questions() -> Questions:
    from racecap.audit.wiring import audit_trail
    from racecap.aws.wiring import transact
    from racecap.cache import shared as cache
    from racecap.places.wiring import inventory
    from racecap.questions.service import Questions

    return Questions(question_store(), transact, audit_trail(), cache(), inventory())
