"""The contract: schemathesis, every check and the stateful phase, against the document the
local stack serves at /api/openapi.json, as a race director (a token from the local issuer).

A fixed seed and time budget keep `make test` reproducible and bounded; `make fuzz` runs the
same thing for longer (RACECAP_FUZZ_SECONDS). The only excused answers are in
schemathesis.toml, each with its reason. The run's reports go to test-artifacts/contract.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

import blueprint
from local.stack import LocalStack

from .admin import DirectorSession
from .results import registration_item, results_url, seed_registrations, upload, wait_for_upload

CONFIG = Path(__file__).with_name("schemathesis.toml")
REPORTS = blueprint.ROOT / "test-artifacts" / "contract"
SECONDS = int(os.environ.get("RACECAP_FUZZ_SECONDS", "120"))
SEED = int(os.environ.get("RACECAP_FUZZ_SEED", "20261123"))


# Operations a schema-valid call must get a 2xx from at least once: the queue past the
# device token and the proof-of-work, and the results reads of a published version.
MUST_REACH = (
    "POST /api/races/{raceId}/queue",
    "GET /api/races/{raceId}/queue",
    "POST /api/races/{raceId}/events/{eventId}/holds",
    "GET /api/races/{raceId}/results",
    "GET /api/races/{raceId}/events/{eventId}/results/{version}",
    "GET /api/races/{raceId}/events/{eventId}/results/{version}/search",
    "GET /api/races/{raceId}/events/{eventId}/results/{version}/bibs/{bib}",
)
RESULTS_CSV = "bib,chip_time,gun_time,status,category\n1,3:10:00,3:11:00,finished,F\n2,3:20:00,3:21:30,finished,M\n"


def _fuzz_race(stack: LocalStack, backend: Any) -> dict[str, str]:
    """Races the fuzzer reads but cannot change (another director's): one open with its queue on
    (proof-of-work difficulty 0) and a published results version for its first event, and one
    open without a queue, for holds."""
    owner = DirectorSession(stack, "contract-seeder")
    race = owner.create_race((500,))
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    runners = {1: ("Ada", "Lovelace", "1990-12-10"), 2: ("Alan", "Turing", "1992-06-23")}
    seed_registrations(backend, (registration_item(race_id, event_id, b, *who) for b, who in runners.items()))
    done = wait_for_upload(owner, upload(owner, race_id, event_id, RESULTS_CSV))
    assert done["status"] == "READY", done
    assert owner.post(results_url(race_id, event_id, "/publish")).status_code == 200
    owner.open_now(race_id)
    fairness = {"queueEnabled": True, "powDifficulty": 0}
    resp = owner.patch(f"/api/admin/races/{race_id}/fairness", json=fairness)
    assert resp.status_code == 200, resp.text
    # Holds go to another race, open without a queue: a hold there needs only the device.
    open_race = owner.create_race((500,))
    owner.open_now(open_race["raceId"])
    device = requests.post(f"{stack.url}/api/device", timeout=60)
    assert device.status_code == 201, device.text
    return {
        "RACECAP_FUZZ_BASE": stack.url,
        "RACECAP_FUZZ_DEVICE": device.json()["deviceToken"],
        "RACECAP_FUZZ_RACE": race_id,
        "RACECAP_FUZZ_EVENT": event_id,
        "RACECAP_FUZZ_BIB": "1",
        "RACECAP_FUZZ_OPEN_RACE": open_race["raceId"],
        "RACECAP_FUZZ_OPEN_EVENT": open_race["events"][0]["eventId"],
    }


def reached(ndjson: Path) -> dict[str, set[int]]:
    """Each operation's answered statuses, from schemathesis's own report."""
    seen: dict[str, set[int]] = {}
    for line in ndjson.read_text().splitlines():
        for label, status in _answers(json.loads(line)):
            seen.setdefault(label, set()).add(status)
    return seen


def _answers(node: Any, label: str | None = None) -> Iterator[tuple[str, int]]:
    # The report nests interactions under events; walk it rather than pin its layout.
    if isinstance(node, dict):
        label = node.get("label", label) if isinstance(node.get("label"), str) else label
        response = node.get("response")
        if label and isinstance(response, dict) and isinstance(response.get("status_code"), int):
            yield label, response["status_code"]
        for value in node.values():
            yield from _answers(value, label)
    elif isinstance(node, list):
        for value in node:
            yield from _answers(value, label)


@pytest.mark.timeout(SECONDS + 300)
def test_the_api_answers_as_its_document_says(stack: LocalStack, backend: Any) -> None:
    token = stack.issuer.mint("schemathesis", ttl_s=SECONDS + 3600)
    # A cold PublicApi environment on a loaded machine can take seconds: warm it first.
    assert requests.get(f"{stack.url}/api/openapi.json", timeout=60).status_code == 200
    env = {
        **os.environ,
        **_fuzz_race(stack, backend),
        "RACECAP_FUZZ_DIRECTOR": token,
        "SCHEMATHESIS_HOOKS": "tests.integration.contract_hooks",
        "PYTHONPATH": os.pathsep.join([str(blueprint.ROOT), str(blueprint.ROOT / "layers" / "racecap" / "python")]),
    }
    REPORTS.mkdir(parents=True, exist_ok=True)
    for old in REPORTS.glob("*.ndjson"):
        old.unlink()
    cli = Path(sys.executable).with_name("schemathesis")
    cmd = [
        str(cli), "--config-file", str(CONFIG), "run", f"{stack.url}/api/openapi.json",
        "--checks", "all", "--phases", "examples,coverage,fuzzing,stateful",
        # One worker: with two, hypothesis parses lambdas in two threads at once and Python
        # 3.11's ast module fails ("AST constructor recursion depth mismatch").
        "--max-time", str(SECONDS), "--seed", str(SEED), "--workers", "1",
        "--generation-database", "none", "--request-timeout", "30", "--wait-for-schema", "60",
        "--report", "junit,ndjson", "--report-dir", str(REPORTS),
    ]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=SECONDS + 180, cwd=REPORTS, check=False, env=env)
    (REPORTS / "output.txt").write_text(run.stdout + run.stderr)
    summary = run.stdout[-6000:]
    assert run.returncode == 0, f"schemathesis found failures (full output: {REPORTS / 'output.txt'}):\n{summary}"
    assert "Stateful" in run.stdout, "the stateful phase did not run"
    seen = reached(next(REPORTS.glob("*.ndjson")))
    missed = {
        label: sorted(seen.get(label, ()))
        for label in MUST_REACH
        if not any(200 <= s < 300 for s in seen.get(label, ()))
    }
    assert not missed, f"no 2xx from these operations (their answers): {missed}"
