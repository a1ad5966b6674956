"""Holds: a runner's place (or a team's places) held for the hold window, claimed against the
cap's shards and given back on release or expiry.

A team is one hold of ``places`` places (``holds.models.Hold``), so everything a hold goes
through — expiry, release, the sweeper, the provider's one PaymentIntent per hold, its webhooks,
the re-send of a lost message — takes the whole team, never part of it:

- holding: every place in one transaction across the cap's shards (``holds.store.claim_team``),
  each shard taking k places only while it still has k; too few places left is an answer
  to the captain, not a sold-out event (no flag is raised);
- paying: every member's email claimed in the transaction that starts the payment
  (``holds.store.begin_payment``): one taken, nothing is charged and the captain is told which
  member, the team keeping its places; one PaymentIntent for the team's total;
- confirming: one message for the team (``registration.models.PaidTeam``), all its
  registrations written in one transaction with their bibs (``registration.writer``), each
  member's registration carrying its share of the payment, so a member's cancellation refunds
  that share only.
"""
