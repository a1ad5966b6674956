"""A fair, bot-proof opening: who a client is, what one client may do, and the waiting room.

* ``identity``  — who is calling: address, device token, admission token (defined once).
* ``tokens``    — the signed tokens those identities travel in (HMAC, key from the secret store).
* ``buckets``   — per-address token-bucket rate limits on the runner API (Redis, fails open).
* ``limits``    — how many places one device / one address may hold at once.
* ``lottery``   — the pre-opening draw: a keyed permutation, no per-runner state.
* ``work``      — proof-of-work challenges, single use and bound to a device.
* ``queue``     — the opening queue: entry, position, estimate, admission, pause/resume.
* ``store``     — the queue's durable state in DynamoDB (Redis only caches it).
"""
