"""An event's ballot (issue 43): runners apply during a window, alone or as a group of up to the
event's team size, and a draw anyone can verify decides who gets a place; every other application
becomes the event's waitlist in drawn order (``racecap.waitlist`` makes its offers).

* ``draw`` — the draw itself, pure and stdlib only: the seed and its published commitment, the
  order (HMAC-SHA256 of each ticket's id under the seed), the winners (groups never split).
  ``tools/verify_draw.py`` re-computes the same from what the race page publishes.
* ``service`` — runners: apply behind the queue's protections, confirm by link, see, withdraw;
  the published draw and list. ``admin`` — the director's settings (fixed once the window opens)
  and figures. ``store`` — applications, claims, counters, the draw's pages.
* ``job`` — ``BallotDraw``'s batch job: order, line the runners up as the waitlist, tell each.

``docs/ballot.md`` says how each part works and what was measured.
"""
