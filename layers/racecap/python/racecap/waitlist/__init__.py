"""An event's waitlist (issue 40): once an event is sold out, runners join a line for the places
that free up, confirm their address by a signed link, see their place and may leave; the director
switches it on per event, caps its length, sees it and removes someone.

* ``models`` — the entry as stored, the API's shapes, the line's counters.
* ``rules``  — the place in line (``seq - head``) and the entry's lifetime, pure.
* ``store``  — the entries and the per-event counters in the Inventory table.
* ``service`` — the runners' side: join (behind the opening queue's device, network and
  proof-of-work protections), confirm, my place, leave.
* ``admin``  — the director's side: the list with places and states, removing someone.

Offers of freed places, and every path that frees one feeding the line, come later (issue 40's
next slice); they move ``head`` and read the same counters.
"""
