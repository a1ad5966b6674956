"""Proof-of-work: the price of a queue position, paid by the device that asks for it.

The server issues a signed challenge bound to one race and one device, with a difficulty
``k`` and a five-minute expiry. The page finds a ``nonce`` (a decimal string) such that
``SHA-256(challenge + ":" + nonce)`` starts with ``k`` zero bits — about 2^k hashes, ~1 s
on a phone at the default — in a Web Worker. Checking costs the server one hash. A
challenge is usable once (``store`` records its id with a conditional write when it is
spent), so a bot pays for every position it takes. No third-party service is involved.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any

from racecap.errors import DomainError
from racecap.fairness.tokens import InvalidToken, Signer, TokenExpired, TokenNotYours

CHALLENGE_TTL_S = 300
MAX_DIFFICULTY = 32


class ProofRefused(DomainError):
    code, status = "PROOF_OF_WORK_REFUSED", 403


def leading_zero_bits(digest: bytes) -> int:
    bits = 0
    for byte in digest:
        if byte == 0:
            bits += 8
            continue
        return bits + 8 - byte.bit_length()
    return bits


def issue(signer: Signer, race_id: str, device_id: str, difficulty: int, now: float | None = None) -> dict[str, Any]:
    now = now if now is not None else time.time()
    claims = {
        "r": race_id,
        "d": device_id,
        "c": secrets.token_urlsafe(12),
        "k": difficulty,
        "exp": int(now + CHALLENGE_TTL_S),
    }
    return {"challenge": signer.sign("pow", claims), "difficulty": difficulty, "expiresInSeconds": CHALLENGE_TTL_S}


def check(signer: Signer, race_id: str, device_id: str, challenge: str | None, nonce: str | None) -> str:
    """The challenge's id if the proof is right; ``ProofRefused`` (403) with the reason if not."""
    if not challenge or not nonce:
        raise ProofRefused("Joining the queue needs a solved proof-of-work challenge (POST …/queue/challenge first).")
    try:
        claims = signer.verify("pow", challenge)
    except (InvalidToken, TokenExpired) as exc:
        raise ProofRefused(f"{exc.message} Ask for a new challenge.") from exc
    if claims.get("r") != race_id or claims.get("d") != device_id:
        raise TokenNotYours("This challenge was issued to another device or for another race.")
    if len(nonce) > 32 or not nonce.isdigit():
        raise ProofRefused("The proof's nonce must be a decimal number.")
    digest = hashlib.sha256(f"{challenge}:{nonce}".encode()).digest()
    if leading_zero_bits(digest) < int(claims["k"]):
        raise ProofRefused("The proof-of-work is wrong: the hash does not have enough leading zero bits.")
    return str(claims["c"])


def solve(challenge: str, difficulty: int) -> str:
    """What the page does (tests and load generators use it): the first nonce that works."""
    n = 0
    prefix = f"{challenge}:".encode()
    while True:
        if leading_zero_bits(hashlib.sha256(prefix + str(n).encode()).digest()) >= difficulty:
            return str(n)
        n += 1
