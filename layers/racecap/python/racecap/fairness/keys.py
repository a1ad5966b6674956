"""The one signing key for every fairness token, read from the secret store.

Secrets Manager on AWS (moto's locally, provisioned by the local stack): the secret named
by ``FAIRNESS_KEY_SECRET_ID`` is a JSON object whose ``signingKey`` is the key. The key
never sits in an environment variable or a template. Cached for five minutes per
environment, as the payment provider's keys are.
"""

from __future__ import annotations

from racecap.config import ConfigurationError, get_settings

MAX_AGE_S = 300


def signing_key() -> bytes:
    # Imported on first use: Powertools' parameters package imports boto3 (and s3transfer),
    # which would land on every function's cold start through wiring (test_cold_imports.py).
    from aws_lambda_powertools.utilities import parameters

    secret_id = get_settings().fairness_key_secret_id
    value = parameters.get_secret(secret_id, transform="json", max_age=MAX_AGE_S)
    if not isinstance(value, dict) or len(str(value.get("signingKey", ""))) < 16:
        raise ConfigurationError(f"secret {secret_id} must be a JSON object with a signingKey of 16+ characters")
    return str(value["signingKey"]).encode()
