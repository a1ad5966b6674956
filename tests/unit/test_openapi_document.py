"""The committed OpenAPI document's promises, checked on the document itself (schemathesis
checks the served API against it in tests/integration/test_contract.py)."""

from __future__ import annotations

import json

import pytest

import blueprint
from tools.openapi import OUT

DOC = json.loads(OUT.read_text())
OPERATIONS = [(m.upper(), p, op) for p, ops in DOC["paths"].items() for m, op in ops.items()]
ERROR_REFS = {"#/components/schemas/Error", "#/components/schemas/GatewayError"}


def _refs(schema: dict) -> set[str]:
    return {schema["$ref"]} if "$ref" in schema else {r["$ref"] for r in schema.get("anyOf", [])}


@pytest.mark.parametrize(("method", "path", "op"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS])
def test_each_error_has_the_error_schema_and_each_success_its_model(method: str, path: str, op: dict) -> None:
    responses = op["responses"]
    assert "422" not in responses  # validation errors are 400
    assert any(code.startswith("2") for code in responses)
    for code, response in responses.items():
        content = response.get("content", {}).get("application/json", {})
        if code == "414":  # CloudFront's own page, before the API: HTML, not the Error shape
            assert set(response["content"]) == {"text/html"}
        elif int(code) >= 400:
            assert _refs(content["schema"]) <= ERROR_REFS and _refs(content["schema"]), code
        elif code == "204":
            assert "content" not in response
        else:
            assert not _refs(content.get("schema", {})) & ERROR_REFS, code
    assert {"429", "500", "413", "414", "415"} <= responses.keys()
    assert responses["429"]["headers"]["Retry-After"]["schema"]["type"] == "integer"
    if any("director" in requirement for requirement in op.get("security", [])):
        # The director's bearer token is API Gateway's JWT authorizer's to refuse first.
        assert _refs(responses["401"]["content"]["application/json"]["schema"]) >= {"#/components/schemas/GatewayError"}
    elif op.get("security"):
        # The runner's tokens are Racecap's alone to check: its own Error shape.
        assert _refs(responses["401"]["content"]["application/json"]["schema"]) == {"#/components/schemas/Error"}
    if "{" in path:
        assert "404" in responses
    if op.get("requestBody") or any(p["in"] == "query" for p in op.get("parameters", [])):
        assert "fields" in DOC["components"]["schemas"]["Error"]["properties"]
        assert "400" in responses


def test_the_document_lists_every_routed_operation_and_no_other() -> None:
    documented = {(m, p) for m, p, _ in OPERATIONS}
    hidden = {
        ("GET", "/api/docs"),
        ("GET", "/api/docs/{asset}"),
        ("GET", "/api/openapi.json"),
        ("ANY", "/api/{proxy+}"),
    }
    assert documented == {(r.method, r.path) for r in blueprint.ROUTES} - hidden


def _body_models() -> dict[str, type]:
    from pydantic import BaseModel
    from racecap.ballot import models as ballot_models
    from racecap.codes import models as code_models
    from racecap.fairness import queue
    from racecap.holds import models as hold_models
    from racecap.ledger import models as ledger_models
    from racecap.questions import models as question_models
    from racecap.registration import models as registration_models
    from racecap.registration import own_models
    from racecap.results import models
    from racecap.setup import models as setup_models
    from racecap.waitlist import models as waitlist_models

    return {
        name: obj
        for module in (
            setup_models,
            queue,
            registration_models,
            own_models,
            models,
            ledger_models,
            question_models,
            code_models,
            hold_models,
            waitlist_models,
            ballot_models,
        )
        for name, obj in vars(module).items()
        if isinstance(obj, type) and issubclass(obj, BaseModel)
    }


def _body_schema_names() -> set[str]:
    names: set[str] = set()
    for _, _, op in OPERATIONS:
        schema = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
        refs = [schema.get("$ref", "")] + [s.get("$ref", "") for s in schema.get("anyOf", [])]
        names |= {ref.rsplit("/", 1)[1] for ref in refs if ref}
    return names


BODIES = sorted(_body_schema_names())


@pytest.mark.parametrize("name", BODIES)
def test_request_bodies_take_json_types_as_documented_not_pydantics_lax_ones(name: str) -> None:
    """An integer field refuses `true` and "5"; a boolean field refuses 1 and "true"
    (pydantic's lax mode would take them, and the document would then lie: schemathesis ST201)."""
    from pydantic import ValidationError

    model = _body_models()[name]
    schema = DOC["components"]["schemas"][name]
    props = dict(schema.get("properties", {}))
    for shape in schema.get("oneOf", []):  # a body of one of several shapes (CancelRequest)
        props |= shape.get("properties", {})
    checked = 0
    for field, prop in props.items():
        types = {prop.get("type")} | {s.get("type") for s in prop.get("anyOf", [])}
        wrong = [True, "5"] if "integer" in types else [1, "true"] if "boolean" in types else []
        for value in wrong:
            with pytest.raises(ValidationError) as caught:
                model.model_validate({field: value})
            assert any(e["loc"][:1] == (field,) for e in caught.value.errors()), (field, value)
            checked += 1
    assert checked or not any(p.get("type") in ("integer", "boolean") for p in props.values())


def test_bounds_are_written_as_json_schema_keywords_a_client_reads() -> None:
    """pydantic writes bounds it applied after a validator as raw "ge"/"le" keys: clients and
    fuzzers ignore those, so the document would hide every bound on those fields."""

    def walk(node: object, where: str) -> list[str]:
        if isinstance(node, dict):
            raw = [f"{where}.{k}" for k in ("ge", "gt", "le", "lt") if k in node and "type" in node]
            return raw + [bad for k, v in node.items() for bad in walk(v, f"{where}.{k}")]
        if isinstance(node, list):
            return [bad for i, v in enumerate(node) for bad in walk(v, f"{where}[{i}]")]
        return []

    assert walk(DOC, "doc") == []


def test_every_token_a_runner_sends_is_a_security_scheme_on_the_operations_that_read_it():
    schemes = DOC["components"]["securitySchemes"]
    assert {n: (s["type"], s["in"], s["name"]) for n, s in schemes.items() if n != "director"} == {
        "device": ("apiKey", "header", "X-Racecap-Device"),
        "queue": ("apiKey", "header", "X-Racecap-Queue"),
        "admission": ("apiKey", "header", "X-Racecap-Admission"),
        "registration": ("apiKey", "header", "X-Racecap-Registration"),
        "waitlist": ("apiKey", "header", "X-Racecap-Waitlist"),
        "ballot": ("apiKey", "header", "X-Racecap-Ballot"),
    }
    for scheme in (
        "device",
        "queue",
        "admission",
        "registration",
        "waitlist",
        "ballot",
    ):  # what missing, expired and foreign mean
        assert all(word in schemes[scheme]["description"] for word in ("Missing", "Expired", "INVALID_TOKEN"))

    def reads(method: str, path: str) -> set[str]:
        return {name for requirement in DOC["paths"][path][method]["security"] for name in requirement}

    assert reads("post", "/api/races/{raceId}/events/{eventId}/holds") == {"device", "admission"}
    assert {} in DOC["paths"]["/api/races/{raceId}/events/{eventId}/holds"]["post"]["security"]  # a device is optional
    assert reads("post", "/api/races/{raceId}/queue/challenge") == {"device"}
    assert reads("post", "/api/races/{raceId}/queue") == {"device"}
    assert reads("get", "/api/races/{raceId}/queue") == {"device", "queue"}
    assert "409" not in DOC["paths"]["/api/races/{raceId}/queue"]["post"]["responses"]  # no director's conflict
    assert reads("post", "/api/races/{raceId}/events/{eventId}/waitlist") == {"device"}
    for method in ("get", "delete"):  # a waitlist entry: only its link's token opens it
        assert reads(method, "/api/waitlist/me") == {"waitlist"}
        assert "401" in DOC["paths"]["/api/waitlist/me"][method]["responses"]
    assert reads("post", "/api/races/{raceId}/events/{eventId}/ballot") == {"device"}
    for method in ("get", "delete"):  # a ballot application: only its link's token opens it
        assert reads(method, "/api/ballot/me") == {"ballot"}
        assert "401" in DOC["paths"]["/api/ballot/me"][method]["responses"]
    # A runner's own entry: only its link's token opens it (the registration id alone is no credential).
    for method, path in (("get", ""), ("get", "/cancellation"), ("post", "/cancellation")):
        assert reads(method, f"/api/my/registration{path}") == {"registration"}
        assert "401" in DOC["paths"][f"/api/my/registration{path}"][method]["responses"]
