"""The admin API imports a capability's router on the first request that needs it (issue 38's
cold starts): every declared route's path picks the router that serves it, a cold environment
loads one capability for a director's first request, and a path the guess misses still finds
its route (every router is then included)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from racecap.api.admin import ORDER, capability_of

import blueprint
from local.runtime import LAYER_PATH


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", path)


def test_given_every_admin_route_when_its_path_is_picked_then_the_router_that_serves_it_is_named() -> None:
    import importlib

    served_by = {}
    for name in ORDER:
        for route in importlib.import_module(f"racecap.api.admin.{name}").router._routes:
            served_by[route[0]] = name  # (path, method, ...) keys of the router's routes
    admin = [r for r in blueprint.ROUTES if r.function == "AdminApi"]
    assert admin
    for r in admin:
        powertools_path = re.sub(r"\{([^}]+)\}", r"<\1>", r.path)
        assert capability_of(_concrete(r.path)) == served_by[powertools_path], r.path


_FIRST_REQUEST = """
import json, sys
import handler_module as h
h.routers.ensure(sys.argv[1], sys.argv[2])
print(json.dumps({"loaded": h.routers.loaded, "codes": "racecap.codes.models" in sys.modules}))
"""


def _first_request(placeholder_env: dict[str, str], method: str, path: str) -> dict[str, object]:
    fn = blueprint.function("AdminApi")
    code = _FIRST_REQUEST.replace("import handler_module as h", "import importlib.util as u\n"
        f"spec = u.spec_from_file_location('h', {str(fn.path / 'handler.py')!r}); h = u.module_from_spec(spec); "
        "spec.loader.exec_module(h)")  # fmt: skip
    env = {**placeholder_env, "PYTHONPATH": f"{blueprint.ROOT}:{LAYER_PATH}"}
    out = subprocess.run(
        [sys.executable, "-c", code, method, path], env=env, capture_output=True, text=True, check=True
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_given_a_cold_admin_api_when_a_director_lists_races_then_one_capability_is_loaded(placeholder_env) -> None:
    import os

    env = {**os.environ, **placeholder_env}
    assert _first_request(env, "GET", "/api/admin/races") == {"loaded": ["races"], "codes": False}
    assert _first_request(env, "GET", "/api/admin/races/r1/codes") == {"loaded": ["races", "codes"], "codes": True}
    # A path no capability serves: every router is included before the resolver says 404.
    assert _first_request(env, "GET", "/api/admin/races/r1/nothing/here")["loaded"] == list(ORDER)
