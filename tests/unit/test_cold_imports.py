"""Cold starts stay light: importing a handler (a Lambda cold start's init) loads nothing
the function does not use on that path.

Each handler is imported in a fresh interpreter with the function's environment, as
``make bench`` (e) does, and the modules it left in ``sys.modules`` are checked:

- ``aws_xray_sdk``: Powertools' Tracer imports it at cold start (115-206 ms measured in
  issue 14); the tracer is off unless ``RACECAP_XRAY_SDK=true``;
- ``stripe``: the payment provider's SDK is heavy; only the payment adapter imports it,
  inside the calls that use it;
- ``s3transfer`` (and ``boto3``, which imports it): nothing uses S3 at run time and the
  clients are botocore's;
- modules of Racecap's own that one function does not use on its path (``NOT_AT_COLD_START``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import blueprint
from local.runtime import LAYER_PATH
from tools.bench.coldstart import AVOIDABLE_AT_COLD_START

FORBIDDEN = AVOIDABLE_AT_COLD_START
# Functions that still load boto3 (and with it s3transfer), and why. Each entry is a debt:
# Powertools' idempotency utility imports its DynamoDB persistence layer (which imports
# boto3) from the package's __init__, so any function using idempotency pays it.
STILL_LOADS_BOTO3: dict[str, str] = {}  # EmailSender's was dropped: its sender is built by its first batch

# Modules a function's import must not load, and why: each was loaded once and cost a cold start
# milliseconds for a class or a helper that function never uses (issue 36's cold-start pair).
# Threads are the hold sweeper's, at run time (observability imports the executor when used).
NOT_AT_COLD_START: dict[str, tuple[str, ...]] = {f.id: ("concurrent.futures.thread",) for f in blueprint.FUNCTIONS}
# The runner's own-entry models (transfers, switches, links) are MyRegistrationApi's; the ledger's
# models were loaded for the webhook's one answer class (in payments.models now).
NOT_AT_COLD_START["RegistrationApi"] += ("racecap.registration.own_models", "racecap.ledger.models")
# The admin API imports its races router only (racecap.api.lazy): no other capability's models.
NOT_AT_COLD_START["AdminApi"] += ("racecap.registration.models", "racecap.ledger.models", "racecap.codes.models")

_CHILD = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("handler_under_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(fn: blueprint.Function, env: dict[str, str]) -> list[str]:
    path = fn.path / f"{fn.module.replace('.', '/')}.py"
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        env={**env, "PYTHONPATH": f"{blueprint.ROOT}:{LAYER_PATH}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def loaded_by_function(placeholder_env: dict[str, str]) -> dict[str, list[str]]:
    import os

    env = {**os.environ, **placeholder_env}
    env.pop("RACECAP_XRAY_SDK", None)
    with ThreadPoolExecutor(max_workers=4) as pool:
        loaded = list(pool.map(lambda f: _loaded(f, env), blueprint.FUNCTIONS))
    return {f.id: modules for f, modules in zip(blueprint.FUNCTIONS, loaded, strict=True)}


@pytest.mark.parametrize("fn_id", [f.id for f in blueprint.FUNCTIONS])
def test_given_a_handler_when_it_is_imported_cold_then_it_loads_no_xray_sdk_no_payment_sdk_and_no_s3transfer(
    fn_id: str, loaded_by_function: dict[str, list[str]]
) -> None:
    loaded = {name.split(".")[0] for name in loaded_by_function[fn_id]}
    allowed = {"boto3", "s3transfer"} if fn_id in STILL_LOADS_BOTO3 else set()
    assert loaded & set(FORBIDDEN) - allowed == set()


def test_given_the_known_exceptions_when_handlers_are_imported_then_each_still_needs_its_exception(
    loaded_by_function: dict[str, list[str]],
) -> None:
    # An exception that no longer applies is removed, so the guard tightens by itself.
    for fn_id in STILL_LOADS_BOTO3:
        assert "boto3" in loaded_by_function[fn_id], f"{fn_id} no longer loads boto3: drop its exception"


@pytest.mark.parametrize("fn_id", sorted(NOT_AT_COLD_START))
def test_given_a_handler_when_it_is_imported_cold_then_it_loads_none_of_the_modules_its_path_does_not_use(
    fn_id: str, loaded_by_function: dict[str, list[str]]
) -> None:
    assert set(NOT_AT_COLD_START[fn_id]) & set(loaded_by_function[fn_id]) == set()
