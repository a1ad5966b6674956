"""Each exception in the contract test's schemathesis config applies to the operations it
names and to no other (schemathesis ORs separate include-* keys: an exception scoped with
include-path plus include-method once applied to every POST)."""

from __future__ import annotations

import json
from pathlib import Path

import schemathesis
from schemathesis.config import SchemathesisConfig

from tools.openapi import OUT

CONFIG = Path(__file__).resolve().parents[1] / "integration" / "schemathesis.toml"


def test_each_exception_applies_only_to_the_operations_it_names(monkeypatch) -> None:
    # The run's tokens come from the environment (test_contract.py makes them).
    monkeypatch.setenv("RACECAP_FUZZ_DIRECTOR", "a-director-token")
    monkeypatch.setenv("RACECAP_FUZZ_DEVICE", "a-device-token")
    config = SchemathesisConfig.from_path(str(CONFIG))
    schema = schemathesis.openapi.from_dict(json.loads(OUT.read_text()), config=config)
    labels = [op.ok().label for op in schema.get_all_operations()]
    scoped = {}
    for block in schema.config.operations.operations:
        applies = [
            label for label in labels if block._filter_set.applies_to(operation=schema.find_operation_by_label(label))
        ]
        scoped[applies[0] if len(applies) == 1 else tuple(applies)] = len(applies)
    assert scoped == {
        ("POST /api/admin/races", "PATCH /api/admin/races/{raceId}"): 2,
        ("POST /api/admin/races/{raceId}/events", "PATCH /api/admin/races/{raceId}/events/{eventId}"): 2,
        "POST /api/holds/{holdId}/registration": 1,
        "POST /api/holds/{holdId}/payment/confirm": 1,
        "POST /api/holds/{holdId}/payment": 1,
        "POST /api/admin/races/{raceId}/copy": 1,
        "POST /api/payments/webhook": 1,
        "POST /api/races/{raceId}/events/{eventId}/holds": 1,
        ("POST /api/admin/races/{raceId}/codes", "POST /api/admin/races/{raceId}/codes/bulk"): 2,
        ("DELETE /api/holds/{holdId}/code", "PUT /api/holds/{holdId}/code"): 2,
        "POST /api/races/{raceId}/events/{eventId}/teams": 1,
        "POST /api/holds/{holdId}/team": 1,
        "POST /api/transfers/accept": 1,
        "POST /api/races/{raceId}/events/{eventId}/ballot": 1,
        "PUT /api/admin/races/{raceId}/events/{eventId}/ballot": 1,
    }
