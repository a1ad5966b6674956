"""The smoke director's TOTP codes: RFC 6238 as Cognito checks them, never read at a step's end."""

from __future__ import annotations

import pytest

from tools.smoke_director import TOTP_MARGIN_S, DirectorSecret, SignInError, sign_in, totp_code

# RFC 6238's SHA-1 test key ("12345678901234567890") in base32, and its published 8-digit
# codes' last 6 digits at T=59 and T=1111111109.
RFC_SEED = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"


def test_codes_are_rfc_6238_sha1_six_digits() -> None:
    assert totp_code(RFC_SEED, clock=lambda: 59 - 30 + 10, sleep=_never) == "287082"
    assert totp_code(RFC_SEED, clock=lambda: 1111111109 - 25, sleep=_never) == "081804"


def test_a_code_read_in_the_last_seconds_of_its_step_waits_for_the_next() -> None:
    now = [29.0]  # one second left in the step
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    code = totp_code(RFC_SEED, clock=lambda: now[0], sleep=sleep)
    assert TOTP_MARGIN_S > 30 - 29.0  # the case under test
    assert slept and slept[0] >= 30 - 29.0
    assert code == totp_code(RFC_SEED, clock=lambda: 31.0, sleep=_never)


def test_no_seed_yet_says_to_enroll() -> None:
    d = DirectorSecret(username="u", password="p", userPoolId="pool", clientId="client")
    with pytest.raises(SignInError, match="enroll"):
        sign_in(object(), d)


def _never(_: float) -> None:
    raise AssertionError("should not wait")
