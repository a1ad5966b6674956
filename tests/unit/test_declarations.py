"""The blueprint, the settings model and the handlers' routes agree with each other."""

from __future__ import annotations

import re

from racecap.config import Settings

import blueprint


def test_every_declared_environment_key_is_validated_by_settings():
    aliases = {f.alias for f in Settings.model_fields.values()}
    extra = {k for fn in blueprint.FUNCTIONS for k in fn.extra_env}
    # Libraries' own switches (Powertools, pydantic) are theirs to read, not Racecap's.
    declared = {k for k in blueprint.COMMON_ENV if not k.startswith(("POWERTOOLS_", "PYDANTIC_"))} | extra
    assert declared <= aliases
    assert aliases - declared == {"POWERTOOLS_SERVICE_NAME"}
    # Only some functions get their extra variables: for the rest they must be optional.
    for name, f in Settings.model_fields.items():
        if f.alias in extra:
            assert not f.is_required(), name


def test_function_variables_never_shadow_each_other():
    # The local stack runs every function in one process with the union of their variables.
    seen: dict[str, object] = dict(blueprint.COMMON_ENV)
    for fn in blueprint.FUNCTIONS:
        for key, ref in fn.extra_env.items():
            assert seen.setdefault(key, ref) == ref, (fn.id, key)


def test_every_route_points_at_a_declared_function_with_a_handler_file():
    for route in blueprint.ROUTES:
        fn = blueprint.function(route.function)
        assert (fn.path / f"{fn.module}.py").is_file(), route


def test_each_handler_serves_exactly_its_declared_routes(function_host):
    for fn_id in sorted({r.function for r in blueprint.ROUTES}):
        module = function_host.module(fn_id)
        if hasattr(module, "routers"):  # routers loaded on first use: what it serves once all are
            module.routers.everything()
        app = module.app
        served = {
            (method, _to_gateway_path(route.path))
            for route in app._static_routes + app._dynamic_routes
            for method in route.method.split("|")
            if route.method != "OPTIONS"
        }
        # The catch-all (`ANY /api/{proxy+}`) is served by the resolver's not-found handler.
        declared = {(r.method, r.path) for r in blueprint.routes_for(fn_id) if r.method != "ANY"}
        assert served == declared, fn_id


def test_only_public_api_takes_the_catch_all_and_it_answers_for_every_other_route(function_host):
    catch_all = [r for r in blueprint.ROUTES if r.method == "ANY"]
    assert [(r.path, r.function, r.auth) for r in catch_all] == [("/api/{proxy+}", "PublicApi", "none")]
    # PublicApi finds the real routes' methods (for `Allow`) in the document it serves.
    known = set(function_host.module("PublicApi")._api_routes())
    assert known == {(r.method, r.path) for r in blueprint.ROUTES if r.method != "ANY"}


def _to_gateway_path(path: str) -> str:
    """Powertools writes /api/races/<raceId>; API Gateway writes /api/races/{raceId}."""
    return re.sub(r"<(\w+)>", r"{\1}", path)


def test_queue_triggers_never_exceed_reserved_concurrency():
    for trig in blueprint.QUEUE_TRIGGERS:
        reserved = blueprint.function(trig.function).reserved_concurrency
        assert reserved is not None
        assert trig.max_concurrency <= reserved
        assert trig.max_concurrency >= 2  # the SQS event source's minimum on AWS
