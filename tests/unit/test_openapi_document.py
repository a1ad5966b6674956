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
    if op.get("security"):
        assert _refs(responses["401"]["content"]["application/json"]["schema"]) >= {"#/components/schemas/GatewayError"}
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
