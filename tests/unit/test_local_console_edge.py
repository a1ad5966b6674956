"""The local gateway serves the director's console as CloudFront's /admin/* behaviour does:
its own security headers (blueprint.console_security_headers), its page for /admin/ and its
hash routes, /admin redirected, and config.json from the stack's user pool."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

import blueprint
from local import gateway


def _get(app: gateway.Gateway, path: str) -> tuple[str, dict[str, str], bytes]:
    seen: dict[str, Any] = {}

    def start(status: str, headers: list[tuple[str, str]], *_: Any) -> None:
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(app({"PATH_INFO": path, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO()}, start))
    return seen["status"], seen["headers"], body


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> gateway.Gateway:
    (tmp_path / "admin").mkdir()
    (tmp_path / "index.html").write_text("runner site")
    (tmp_path / "admin" / "index.html").write_text("console")
    config = {"region": "us-east-1", "userPoolId": "us-east-1_X", "clientId": "c", "endpoint": "http://127.0.0.1:5"}
    monkeypatch.setattr(gateway, "CONSOLE_CONFIG", config)
    app = gateway.Gateway.__new__(gateway.Gateway)
    app.site_dir = tmp_path
    return app


def test_the_console_has_its_own_policy_and_the_runner_site_keeps_its_own(app: gateway.Gateway) -> None:
    status, headers, body = _get(app, "/admin/")
    assert (status, body) == ("200 OK", b"console")
    assert headers["Content-Security-Policy"] == gateway.CONSOLE_HEADERS["Content-Security-Policy"]
    assert headers["Referrer-Policy"] == "no-referrer"
    _, runner, body = _get(app, "/")
    assert body == b"runner site"
    assert runner["Content-Security-Policy"] == gateway.SECURITY_HEADERS["Content-Security-Policy"]
    assert runner["Content-Security-Policy"] != headers["Content-Security-Policy"]


def test_console_routes_get_its_page_and_the_bare_path_is_redirected(app: gateway.Gateway) -> None:
    assert _get(app, "/admin/races/new")[2] == b"console"
    status, headers, _ = _get(app, "/admin")
    assert status.startswith("301") and headers["Location"] == blueprint.CONSOLE_PATH


def test_config_json_names_the_pool_and_is_not_cached(app: gateway.Gateway) -> None:
    status, headers, body = _get(app, "/admin/config.json")
    assert status == "200 OK" and headers["Cache-Control"] == "no-cache"
    assert json.loads(body)["userPoolId"] == "us-east-1_X"


def test_the_console_policy_connects_to_sign_in_and_uploads_only() -> None:
    origins = blueprint.ConsoleOrigins(sign_in="https://idp.example", uploads="https://up.example")
    csp = blueprint.console_content_security_policy(origins)
    (connect,) = [d for d in csp.split("; ") if d.startswith("connect-src")]
    assert connect == "connect-src 'self' https://idp.example https://up.example"
    assert "script-src 'self';" in csp and "unsafe" not in csp
