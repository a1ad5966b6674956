"""Racecap's shared Lambda layer: one package per capability, on a small kernel.

Ranks (a package imports only lower ranks; tests/unit/test_import_graph.py enforces them):

    0  kernel    models errors money config clients observability deadline cache ratelimit
                 http auth, and ``aws/`` (DynamoDB items, keys, transactions, retries, SQS)
    1  audit     the audit trail          places    caps and their shards
       emails    messages, templates, SES payments  the provider port, Stripe, its budget
    2  races     races, events, their rules and the cached catalog
    3  questions registration questions   fairness  identity, limits, the opening queue
       holds     a held place (a team's places), claimed and released
    4  window    the registration window (Step Functions), pre-warming
    5  setup     the directors' race set-up (drafts, patches, copies, publishing)
    6  codes     discount codes           registration  register, pay, confirm, the writer
    7  ledger    payments and refunds, cancellations, the provider's events
    8  participants  stats  results  retention
    edge         ``api/`` routers and ``functions/*/handler.py``

Each package has the same parts: ``models``, ``rules`` (pure), services, ``store`` (the adapter
beside its Protocol) and ``wiring`` (its composition root, importing only its own package, the
kernel and lower-ranked wirings; only handlers import a wiring).
"""
