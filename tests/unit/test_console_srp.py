"""The console's SRP proof (site/admin/src/srp.js) is pycognito's, for fixed inputs.

moto's cognito-idp accepts any PASSWORD_CLAIM_SIGNATURE, so a console whose SRP arithmetic
drifted would sign in locally and be refused on AWS; this pins the JavaScript against the
Python implementation the smoke test signs in with (pycognito, as amazon-cognito-identity-js).
The module runs in the Node 22 the installer puts in .cache/node22 (no sockets)."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
from pathlib import Path

import pytest
from pycognito.aws_srp import AWSSRP

import blueprint

SRP_JS = blueprint.ROOT / "site" / "admin" / "src" / "srp.js"
NODE = Path(os.environ.get("RACECAP_NODE") or blueprint.ROOT / ".cache/node22/node_modules/node/bin/node")

# Fixed inputs: two private values, two server values (one whose hex starts with a digit >= 8,
# so the sign-byte padding is exercised), a base64 secret block and moto's UUID one.
CASES = [
    {
        "smallA": 0x5A17C0FFEE * 2**900 + 12345,
        "poolId": "eu-west-1_AbCdEf123",
        "userIdForSrp": "4f0c1d2e-aaaa-bbbb-cccc-1234567890ab",
        "password": "Correct-horse-7!",
        "saltHex": "8f3a0c9e1b2d4f6a8c0e1a3b5d7f9a1c",
        "srpBHex": "9" + "b1" * 380 + "7",
        "secretBlock": "c2VjcmV0LWJsb2NrLWZyb20tY29nbml0by0xMjM0NTY3ODkw",
        "when": datetime.datetime(2026, 11, 3, 9, 4, 5),
    },
    {
        "smallA": 2**1023 - 3,
        "poolId": "us-east-1_9xYz",
        "userIdForSrp": "director@racecap.example",
        "password": "Zz9!unicodé-pässwörd",
        "saltHex": "0d5e",
        "srpBHex": "4c7a2e0f53c84c1aa1b0e6c4d1f0e9b2",
        "secretBlock": "0b6f5f2c-7d0e-4a7e-9a55-0f8d2a3c4b5e",
        "when": datetime.datetime(2026, 1, 31, 23, 59, 59),
    },
]


def _pycognito(case: dict) -> dict[str, str]:
    srp = AWSSRP(username="ignored", password=case["password"], pool_id=case["poolId"], client_id="c", client=object())
    srp.small_a_value = case["smallA"]
    srp.large_a_value = srp.calculate_a()
    timestamp = AWSSRP.get_cognito_formatted_timestamp(case["when"])
    hkdf = srp.get_password_authentication_key(
        case["userIdForSrp"], case["password"], int(case["srpBHex"], 16), case["saltHex"]
    )
    import base64
    import hashlib
    import hmac

    msg = (
        case["poolId"].split("_")[1].encode()
        + case["userIdForSrp"].encode()
        + base64.standard_b64decode(case["secretBlock"])
        + timestamp.encode()
    )
    signature = base64.standard_b64encode(hmac.new(hkdf, msg, hashlib.sha256).digest()).decode()
    return {"srpA": f"{srp.large_a_value:x}", "timestamp": timestamp, "signature": signature}


def _console(case: dict) -> dict[str, str]:
    if not NODE.exists():
        pytest.fail(f"Node 22 is not installed at {NODE}: run `local/install.sh node`")
    args = {k: v for k, v in case.items() if k not in ("smallA", "when")}
    script = f"""
        import {{ srpA, passwordClaimSignature, cognitoTimestamp }} from {json.dumps(SRP_JS.as_uri())};
        const args = {json.dumps(args)};
        const smallA = BigInt('0x{case["smallA"]:x}');
        const timestamp = cognitoTimestamp(new Date(Date.UTC({case["when"].year}, {case["when"].month - 1},
            {case["when"].day}, {case["when"].hour}, {case["when"].minute}, {case["when"].second})));
        const signature = await passwordClaimSignature({{ ...args, timestamp, smallA }});
        console.log(JSON.stringify({{ srpA: srpA(smallA), timestamp, signature }}));
    """
    proc = subprocess.run(
        [str(NODE), "--input-type=module", "-e", script], capture_output=True, text=True, check=False, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("case", CASES, ids=["base64-block", "moto-uuid-block"])
def test_console_srp_proof_matches_pycognito(case: dict) -> None:
    assert _console(case) == _pycognito(case)


def test_a_changed_password_changes_the_proof() -> None:
    # The comparison above could pass with a proof that ignores its inputs; it must not.
    changed = {**CASES[0], "password": CASES[0]["password"] + "x"}
    assert _console(changed)["signature"] != _pycognito(CASES[0])["signature"]
