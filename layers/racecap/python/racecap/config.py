"""The environment every function runs with, validated once at cold start.

Keys match ``blueprint.COMMON_ENV`` (a unit test keeps them in step). A function that
starts with a missing or malformed variable fails its first invocation loudly instead
of half-working through a burst.
"""

from __future__ import annotations

import os
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# The provider's endpoints Racecap calls, named as Stripe counts its per-endpoint limits: a named
# API operation by method and path (every intent's GET /v1/payment_intents/:id is one endpoint).
# PAYMENTS_ENDPOINT_RATES may raise any of them; racecap.payments.budget maps each call to one.
PAYMENT_ENDPOINTS = frozenset(
    {
        "POST /v1/payment_intents",
        "GET /v1/payment_intents/:id",
        "POST /v1/payment_intents/:id",
        "POST /v1/payment_intents/:id/confirm",
        "POST /v1/payment_intents/:id/cancel",
        "GET /v1/payment_intents/search",
        "POST /v1/refunds",
        "GET /v1/refunds",
        "GET /v1/events",
    }
)


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)

    races_table: str = Field(alias="RACES_TABLE", min_length=1)
    inventory_table: str = Field(alias="INVENTORY_TABLE", min_length=1)
    registrations_table: str = Field(alias="REGISTRATIONS_TABLE", min_length=1)
    audit_table: str = Field(alias="AUDIT_TABLE", min_length=1)
    registrations_queue_url: str = Field(alias="REGISTRATIONS_QUEUE_URL", pattern=r"^https?://")
    emails_queue_url: str = Field(alias="EMAILS_QUEUE_URL", pattern=r"^https?://")
    cache_url: str = Field(alias="CACHE_URL", pattern=r"^rediss?://")
    email_from: str = Field(alias="EMAIL_FROM", min_length=3)
    email_send_rate_per_second: float = Field(alias="EMAIL_SEND_RATE_PER_SECOND", gt=0)
    payments_api_base: str = Field(alias="PAYMENTS_API_BASE", pattern=r"^https?://")
    # The Secrets Manager id (ARN on AWS) of the provider's keys: never the keys themselves.
    payments_secret_id: str = Field(alias="PAYMENTS_SECRET_ID", min_length=1)
    # The provider's request budget shared by every function (Redis): Stripe allows ~100/s
    # live and 25/s in test mode unless raised; past it runners get 429 and keep their place.
    payments_rate_per_second: float = Field(alias="PAYMENTS_RATE_PER_SECOND", gt=0)
    # ... and each endpoint's, since Stripe also limits every endpoint (25/s unless raised):
    # creating intents tops out there whatever the account allows. Endpoints Stripe raised for
    # the account, as "POST /v1/payment_intents=80,GET /v1/payment_intents/:id=80" ("" none).
    payments_endpoint_rate_per_second: float = Field(alias="PAYMENTS_ENDPOINT_RATE_PER_SECOND", gt=0)
    payments_endpoint_rates: dict[str, float] = Field(alias="PAYMENTS_ENDPOINT_RATES")
    # What the site's card form needs (public by design: a publishable key and a script URL).
    payments_publishable_key: str = Field(alias="PAYMENTS_PUBLISHABLE_KEY", min_length=1)
    payments_script_url: str = Field(alias="PAYMENTS_SCRIPT_URL", pattern=r"^https?://")
    service_name: str = Field(alias="POWERTOOLS_SERVICE_NAME", min_length=1)
    # The runner site's address: the links in emails lead there (registration.links).
    site_url: str = Field(alias="SITE_URL", pattern=r"^https?://[^\s/]+(/\S*)?$")
    # A paid registration still unconfirmed this long after it was queued is re-sent to the
    # writer by the sweeper (its message was lost); then after twice as long, and so on.
    requeue_after_s: int = Field(alias="REQUEUE_UNCONFIRMED_AFTER_SECONDS", ge=1)
    # Per-address token buckets on the runner API (racecap.fairness.buckets).
    rate_limit_per_second: float = Field(alias="RATE_LIMIT_PER_SECOND", gt=0)
    rate_limit_burst: int = Field(alias="RATE_LIMIT_BURST", ge=1)
    # How much of a caller's address is one subscriber's, for every per-address limit
    # (racecap.fairness.identity): an IPv4 address is one line; an IPv6 line gets a whole
    # /64 (often a /56 or /48), any address of which its owner may use for each request.
    address_ipv4_prefix: int = Field(alias="ADDRESS_IPV4_PREFIX", ge=8, le=32)
    address_ipv6_prefix: int = Field(alias="ADDRESS_IPV6_PREFIX", ge=16, le=128)
    # The secret holding the fairness tokens' signing key (racecap.fairness.keys).
    fairness_key_secret_id: str = Field(alias="FAIRNESS_KEY_SECRET_ID", min_length=1)
    # What CloudFront sends in the origin-verify header: requests without it are refused.
    origin_verify_secret: str = Field(alias="ORIGIN_VERIFY_SECRET", min_length=16, repr=False)
    # HoldSweeper only: how old a refund with no answer is before the sweeper asks the provider.
    refund_settle_after_s: int = Field(default=30, alias="REFUND_SETTLE_AFTER_SECONDS", ge=1, le=3600)
    # The functions that make waitlist offers (racecap.waitlist.offers): 0 means each event's own
    # offer window (hours, the director's); a number of seconds replaces it on a test stage, so a
    # test can watch an offer expire.
    waitlist_offer_window_s: int = Field(default=0, alias="WAITLIST_OFFER_WINDOW_SECONDS", ge=0, le=336 * 3600)
    # AdminApi only (a function's ``extra_env`` in the blueprint); None elsewhere.
    window_state_machine_arn: str | None = Field(
        default=None, alias="WINDOW_STATE_MACHINE_ARN", pattern=r"^arn:aws[a-z-]*:states:"
    )
    # WindowTasks only: the provisioned function's scalable target the pre-warm raises, and
    # the most environments it may ask for (the target's own MaxCapacity).
    warm_start_target: str | None = Field(default=None, alias="WARM_START_TARGET", pattern=r"^function:")
    warm_start_max: int = Field(default=0, alias="WARM_START_MAX", ge=0)
    # The results functions only (their ``extra_env``); None elsewhere.
    results_table: str | None = Field(default=None, alias="RESULTS_TABLE", min_length=1)
    results_bucket: str | None = Field(default=None, alias="RESULTS_BUCKET", min_length=3)

    @field_validator("payments_endpoint_rates", mode="before")
    @classmethod
    def _endpoint_pairs(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        pairs: dict[str, str] = {}
        for item in (part.strip() for part in value.split(",")):
            name, equals, rate = item.rpartition("=")
            if item and not equals:
                raise ValueError(f"{item!r}: write ENDPOINT=RATE, e.g. 'POST /v1/payment_intents=80'")
            if item:
                pairs[" ".join(name.split())] = rate.strip()
        return pairs

    @field_validator("payments_endpoint_rates")
    @classmethod
    def _known_endpoints(cls, rates: dict[str, float]) -> dict[str, float]:
        # A misspelt name would leave its endpoint at the default without a word.
        unknown = sorted(set(rates) - PAYMENT_ENDPOINTS)
        if unknown:
            raise ValueError(f"not an endpoint Racecap calls: {unknown}; it calls {sorted(PAYMENT_ENDPOINTS)}")
        if any(rate <= 0 for rate in rates.values()):
            raise ValueError(f"every rate must be positive: {rates}")
        return rates


class ConfigurationError(RuntimeError):
    pass


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    try:
        return Settings.model_validate({k: v for k, v in os.environ.items() if k.isupper()})
    except ValidationError as exc:
        raise ConfigurationError(f"invalid function environment: {exc}") from exc
