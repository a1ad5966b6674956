"""``SCENARIO=bots``: bots at an opening (issue 11), ``artillery/bots.yml``.

One device token hammers holds, one address cycles fresh device tokens, honest runners
hold from their own addresses. Before the burst the race gets the hold limit and the
address ceiling under test, and the token bot its one device token (signed with the
stack's key, so every Artillery worker plays the same device). After it, the bots' hold
counters are read from DynamoDB — the counters the hold's own transaction keeps — and
must be within the limits, and the race's places must add up.

Options (``BurstConfig.options``; env ``BOT_TOKENS``, ``ADDRESS_CEILING``, ``BOT_TRIES``):
the address bot's tokens (500), the address ceiling (100), the token bot's holds (50).
"""

from __future__ import annotations

import json
import time
from typing import Any

import blueprint
from local.runtime import install_layer_path
from tools.burst.config import ARTILLERY_DIR, BurstConfig, BurstRun, Scenario

install_layer_path()  # the scenario registry imports this module first: racecap is not on the path yet

from racecap.aws.items import from_item, to_item  # noqa: E402
from racecap.fairness.identity import new_device_token  # noqa: E402
from racecap.fairness.store import DynamoQueueStore  # noqa: E402
from racecap.fairness.tokens import Signer  # noqa: E402

HOLD_LIMIT = 4  # the race's (and the product's default) per-device limit
HAMMER_ADDRESS = "203.0.113.44"  # documentation addresses (RFC 5737): never an honest runner's
CYCLER_ADDRESS = "203.0.113.66"


def option(cfg: BurstConfig, name: str) -> int:
    return int(cfg.options.get(name, {"bot_tokens": 500, "address_ceiling": 100, "bot_tries": 50}[name]))


def places(cfg: BurstConfig) -> int:
    """Room for everyone: both bots must be stopped by their limits, not by a sell-out, and
    an honest runner refused anything but a clear sold out is a failure."""
    return HOLD_LIMIT + option(cfg, "address_ceiling") + max(1, cfg.runners - 2) + 4  # + the warm-up's holds


def conditions(cfg: BurstConfig) -> list[str]:
    return [
        f"racecap.bots.token.held <= {HOLD_LIMIT}",
        "racecap.bots.token.too_many > 0",
        f"racecap.bots.address.held <= {option(cfg, 'address_ceiling')}",
        "racecap.runners.held + racecap.runners.sold_out == racecap.runners.arrived",
        "racecap.runners.refused == 0",
        "racecap.server_errors == 0",
        "vusers.failed == 0",
    ]


def before(run: BurstRun) -> None:
    if run.stack is None or run.clients is None:
        raise RuntimeError("the bots scenario runs against the local stack only")
    store = DynamoQueueStore(run.clients.dynamodb, blueprint.table("Inventory").local_name)
    limits = {"holdLimit": HOLD_LIMIT, "addressHoldLimit": option(run.cfg, "address_ceiling")}
    if not store.save_settings(run.race_id, {"enabled": False, "seq": 0, **limits}, 0):
        raise RuntimeError("the race already has fairness settings")
    device_id, token = new_device_token(Signer(run.stack.fairness_key.encode()))
    run.figures["token_bot_device"] = device_id
    run.artillery_env.update(
        {
            "RACECAP_BOT_DEVICE_TOKEN": token,
            "RACECAP_TOKEN_BOT_ADDRESS": HAMMER_ADDRESS,
            "RACECAP_BOT_ADDRESS": CYCLER_ADDRESS,
            "RACECAP_BOT_TOKENS": str(option(run.cfg, "bot_tokens")),
            "RACECAP_BOT_TRIES": str(option(run.cfg, "bot_tries")),
        }
    )
    run.say(f"bots: hold limit {HOLD_LIMIT}, address ceiling {limits['addressHoldLimit']}")
    time.sleep(1.5)  # past the queue state's ~1 s cache, so the first hold sees these limits


def held_by(run: BurstRun, key: str) -> int:
    assert run.clients is not None
    resp = run.clients.dynamodb.get_item(
        TableName=blueprint.table("Inventory").local_name,
        Key=to_item({"pk": f"CLIENT#{run.race_id}#{key}", "sk": "HOLDS"}),
        ConsistentRead=True,
    )
    return int(from_item(resp["Item"]).get("n", 0)) if "Item" in resp else 0


def after(run: BurstRun, summary: dict[str, Any]) -> list[str]:
    counters = _counters(run)
    ceiling = option(run.cfg, "address_ceiling")
    token_db = held_by(run, f"D#{run.figures['token_bot_device']}")
    address_db = held_by(run, f"A#{CYCLER_ADDRESS}")
    run.figures.update(
        {
            "hold_limit": HOLD_LIMIT,
            "address_ceiling": ceiling,
            "token_bot": {
                "tries": counters.get("racecap.bots.token.tries", 0),
                "held": counters.get("racecap.bots.token.held", 0),
                "held_in_db": token_db,
                "too_many_holds": counters.get("racecap.bots.token.too_many", 0),
                "rate_limited": counters.get("racecap.bots.token.rate_limited", 0),
            },
            "address_bot": {
                "tokens": option(run.cfg, "bot_tokens"),
                "tries": counters.get("racecap.bots.address.tries", 0),
                "held": counters.get("racecap.bots.address.held", 0),
                "held_in_db": address_db,
                "too_many_holds": counters.get("racecap.bots.address.too_many", 0),
                "rate_limited": counters.get("racecap.bots.address.rate_limited", 0),
            },
            "runners": {k: counters.get(f"racecap.runners.{k}", 0) for k in ("arrived", "held", "sold_out", "refused")},
        }
    )
    problems = []
    if token_db > HOLD_LIMIT:
        problems.append(f"bots: the token bot holds {token_db} places (limit {HOLD_LIMIT})")
    if address_db > ceiling:
        problems.append(f"bots: the address bot holds {address_db} places (ceiling {ceiling})")
    return problems


def _counters(run: BurstRun) -> dict[str, int]:
    path = run.work / "artillery.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {k: int(v) for k, v in data.get("aggregate", {}).get("counters", {}).items()}


BOTS = Scenario(
    name="bots",
    artillery=ARTILLERY_DIR / "bots.yml",
    threshold_endpoints=("hold",),
    registers=False,
    places=places,
    before=before,
    after=after,
    ensure_conditions=conditions,
)
