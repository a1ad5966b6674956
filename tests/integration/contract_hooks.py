"""schemathesis hooks for the contract run (tests/integration/test_contract.py loads them with
SCHEMATHESIS_HOOKS): what no schema can give a fuzzer, so that it gets past the front door.

* A race with its opening queue on (proof-of-work difficulty 0) and a published results
  version, and an open race without a queue, exist only as ids made at run time;
  schema-valid calls to the queue, the results reads and holds are pointed at them, else
  every one is a 404 about a random id.
* Joining the queue needs a challenge issued to this device and solved: a schema-valid join
  gets a fresh one, solved here. Its answer's queue token is kept, and later schema-valid
  polls of your place send it (the document's ``queue`` scheme).

Only positive cases (schema-valid, as generated) are changed; negative ones go as generated,
so the refusals are still fuzzed. The device token comes from the config's ``device``
scheme (the same value, from the environment).
"""

from __future__ import annotations

import os
from typing import Any

import requests
import schemathesis
from racecap.fairness.identity import TOKEN_SCHEMES
from racecap.fairness.work import solve

BASE = os.environ["RACECAP_FUZZ_BASE"]
DEVICE = os.environ["RACECAP_FUZZ_DEVICE"]
RACE = os.environ["RACECAP_FUZZ_RACE"]
EVENT = os.environ["RACECAP_FUZZ_EVENT"]
BIB = int(os.environ["RACECAP_FUZZ_BIB"])
OPEN_RACE, OPEN_EVENT = os.environ["RACECAP_FUZZ_OPEN_RACE"], os.environ["RACECAP_FUZZ_OPEN_EVENT"]
DEVICE_HEADER, QUEUE_HEADER = TOKEN_SCHEMES["device"][0], TOKEN_SCHEMES["queue"][0]

JOIN = "POST /api/races/{raceId}/queue"
PLACE = "GET /api/races/{raceId}/queue"
ON_THE_QUEUE_RACE = {
    JOIN,
    PLACE,
    "POST /api/races/{raceId}/queue/challenge",
    "GET /api/races/{raceId}/queue/now-serving",
}
RESULTS = "/api/races/{raceId}/events/{eventId}/results/{version}"
ON_THE_RESULTS = {
    "GET /api/races/{raceId}/results",
    f"GET {RESULTS}",
    f"GET {RESULTS}/search",
    f"GET {RESULTS}/bibs/{{bib}}",
}
HOLD = "POST /api/races/{raceId}/events/{eventId}/holds"
_kept: dict[str, str] = {}


def _positive(case: Any) -> bool:
    meta = case.meta
    return meta is None or (
        meta.generation.mode.is_positive and not any(c.mode.is_negative for c in meta.components.values())
    )


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    label = case.operation.label
    if label not in {*ON_THE_QUEUE_RACE, *ON_THE_RESULTS, HOLD} or not _positive(case):
        return
    params = case.path_parameters
    if label == HOLD:
        params["raceId"], params["eventId"] = OPEN_RACE, OPEN_EVENT
        return
    params["raceId"] = RACE
    if "eventId" in params:
        params["eventId"] = EVENT
    if "version" in params:
        params["version"] = 1
    if "bib" in params:
        params["bib"] = BIB
    if label == JOIN:
        case.body = _solved_challenge()
    elif label == PLACE and _kept.get("queue"):
        case.headers = {**(case.headers or {}), QUEUE_HEADER: _kept["queue"]}


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    if case.operation.label == JOIN and response.status_code == 200:
        token = (response.json() or {}).get("queueToken")
        if token and case.path_parameters.get("raceId") == RACE:
            _kept["queue"] = token


def _solved_challenge() -> dict[str, str]:
    resp = requests.post(f"{BASE}/api/races/{RACE}/queue/challenge", headers={DEVICE_HEADER: DEVICE}, timeout=30)
    resp.raise_for_status()
    challenge = resp.json()
    return {"challenge": challenge["challenge"], "nonce": solve(challenge["challenge"], challenge["difficulty"])}
