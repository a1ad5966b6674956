"""The pre-opening draw: a keyed pseudo-random permutation of arrival numbers.

Everyone who enters the queue before the opening gets an arrival number 1..P. At the
opening a random ``seed`` is drawn (and stored durably, with P); the admission order of
arrival ``a`` is ``draw(seed, P, a)``, a bijection of 1..P. So:

* nothing per runner is written or read to draw the lottery — a poll computes its own
  place from its token's arrival number and the shared (seed, P);
* arriving earlier, or hammering the page before the opening, buys nothing: the seed did
  not exist until the opening;
* later arrivals (a > P) are served first in, first out, after the pool.

The permutation is a balanced Feistel network over the next even power of two, with
cycle walking to stay inside 1..P (expected fewer than four steps).
"""

from __future__ import annotations

import hashlib
import hmac

ROUNDS = 8


def _round(seed: bytes, r: int, half: int, bits: int) -> int:
    digest = hmac.new(seed, r.to_bytes(1, "big") + half.to_bytes(8, "big"), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << bits) - 1)


def _feistel(seed: bytes, x: int, half_bits: int) -> int:
    mask = (1 << half_bits) - 1
    left, right = x >> half_bits, x & mask
    for r in range(ROUNDS):
        left, right = right, left ^ _round(seed, r, right, half_bits)
    return (left << half_bits) | right


def draw(seed: bytes, pool: int, arrival: int) -> int:
    """The admission number (1..pool) of pre-opening arrival ``arrival`` (1..pool)."""
    if not 1 <= arrival <= pool:
        raise ValueError("arrival must be within the pool")
    half_bits = max(1, ((pool - 1).bit_length() + 1) // 2)
    x = arrival - 1
    while True:
        x = _feistel(seed, x, half_bits)
        if x < pool:
            return x + 1


def admission_number(seed: bytes | None, pool: int | None, arrival: int) -> int | None:
    """Where arrival ``arrival`` is served: drawn within the pool, FIFO after it; None before the draw."""
    if pool is None or seed is None:
        return None
    return draw(seed, pool, arrival) if arrival <= pool else arrival
