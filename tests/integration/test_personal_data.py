"""Personal data stays out of the logs: after runners register (and one sends a bad form),
no line of any log the local stack wrote names a runner's email, name or date of birth."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.flows import event_ids, hold, hold_and_register, register, wait_confirmed, wait_for_audit

pytestmark = pytest.mark.integration


def test_no_log_line_names_a_runner(api, backend, stack) -> None:
    race_id = backend.create_race([10])
    (event_id,) = event_ids(api, race_id)
    tag = uuid.uuid4().hex[:8]
    runners = [
        {
            "email": f"Private.Person{i}.{tag}@Example.com",
            "firstName": f"Zephyrine{i}{tag}",
            "lastName": f"Quillfeather{i}{tag}",
            "dateOfBirth": f"19{70 + i}-0{i + 1}-1{i}",
            "paymentMethod": "pm_card_visa",
        }
        for i in range(3)
    ]
    ids = [hold_and_register(api, race_id, event_id, r)[1] for r in runners]
    # A form the server refuses, a declined card and an email already used: the paths
    # that log warnings and errors see personal data too.
    bad = {**runners[0], "dateOfBirth": "2999-01-01"}
    assert register(api, hold(api, race_id, event_id).json()["holdId"], bad).status_code == 400
    declined = {**runners[1], "email": f"declined.{tag}@example.com", "paymentMethod": "pm_card_chargeDeclined"}
    assert register(api, hold(api, race_id, event_id).json()["holdId"], declined).status_code == 402
    assert register(api, hold(api, race_id, event_id).json()["holdId"], runners[2]).status_code == 409
    wait_confirmed(api, ids)
    assert wait_for_audit(stack, backend, race_id).ok  # the confirmation emails went out

    # Every email and name above carries the tag; the dates of birth are looked for as such.
    secrets = {tag} | {r["dateOfBirth"] for r in runners}
    logs = sorted(stack.log_dir.glob("**/*.log"))
    assert logs, stack.log_dir
    found = [
        f"{path.name}: {line[:200]}"
        for path in logs
        for line in path.read_text(errors="replace").splitlines()
        if any(s in line.lower() for s in secrets)
    ]
    assert found == []
