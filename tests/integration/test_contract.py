"""The contract: schemathesis, every check and the stateful phase, against the document the
local stack serves at /api/openapi.json, as a race director (a token from the local issuer).

A fixed seed and time budget keep `make test` reproducible and bounded; `make fuzz` runs the
same thing for longer (RACECAP_FUZZ_SECONDS). The only excused answers are in
schemathesis.toml, each with its reason. The run's reports go to test-artifacts/contract.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

import blueprint
from local.stack import LocalStack

CONFIG = Path(__file__).with_name("schemathesis.toml")
REPORTS = blueprint.ROOT / "test-artifacts" / "contract"
SECONDS = int(os.environ.get("RACECAP_FUZZ_SECONDS", "120"))
SEED = int(os.environ.get("RACECAP_FUZZ_SEED", "20261123"))


@pytest.mark.timeout(SECONDS + 240)
def test_the_api_answers_as_its_document_says(stack: LocalStack) -> None:
    token = stack.issuer.mint("schemathesis", ttl_s=SECONDS + 3600)
    # A cold PublicApi environment on a loaded machine can take seconds: warm it first.
    assert requests.get(f"{stack.url}/api/openapi.json", timeout=60).status_code == 200
    REPORTS.mkdir(parents=True, exist_ok=True)
    cli = Path(sys.executable).with_name("schemathesis")
    cmd = [
        str(cli), "--config-file", str(CONFIG), "run", f"{stack.url}/api/openapi.json",
        "--header", f"Authorization: Bearer {token}",
        "--checks", "all", "--phases", "examples,coverage,fuzzing,stateful",
        # One worker: with two, hypothesis parses lambdas in two threads at once and Python
        # 3.11's ast module fails ("AST constructor recursion depth mismatch").
        "--max-time", str(SECONDS), "--seed", str(SEED), "--workers", "1",
        "--generation-database", "none", "--request-timeout", "30", "--wait-for-schema", "60",
        "--report", "junit,ndjson", "--report-dir", str(REPORTS),
    ]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=SECONDS + 180, cwd=REPORTS, check=False)
    (REPORTS / "output.txt").write_text(run.stdout + run.stderr)
    summary = run.stdout[-6000:]
    assert run.returncode == 0, f"schemathesis found failures (full output: {REPORTS / 'output.txt'}):\n{summary}"
    assert "Stateful" in run.stdout, "the stateful phase did not run"
