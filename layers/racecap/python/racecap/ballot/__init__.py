"""An event's ballot (issue 43): runners apply during a window, alone or as a group of up to the
event's team size, and a draw anyone can verify decides who gets a place; every other application
becomes the event's waitlist in drawn order (``racecap.waitlist`` makes its offers).

* ``draw`` — the draw itself, pure and stdlib only: the seed and its published commitment, the
  order (HMAC-SHA256 of each ticket's id under the seed), the winners (groups never split).
  ``tools/verify_draw.py`` re-computes the same from what the race page publishes.

Applying, the batch job that reads a million applications and the offers come in later slices
(``docs/ballot.md`` states the plan).
"""
