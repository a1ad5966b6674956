"""Generate the one OpenAPI document from the API functions' own routes and models.

    python -m tools.openapi           # write functions/public_api/openapi.json
    python -m tools.openapi --check   # fail if the committed document is stale (CI)

Each API function has its own Powertools resolver; Powertools' OpenAPIMerge joins them.
The document is committed and served by PublicApi at /api/openapi.json and /api/docs.

Powertools documents every declared status with the route's *success* model and adds a
422 that Racecap never answers (validation errors are 400). ``tell_the_truth`` rewrites
the responses so the document says what a client really gets:

* success codes keep the route's model; a route that declared only its errors gets its
  200 back; a 204 has no body;
* every error status carries the shared ``Error`` schema (``fields`` on validation);
* the statuses every operation of a kind can answer are added where they apply, with
  what answers them: 400 (query or body fields), 404 (path ids), 401 (API Gateway's JWT
  authorizer, in *its* shape), 409 (a director's change racing another), 413/415 (a body
  too large or not JSON), 414 (CloudFront's page for a URL over 8,192 bytes), 429
  (Racecap's back-off with ``Retry-After``, or API Gateway's throttling, which sends
  none), and 500/503 (an unexpected error, or API Gateway's own when a function fails or
  times out).
  API Gateway's answers are ``{"message": ...}`` (``GatewayError``): an HTTP API cannot
  reshape them, so the document shows both shapes where both can occur.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import blueprint
from local.runtime import FunctionHost

OUT = blueprint.ROOT / "functions" / "public_api" / "openapi.json"
DESCRIPTION = (
    'Burst-proof race registration. Errors are always `{"error": CODE, "message": sentence}` '
    "(plus `fields` on VALIDATION_ERROR). Places left on race pages are cached for ~2 s."
)


def api_functions() -> list[str]:
    return sorted({r.function for r in blueprint.ROUTES})


def build() -> str:
    from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge
    from aws_lambda_powertools.event_handler.openapi.models import Server

    from local.stack import LocalStack

    # Handlers validate their environment at import; any well-formed values will do here.
    os.environ.update(LocalStack(Path("/nonexistent")).function_env())
    host = FunctionHost()
    merge = OpenAPIMerge(
        title="Racecap API",
        version="1.0.0",
        description=DESCRIPTION,
        servers=[Server(url="/")],
        security_schemes=_security_schemes(),
        on_conflict="error",
    )
    for fn in api_functions():
        module = host.module(fn)
        if hasattr(module, "routers"):  # routers loaded on first use (racecap.api.lazy): all of them
            module.routers.everything()
        app = module.app
        for route in app._static_routes + app._dynamic_routes:
            _declare_success(route)
        schema = app.get_openapi_schema(title="Racecap API", version="1.0.0", security_schemes=_security_schemes())
        merge.add_schema(schema)
    doc = tell_the_truth(json.loads(merge.get_openapi_json_schema()))
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _declare_success(route: Any) -> None:
    """A route that answers 201/202/204 but did not say so would be documented as 200:
    read the status it returns from its code and declare it."""
    declared = route.responses or {}
    if any(200 <= int(code) < 300 for code in declared):
        return
    found = re.findall(r"(?:Response|_json)\(\s*(20\d)\b", inspect.getsource(route.func))
    if len(set(found)) == 1 and found[0] != "200":
        route.responses = {int(found[0]): {"description": "Created" if found[0] == "201" else "OK"}, **declared}


ERROR = "#/components/schemas/Error"
GATEWAY_ERROR = "#/components/schemas/GatewayError"
SCHEMAS = {
    "Error": {
        "title": "Error",
        "description": "Every error Racecap answers itself.",
        "type": "object",
        "required": ["error", "message"],
        "properties": {
            "error": {"type": "string", "description": "A stable code, e.g. SOLD_OUT or VALIDATION_ERROR."},
            "message": {"type": "string", "description": "A sentence for a person."},
            "fields": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "VALIDATION_ERROR only: what is wrong with each field.",
            },
        },
    },
    "GatewayError": {
        "title": "GatewayError",
        "description": "What API Gateway answers itself (authorizer, throttling, size limit, a failed function).",
        "type": "object",
        "required": ["message"],
        "properties": {"message": {"type": "string", "examples": ["Unauthorized", "Too Many Requests"]}},
    },
}
RETRY_AFTER = {
    "description": "Seconds to wait before retrying (Racecap's back-off; API Gateway's throttling sends none).",
    "schema": {"type": "integer", "minimum": 0},
}
# status -> (description, who can answer it: "racecap", "gateway" or both)
GENERIC: dict[int, tuple[str, tuple[str, ...]]] = {
    400: ("VALIDATION_ERROR: some fields are missing or invalid (`fields` says which)", ("racecap",)),
    401: ("Missing, expired or invalid bearer token (API Gateway's JWT authorizer)", ("gateway", "racecap")),
    404: ("NOT_FOUND: no such resource", ("racecap",)),
    409: ("CONFLICT: the race was changed meanwhile; reload it and retry", ("racecap",)),
    413: ("PAYLOAD_TOO_LARGE (over 16 KB), or API Gateway's limit (10 MB)", ("racecap", "gateway")),
    414: ("CloudFront's HTML page for a URL over 8,192 bytes (not JSON)", ("cloudfront",)),
    415: ("UNSUPPORTED_MEDIA_TYPE: a body that is not application/json", ("racecap",)),
    429: ("Too many requests: retry after `Retry-After` seconds, or back off if none", ("racecap", "gateway")),
    500: ("INTERNAL_ERROR, or API Gateway's answer when a function fails", ("racecap", "gateway")),
    503: (
        "SERVICE_UNAVAILABLE: a service behind the API did not answer or kept throttling through the "
        "SDK's retries; retry after `Retry-After` seconds. Or API Gateway's answer when a function times out",
        ("racecap", "gateway"),
    ),
}


def _error_content(answered_by: tuple[str, ...]) -> dict:
    if answered_by == ("cloudfront",):  # CloudFront's own error page, before the API
        return {"text/html": {"schema": {"type": "string"}}}
    refs = [{"$ref": ERROR if who == "racecap" else GATEWAY_ERROR} for who in answered_by]
    schema = refs[0] if len(refs) == 1 else {"anyOf": refs}
    return {"application/json": {"schema": schema}}


# Where the ids a call needs come from (OpenAPI links: clients, and schemathesis's stateful
# phase, follow them): (method, path, status) -> {parameter: where in that response}.
_RACE_AND_EVENT = {"raceId": "$response.body#/raceId", "eventId": "$response.body#/events/0/eventId"}
LINK_SOURCES: dict[tuple[str, str, str], dict[str, str]] = {
    ("get", "/api/races", "200"): {"raceId": "$response.body#/races/0/raceId"},
    ("get", "/api/races/{raceId}", "200"): _RACE_AND_EVENT,
    ("post", "/api/admin/races", "201"): _RACE_AND_EVENT,
    ("get", "/api/admin/races", "200"): {"raceId": "$response.body#/races/0/raceId"},
}


def _link(doc: dict) -> None:
    """Link each source response to every operation whose path ids it can all supply."""
    targets = [
        (path, op, set(re.findall(r"\{(\w+)\}", path)))
        for path, operations in doc["paths"].items()
        for op in operations.values()
    ]
    for (method, path, status), supplies in LINK_SOURCES.items():
        response = doc["paths"][path][method]["responses"][status]
        base = path.split("{")[0].rstrip("/")
        for target_path, target, needs in targets:
            if not needs or not needs <= supplies.keys() or not target_path.startswith(base):
                continue
            params = {name: supplies[name] for name in sorted(needs)}
            response.setdefault("links", {})[target["operationId"]] = {
                "operationId": target["operationId"],
                "parameters": params,
            }


def tell_the_truth(doc: dict) -> dict:
    for operations in doc.get("paths", {}).values():
        for method, op in operations.items():
            _truthful_responses(method, op)
    _link(doc)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(unused, None)
    schemas.update(SCHEMAS)
    return doc


def _truthful_responses(method: str, op: dict) -> None:
    declared: dict[str, dict] = op.get("responses", {})
    declared.pop("422", None)
    success = {code: r for code, r in declared.items() if code.startswith("2")}
    if not success:
        # Declaring only errors made Powertools drop the 200; its model sits on the errors.
        model = next((r["content"] for r in declared.values() if r.get("content")), None)
        success["200"] = {"description": "OK", **({"content": model} if model else {})}
    for code, response in success.items():
        if code == "204":
            response.pop("content", None)
    errors = {code: r for code, r in declared.items() if not code.startswith("2")}
    params = {p["in"] for p in op.get("parameters", [])}
    # Only the director's bearer token passes API Gateway's JWT authorizer; the runner's
    # fairness tokens (API keys) are checked by Racecap alone.
    director = any("director" in requirement for requirement in op.get("security", []))
    applies = {
        # A typed path segment (a bib, a version number) is validated too: "abc" is a 400.
        400: "query" in params
        or "requestBody" in op
        or any(
            p["in"] == "path" and p.get("schema", {}).get("type") in ("integer", "number")
            for p in op.get("parameters", [])
        ),
        401: bool(op.get("security")),
        404: "path" in params,
        # A director's change is one conditional transaction: another change landing
        # first (two tabs, a retry) makes it a Conflict.
        409: director and method != "get",
    }
    added: set[str] = set()
    for status, (generic, answered_by) in GENERIC.items():
        if not applies.get(status, True):
            continue
        added.add(str(status))
        mine = errors.get(str(status))
        description = generic
        if mine is not None and mine.get("description") and status not in (413, 429, 500):
            description = mine["description"]  # the route says which codes, e.g. RACE_NOT_FOUND
        elif mine is not None and mine.get("description"):
            description = f"{mine['description']}; or {generic[0].lower()}{generic[1:]}"
        who = answered_by
        if status == 401 and not director:
            who = ("racecap",)
            if mine is None:
                description = "INVALID_TOKEN or TOKEN_EXPIRED: a token this call reads (see its security schemes)"
        errors[str(status)] = {"description": description, "content": _error_content(who)}
        if status in (429, 503):
            errors[str(status)]["headers"] = {"Retry-After": RETRY_AFTER}
    for code, response in errors.items():
        if code not in added:  # a status only this route answers: Racecap's own
            response["content"] = _error_content(("racecap",))
    op["responses"] = dict(sorted({**success, **errors}.items()))
    for response in op["responses"].values():
        for header in response.get("headers", {}).values():
            header.setdefault("schema", {"type": "integer", "minimum": 0})  # Retry-After: seconds


def _security_schemes() -> dict:
    from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn, HTTPBearer
    from racecap.fairness.identity import TOKEN_SCHEMES

    # Cognito on AWS, the local issuer on the local stack: both are bearer JWTs.
    schemes: dict = {"director": HTTPBearer(scheme="bearer", bearerFormat="JWT")}
    # The runner's fairness tokens: each an API key in its own header.
    for name, (header, description) in TOKEN_SCHEMES.items():
        schemes[name] = APIKey.model_validate({"in": APIKeyIn.header, "name": header, "description": description})
    return schemes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    doc = build()
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != doc:
            diff = difflib.unified_diff(current.splitlines(), doc.splitlines(), "committed", "generated", lineterm="")
            print("\n".join(list(diff)[:60]))
            sys.exit("openapi.json is stale: run `make openapi` and commit it")
        print("openapi.json is up to date")
        return
    OUT.write_text(doc)
    print(f"wrote {OUT.relative_to(blueprint.ROOT)}")


if __name__ == "__main__":
    main()
