"""The burst's runners retry as the site does (artillery/processor.js against site/api.js).

The site treats 429 and 503 with Retry-After as "busy": it waits what the answer says and asks
again, one budget for both (``withBusyRetry``). The burst's runner used to count a 503 against
the three tries it keeps for other server errors, so a runner that had waited out three 429s
gave up on its first 503 (one of 450 in a chaos burst), where a runner on the site goes on.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Feeds afterRegister a sequence of answers as Artillery would and prints what the runner does.
_PROBE = r"""
const p = require(process.argv[1]);
const answers = JSON.parse(process.argv[2]);
const v = { tries: 0 };
const context = { vars: v };
const events = { emit() {} };
const seen = [];
for (const [status, retryAfter] of answers) {
  v.again = false;
  const res = { statusCode: status, headers: retryAfter === null ? {} : { 'retry-after': String(retryAfter) },
                body: JSON.stringify({ error: status === 429 ? 'TOO_MANY_REQUESTS' : 'SERVICE_UNAVAILABLE',
                                       message: 'busy' }) };
  p.afterRegister({}, res, context, events, () => {});
  seen.push({ again: Boolean(v.again), outcome: v.outcome || null });
}
console.log(JSON.stringify(seen));
"""


def _runner(answers: list[tuple[int, int | None]]) -> list[dict[str, object]]:
    node = shutil.which("node")
    assert node is not None
    proc = subprocess.run(
        [node, "-e", _PROBE, str(ROOT / "artillery" / "processor.js"), json.dumps(answers)],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": str(Path(node).parent)},
    )
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_a_runner_waits_out_429s_then_a_503_with_retry_after_as_the_site_does() -> None:
    seen = _runner([(429, 1), (429, 1), (429, 1), (503, 2), (503, 2)])

    assert all(step == {"again": True, "outcome": None} for step in seen)


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_a_runner_still_gives_up_on_server_errors_that_say_nothing_after_its_tries() -> None:
    seen = _runner([(500, None), (500, None), (500, None), (500, None)])

    assert [s["again"] for s in seen] == [True, True, True, False]
    assert seen[-1]["outcome"] == "not_confirmed"
