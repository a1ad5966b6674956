"""The console's API client (site/admin/src/api.js) on a stubbed fetch: a 503 or 429 with
Retry-After is asked again when the API says (it decided nothing), a few times at most; an
expired ID token is refreshed once; other errors reach the page as they came. Runs in the
installer's Node 22 (no sockets)."""

from __future__ import annotations

import json
import subprocess

import pytest

import blueprint
from tests.unit.test_console_srp import NODE

API = (blueprint.ROOT / "site" / "admin" / "src" / "api.js").as_uri()


def _calls(answers: list[tuple[int, dict[str, str]]]) -> dict:
    """Run one GET against ``answers`` (status, headers) in turn; what the page got and the
    calls made, with the waits asked of setTimeout (shortened to nothing)."""
    if not NODE.exists():
        pytest.fail(f"Node 22 is not installed at {NODE}: run `local/install.sh node`")
    code = f"""
import {{ adminApi }} from {json.dumps(API)};
const answers = {json.dumps(answers)};
const calls = [], waits = [];
globalThis.setTimeout = (fn, ms) => {{ waits.push(ms); fn(); return 0; }};
globalThis.fetch = async (url, init) => {{
  const [status, headers] = answers[Math.min(calls.length, answers.length - 1)];
  calls.push({{ url, auth: init.headers.Authorization }});
  return new Response(status === 204 ? null : JSON.stringify({{ error: 'E' + status, message: 'm' + status }}),
                      {{ status, headers }});
}};
let tokens = 0;
const session = {{ idToken: async ({{ force }}) => `t${{++tokens}}${{force ? '!' : ''}}` }};
let got;
try {{ got = {{ ok: await adminApi(session).get('/races') }}; }}
catch (e) {{ got = {{ status: e.status, code: e.code }}; }}
console.log(JSON.stringify({{ got, calls, waits }}));
"""
    proc = subprocess.run(
        [str(NODE), "--input-type=module", "-e", code], capture_output=True, text=True, check=False, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_busy_answer_is_asked_again_when_the_api_says_and_the_page_gets_the_answer():
    out = _calls([(503, {"Retry-After": "2"}), (429, {"Retry-After": "1"}), (200, {})])
    assert out["got"] == {"ok": {"error": "E200", "message": "m200"}}
    assert len(out["calls"]) == 3 and out["waits"] == [2000, 1000]


def test_a_long_retry_after_is_capped_and_three_busy_answers_reach_the_page():
    out = _calls([(503, {"Retry-After": "60"})])
    assert out["got"] == {"status": 503, "code": "E503"}
    assert len(out["calls"]) == 4 and out["waits"] == [5000, 5000, 5000]


@pytest.mark.parametrize("answer", [(503, {}), (500, {"Retry-After": "1"}), (409, {})])
def test_an_error_without_a_time_to_ask_again_reaches_the_page_at_once(answer):
    out = _calls([answer])
    assert out["got"] == {"status": answer[0], "code": f"E{answer[0]}"}
    assert len(out["calls"]) == 1 and out["waits"] == []


def test_an_expired_token_is_refreshed_once_then_the_page_hears_it_is_signed_out():
    out = _calls([(401, {}), (200, {})])
    assert out["got"]["ok"]["error"] == "E200"
    assert [c["auth"] for c in out["calls"]] == ["Bearer t1", "Bearer t2!"]
    twice = _calls([(401, {})])
    assert twice["got"] == {"status": 401, "code": "E401"} and len(twice["calls"]) == 2
