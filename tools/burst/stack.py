"""Driving the local stack around a burst: start it, seed a race, count what the tables
and queues hold (the progress line, the drain, the audit, the confirmations).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import blueprint
from local.auth import director_sub
from local.runtime import install_layer_path
from local.stack import LocalStack, Ports

install_layer_path()

from racecap.aws.items import from_item, query_all, to_item, values  # noqa: E402
from racecap.places.store import DynamoInventory  # noqa: E402
from racecap.races.store import DynamoRaceStore  # noqa: E402
from racecap.setup.models import EventDraft, RaceDraft  # noqa: E402
from racecap.setup.service import RaceAdmin  # noqa: E402

from tools import audit as auditing  # noqa: E402
from tools.audit import AuditReport  # noqa: E402
from tools.burst.clients import Clients  # noqa: E402
from tools.burst.config import DIRECTOR, BurstConfig  # noqa: E402


def start_stack(
    cfg: BurstConfig, work_dir: Path, extra_env: dict[str, str] | None = None, persist_queues: bool = False
) -> LocalStack:
    """A dedicated stack on free ports; SES and the email sender sped up for a big burst."""
    stack = LocalStack(
        work_dir,
        Ports.free(),
        gateway_environments=cfg.gateway_environments,
        gateway_workers=cfg.gateway_workers,
        gateway_threads=cfg.gateway_threads,
        ses_max_rate=cfg.email_rate,
        params={
            "EmailSendRatePerSecond": str(cfg.email_rate),
            **(
                {"PaymentsRatePerSecond": f"{cfg.payments_budget_per_second:g}"}
                if cfg.payments_budget_per_second is not None
                else {}
            ),
            **(
                {"PaymentsEndpointRatePerSecond": f"{cfg.payments_endpoint_budget_per_second:g}"}
                if cfg.payments_endpoint_budget_per_second is not None
                else {}
            ),
        },
        extra_env=extra_env,
        persist_queues=persist_queues,
        quiet=True,
    )
    return stack.start()


def seed_race(
    clients: Clients, caps: list[tuple[str, int, int]], name: str = "Burst City Marathon", *, open_now: bool = True
) -> str:
    """Create a race with (name, cap, priceCents) events, straight through the layer: open,
    or (``open_now=False``) opening tomorrow, for a scenario that opens it during the burst.
    Its owner is the burst's director (``local.auth`` mints their token for the admin API)."""
    now = datetime.now(UTC)
    draft = RaceDraft(
        name=name,
        location="Loopback Park",
        raceDate=(now + timedelta(days=90)).date().isoformat(),
        registrationOpensAt=now - timedelta(minutes=1) if open_now else now + timedelta(hours=20),
        registrationClosesAt=now + timedelta(days=1),
        holdMinutes=15,
        listing="LISTED",
        # Every event takes teams of 2 to 8 (a share of runners are captains: TEAM_SHARE).
        events=[
            EventDraft(
                name=n,
                cap=c,
                priceCents=p,
                teamMinSize=2 if c >= 2 else None,
                teamMaxSize=min(8, c) if c >= 2 else None,
            )
            for n, c, p in caps
        ],
    )
    admin = RaceAdmin(
        DynamoRaceStore(clients.dynamodb, blueprint.table("Races").local_name),
        DynamoInventory(clients.dynamodb, blueprint.table("Inventory").local_name),
    )
    return admin.create_race(director_sub(DIRECTOR), draft, open_now=open_now).raceId


# What a runner answers, in the order the questions are added (the first n of them).
FIVE_ANSWERS: list[tuple[str, object]] = [
    ("rc_emergency_name", "Kim Runner"),
    ("rc_emergency_phone", "+44 20 7946 0958"),
    ("shirt", "M"),
    ("member", True),
    ("nation", "GB"),
]


def seed_questions(clients: Clients, race_id: str, answers: int, redis_url: str) -> dict[str, object]:
    """Ask the race's events questions (as the admin API saves them, moving the stack's
    cached stamp on: the warm-up has read "no questions" already) so that each runner
    answers ``answers`` of them (1-5); returns those answers, as the runners send them."""
    import redis
    from racecap.audit.service import AuditTrail
    from racecap.audit.store import DynamoAudit
    from racecap.aws.transactions import transact
    from racecap.cache import TieredCache
    from racecap.models import Director
    from racecap.questions.models import QuestionSetDraft
    from racecap.questions.service import Questions
    from racecap.questions.store import DynamoQuestions

    wanted = dict(FIVE_ANSWERS[: max(1, min(answers, len(FIVE_ANSWERS)))])
    own = {
        "shirt": {"id": "shirt", "kind": "SINGLE_CHOICE", "label": "T-shirt", "required": True,
                  "options": [{"id": s, "label": s} for s in ("S", "M", "L")]},
        "member": {"id": "member", "kind": "YES_NO", "label": "Member of a club?"},
        "nation": {"id": "nation", "kind": "COUNTRY", "label": "Nationality"},
    }  # fmt: skip
    draft = QuestionSetDraft.model_validate(
        {
            "builtIns": {"emergencyContact": "rc_emergency_name" in wanted},
            "questions": [q for qid, q in own.items() if qid in wanted],
        }
    )
    races = DynamoRaceStore(clients.dynamodb, blueprint.table("Races").local_name)
    service = Questions(
        DynamoQuestions(clients.dynamodb, blueprint.table("Races").local_name),
        lambda items: transact(clients.dynamodb, items),
        AuditTrail(DynamoAudit(clients.dynamodb, blueprint.table("Audit").local_name)),
        TieredCache(lambda: redis.Redis.from_url(redis_url)),
        DynamoInventory(clients.dynamodb, blueprint.table("Inventory").local_name),
    )
    found = races.get_race(race_id)
    assert found is not None
    race, events = found
    for event in events:
        service.save(Director(sub=director_sub(DIRECTOR), username=DIRECTOR), race, event, draft)
    if "rc_emergency_name" not in wanted:  # the phone alone is not asked without the name
        wanted.pop("rc_emergency_phone", None)
    return wanted


def seed_code(clients: Clients, race_id: str, cfg: BurstConfig) -> int:
    """The burst's discount code on its race, straight through the codes store (as
    ``seed_race`` makes the race): 20 % off, its uses half of the runners expected to try
    it unless ``code_uses`` says, so it runs out mid-burst. Returns its use limit."""
    from racecap.audit.service import AuditTrail
    from racecap.audit.store import DynamoAudit
    from racecap.codes.models import CodeTerms
    from racecap.codes.service import shard_caps
    from racecap.codes.store import DynamoCodes, StoredCode
    from racecap.models import Director

    uses = cfg.code_uses or max(1, round(cfg.runners * cfg.code_share / 2))
    store = DynamoCodes(clients.dynamodb, blueprint.table("Races").local_name, blueprint.table("Inventory").local_name)
    code = StoredCode(
        raceId=race_id,
        code=cfg.code.upper(),
        terms=CodeTerms(kind="PERCENT", percent=20, note="the burst's code"),
        maxUses=uses,
        shards=shard_caps(uses),
        createdAt=datetime.now(UTC),
    )
    audit = AuditTrail(DynamoAudit(clients.dynamodb, blueprint.table("Audit").local_name))
    director = Director(sub=director_sub(DIRECTOR), username=DIRECTOR)
    store.create([code], audit.item(director, race_id, "code.create", code.code, maxUses=uses))
    return uses


def confirmed_count(clients: Clients, race_id: str, event_ids: list[str]) -> int:
    """The writer's running total (the STATS item per event): one read per event."""
    table = blueprint.table("Inventory").local_name
    total = 0
    for eid in event_ids:
        resp = clients.dynamodb.get_item(TableName=table, Key=to_item({"pk": f"STATS#{race_id}#{eid}", "sk": "STATS"}))
        if "Item" in resp:
            total += int(from_item(resp["Item"]).get("confirmed", 0))
    return total


def queue_depth(clients: Clients, queue_urls: dict[str, str]) -> int:
    total = 0
    for q in blueprint.QUEUES:
        attrs = clients.sqs.get_queue_attributes(
            QueueUrl=queue_urls[q.id],
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        total += int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])
    return total


def drain(stack: LocalStack, clients: Clients, timeout_s: float, say: Any) -> float:
    """Wait for both queues to be empty, in flight included (emails are the slow part)."""
    t0 = time.monotonic()
    quiet_checks = 0
    while time.monotonic() < t0 + timeout_s:
        depth = queue_depth(clients, stack.queue_urls)
        quiet_checks = quiet_checks + 1 if depth == 0 else 0
        if quiet_checks >= 2:
            break
        time.sleep(1.0)
    drained = time.monotonic() - t0
    say(f"queues drained in {drained:.1f}s")
    return drained


def audit_until_clean(stack: LocalStack, clients: Clients, race_id: str, timeout_s: float) -> AuditReport:
    return auditing.audit_until_clean(
        stack, clients.dynamodb, clients.sqs, race_id, timeout_s=timeout_s, interval_s=2.0
    )


def confirmations(clients: Clients, race_id: str, event_ids: list[str]) -> list[dict[str, Any]]:
    """Every confirmed registration of the race: id, event, bib, paidAt, confirmedAt."""
    table = blueprint.table("Registrations").local_name
    out: list[dict[str, Any]] = []
    for eid in event_ids:
        out += list(
            query_all(
                clients.dynamodb,
                TableName=table,
                IndexName="gsi1",
                KeyConditionExpression="gsi1pk = :pk",
                ExpressionAttributeValues=values({":pk": f"EVENT#{race_id}#{eid}"}),
                ProjectionExpression="registrationId, eventId, bib, paidAt, confirmedAt, #s",
                ExpressionAttributeNames={"#s": "status"},
            )
        )
    return [r for r in out if r.get("status") == "CONFIRMED"]
