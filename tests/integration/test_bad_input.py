"""Bad input gets a clear 4xx JSON error and changes nothing."""

from __future__ import annotations

import json

import pytest

from tests.integration.flows import event_ids, hold, intents_for, runner

pytestmark = pytest.mark.integration

GOOD = runner("bad-input@example.com")


def _without(field: str) -> dict:
    return {k: v for k, v in GOOD.items() if k != field}


CASES = [
    ("missing email", _without("email"), 400, "email"),
    ("missing last name", _without("lastName"), 400, "lastName"),
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
    ("payment method with spaces", {**GOOD, "paymentMethod": "pm card visa"}, 400, "paymentMethod"),
    ("a card number is not a payment method", {**GOOD, "paymentMethod": "4242424242424242"}, 400, "paymentMethod"),
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
        (json.dumps([GOOD, 1]), {"Content-Type": "application/json"}, 400, "VALIDATION_ERROR"),
        (
            "email=a@b.co",
            {"Content-Type": "application/x-www-form-urlencoded"},
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        ),
        ('{"email": "' + "x" * 20000 + '"}', {"Content-Type": "application/json"}, 413, "PAYLOAD_TOO_LARGE"),
        ("", {"Content-Type": "application/json"}, 400, "VALIDATION_ERROR"),
        (b"\xff\x1f{}", {"Content-Type": "application/json"}, 400, "VALIDATION_ERROR"),
        (b'{"email": "\xe9"}', {"Content-Type": "application/json; charset=utf-8"}, 400, "VALIDATION_ERROR"),
        (b"\x89PNG\r\n\x1a\n\x00", {"Content-Type": "image/png"}, 415, "UNSUPPORTED_MEDIA_TYPE"),
        (b"\xff\xfe", {}, 415, "UNSUPPORTED_MEDIA_TYPE"),
    ],
    ids=[
        "malformed json",
        "json array",
        "json array led by a valid body",
        "wrong content type",
        "oversized",
        "empty body",
        "not utf-8",
        "latin-1 in json",
        "binary",
        "no content type",
    ],
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


def test_an_unknown_payment_method_is_declined_and_charges_nothing(api_module, backend, held, stack):
    _, _, hold_id = held

    resp = api_module.post(f"/api/holds/{hold_id}/registration", json={**GOOD, "paymentMethod": "pm_unknown"})

    assert resp.status_code == 402
    assert resp.json()["error"] == "PAYMENT_DECLINED"
    # The place stays held (the runner may try another card on the same intent); nothing charged.
    hold = backend.holds().get(hold_id)
    assert hold is not None and hold.status == "PAYING"
    assert [i["status"] for i in intents_for(stack, hold_id=hold_id)] == ["requires_payment_method"]


def test_director_bodies_that_are_not_utf8_are_400_and_change_nothing(director) -> None:
    # API Gateway hands such a body on base64-encoded (isBase64Encoded); it used to end
    # in the local gateway's own 500.
    from .admin import race_body

    ann = director("bad-bytes")
    created = ann.post("/api/admin/races", json=race_body())
    assert created.status_code == 201, created.text
    race = created.json()
    event_id = race["events"][0]["eventId"]
    bad = {"data": b'{"name": "\xff\x1f"}', "headers": {"Content-Type": "application/json"}}
    for method, path in [
        ("POST", "/api/admin/races"),
        ("PATCH", f"/api/admin/races/{race['raceId']}"),
        ("PATCH", f"/api/admin/races/{race['raceId']}/events/{event_id}"),
        ("POST", f"/api/admin/races/{race['raceId']}/events"),
    ]:
        resp = ann.request(method, path, **bad)
        assert resp.status_code == 400, (method, path, resp.text)
        assert resp.json()["error"] == "VALIDATION_ERROR"
        assert resp.json()["fields"] == {"body": "Not UTF-8 text."}
    after = ann.get(f"/api/admin/races/{race['raceId']}").json()
    assert (after["version"], len(after["events"])) == (race["version"], 1)
    assert len(ann.get("/api/admin/races").json()["races"]) == 1


def test_long_urls_reach_the_handler_up_to_cloudfronts_limit_and_get_its_414_beyond(director) -> None:
    # schemathesis found a 4.8 KB query answered by gunicorn's own HTML 414 (its 4 KB
    # request-line limit), which no client of the real stack would ever see.
    ann = director("long-urls")
    race_id = ann.create_race((5,))["raceId"]
    cursor = "\U000ded84" * 401  # 401 four-byte characters: over the documented maxLength
    resp = ann.get(f"/api/admin/races/{race_id}/audit", params={"cursor": cursor, "limit": 193})
    assert len(resp.request.url) > 4096
    assert resp.status_code == 400 and resp.json()["error"] == "VALIDATION_ERROR", resp.text
    assert "cursor" in resp.json()["fields"]

    resp = ann.get(f"/api/admin/races/{race_id}/audit", params={"cursor": "x" * 9000})
    assert resp.status_code == 414 and resp.headers["Content-Type"].startswith("text/html")
    assert ann.get(f"/api/admin/races/{race_id}/audit").json()["entries"] is not None
