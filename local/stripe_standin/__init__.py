"""A local stand-in for the subset of Stripe's API that Racecap uses, on 127.0.0.1.

    python -m local.stripe_standin --port 8007 [--webhook-url URL] [--rate-limit 25] [--endpoint-rate-limit 25]

The official ``stripe`` SDK is pointed at it through its API base (``base_addresses``), so
the adapter that runs on AWS against api.stripe.com runs here unchanged. What it speaks:

- ``/v1/payment_intents``: create, retrieve, update (amount, description, metadata), confirm,
  cancel, list, search (``metadata['k']:'v'`` and ``status:'…'`` clauses joined by AND);
  ``/v1/refunds`` create/retrieve; ``/v1/events`` list (``types[]``, ``type``,
  ``created[gte|gt|lte|lt]``, ``starting_after``) and retrieve.
  Form-encoded bodies with Stripe's bracket notation, ``Authorization: Bearer <key>``.
- Stripe's idempotency: a POST's ``Idempotency-Key`` replays the first answer (header
  ``Idempotent-Replayed: true``); the same key with other parameters or another endpoint is
  400 ``idempotency_error``; a duplicate that arrives while the first is still running is
  409 ``idempotency_key_in_use`` with ``Stripe-Should-Retry: true`` (the SDK retries it).
  Answers to requests that failed validation (or were rate limited) are not stored.
- Stripe's amount rules per currency (``racecap.money``, from its documentation): the minimum
  charge in the currency's API unit (50 for USD/EUR, 30 for GBP, ¥50 for JPY, a zero-decimal
  currency) refused as ``amount_too_small``, eight digits at most (``amount_too_large``).
- Stripe's error JSON (``{"error": {"type", "code", "decline_code", "message", "param",
  "payment_intent"}}``) and statuses: 400, 401, 402 (card errors), 404, 409, 429.
- Test cards and PaymentMethods (``TEST_CARDS``): pm_card_visa / 4242 4242 4242 4242
  succeeds, 4000 0000 0000 0002 is declined, 4000 0000 0000 9995 has insufficient funds,
  4000 0025 0000 3155 asks for 3-D Secure (``requires_action`` until the challenge page is
  approved or failed).
- Stripe's two rate limits, answered with 429 ``rate_limit`` like Stripe: one over every ``/v1``
  request (the account's; test mode 25 requests/s, live 100) and one per endpoint (25 requests/s
  unless raised), an endpoint being a method and path with the ids left out
  (``GET /v1/payment_intents/:id``). ``POST /_standin/ratelimit`` sets ``per_second``,
  ``per_endpoint`` and ``endpoints`` ({endpoint: rate}); ``stats`` counts refusals by limit.
- Webhooks signed like Stripe (``Stripe-Signature: t=…,v1=…``, HMAC-SHA256 of "t.payload"
  with the ``whsec_`` secret), delivered to ``--webhook-url`` with retries and knobs for
  delay, duplication, reordering and pausing (``POST /_standin/webhooks``).
- A Stripe.js stand-in at ``/v3/`` (``Stripe(key)``, ``elements({clientSecret})``,
  ``create('payment')``, ``confirmPayment``, ``retrievePaymentIntent``) whose card form is an
  iframe served from this origin, so card numbers reach only the stand-in, as with Stripe.

Test-only controls (what Stripe's dashboard or test clock would do) live under ``/_standin/``:
``faults``, ``ratelimit``, ``webhooks``, ``refund`` (a refund made outside Racecap, of ``amount`` or the rest),
``dispute``, ``stats``. They need the secret key, like the API.
"""
