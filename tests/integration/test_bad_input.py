"""Bad input gets a clear 4xx JSON error and changes nothing."""

from __future__ import annotations

import pytest

from tests.integration.flows import event_ids, hold, runner

pytestmark = pytest.mark.integration

GOOD = runner("bad-input@example.com")


def _without(field: str) -> dict:
    return {k: v for k, v in GOOD.items() if k != field}


CASES = [
    ("missing email", _without("email"), 400, "email"),
    ("missing token", _without("paymentToken"), 400, "paymentToken"),
    ("bad email", {**GOOD, "email": "not-an-email"}, 400, "email"),
    ("email too long", {**GOOD, "email": "a" * 250 + "@example.com"}, 400, "email"),
    ("empty first name", {**GOOD, "firstName": "   "}, 400, "firstName"),
    ("oversized last name", {**GOOD, "lastName": "x" * 101}, 400, "lastName"),
    ("wrong type", {**GOOD, "firstName": 42}, 400, "firstName"),
    ("bad date", {**GOOD, "dateOfBirth": "1990-02-30"}, 400, "dateOfBirth"),
    ("date in another format", {**GOOD, "dateOfBirth": "10/12/1990"}, 400, "dateOfBirth"),
    ("future date", {**GOOD, "dateOfBirth": "2999-01-01"}, 400, "dateOfBirth"),
    ("too young", {**GOOD, "dateOfBirth": "2025-01-01"}, 400, "dateOfBirth"),
    ("unknown field", {**GOOD, "discount": "FREE"}, 400, "discount"),
    ("token with spaces", {**GOOD, "paymentToken": "tok visa"}, 400, "paymentToken"),
]


@pytest.fixture(scope="module")
def held(api_module, backend):
    race_id = backend.create_race([5])
    (event_id,) = event_ids(api_module, race_id)
    return race_id, event_id, hold(api_module, race_id, event_id).json()["holdId"]


@pytest.fixture(scope="module")
def api_module(stack):
    import requests

    s = requests.Session()
    orig = s.request
    s.request = lambda m, u, *a, **k: orig(m, stack.url + u, *a, timeout=30, **k)  # type: ignore[method-assign]
    return s


def _nothing_changed(backend, race_id: str, event_id: str, hold_id: str) -> None:
    hold_item = backend.holds().get(hold_id)
    assert hold_item["status"] == "HELD"
    assert "attempt" not in hold_item
    assert backend.inventory().usage(race_id, event_id, consistent=True).taken == 1
    assert backend.registrations().get("reg_" + hold_id.removeprefix("hold_")) is None


@pytest.mark.parametrize(("name", "body", "status", "field"), CASES, ids=[c[0] for c in CASES])
def test_bad_registration_bodies_are_rejected_with_the_field(api_module, backend, held, name, body, status, field):
    race_id, event_id, hold_id = held

    resp = api_module.post(f"/api/holds/{hold_id}/registration", json=body)

    assert resp.status_code == status, resp.text
    payload = resp.json()
    assert payload["error"] == "VALIDATION_ERROR"
    assert payload["message"]
    assert field in payload["fields"], payload
    _nothing_changed(backend, race_id, event_id, hold_id)


@pytest.mark.parametrize(
    ("data", "headers", "status", "code"),
    [
        ("{not json", {"Content-Type": "application/json"}, 400, "VALIDATION_ERROR"),
        ("[1, 2]", {"Content-Type": "application/json"}, 400, "VALIDATION_ERROR"),
        (
            "email=a@b.co",
            {"Content-Type": "application/x-www-form-urlencoded"},
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        ),
        ('{"email": "' + "x" * 20000 + '"}', {"Content-Type": "application/json"}, 413, "PAYLOAD_TOO_LARGE"),
        ("", {"Content-Type": "application/json"}, 400, "VALIDATION_ERROR"),
    ],
    ids=["malformed json", "json array", "wrong content type", "oversized", "empty body"],
)
def test_malformed_requests_are_rejected(api_module, backend, held, data, headers, status, code):
    race_id, event_id, hold_id = held

    resp = api_module.post(f"/api/holds/{hold_id}/registration", data=data, headers=headers)

    assert resp.status_code == status, resp.text
    assert resp.json()["error"] == code
    _nothing_changed(backend, race_id, event_id, hold_id)


def test_unknown_hold_is_404_and_writes_nothing(api_module):
    resp = api_module.post("/api/holds/hold_unknown/registration", json=GOOD)

    assert resp.status_code == 404
    assert resp.json()["error"] == "HOLD_NOT_FOUND"


def test_unknown_registration_is_404(api_module):
    for rid in ("reg_unknown", "nonsense"):
        resp = api_module.get(f"/api/registrations/{rid}")
        assert resp.status_code == 404
        assert resp.json()["error"] == "REGISTRATION_NOT_FOUND"


def test_an_unknown_test_token_is_declined_and_writes_nothing(api_module, backend, held):
    race_id, event_id, hold_id = held

    resp = api_module.post(f"/api/holds/{hold_id}/registration", json={**GOOD, "paymentToken": "tok_unknown"})

    assert resp.status_code == 402
    assert resp.json()["error"] == "PAYMENT_DECLINED"
    _nothing_changed(backend, race_id, event_id, hold_id)
