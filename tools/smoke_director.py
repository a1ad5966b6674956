"""The smoke director's sign-in: SRP then TOTP, and the one-time ``enroll`` after a deploy.

The code is ``local.cognito``'s (the local stack signs its demo director in the same way, and
``local`` must not import ``tools``); ``tools.smoke`` and the tests take it from here.
"""

from __future__ import annotations

from local.cognito import (
    TOTP_MARGIN_S,
    TOTP_STEP_S,
    DirectorSecret,
    SignInError,
    _totp,
    enroll,
    sign_in,
    totp_code,
)

__all__ = ["TOTP_MARGIN_S", "TOTP_STEP_S", "DirectorSecret", "SignInError", "_totp", "enroll", "sign_in", "totp_code"]
