"""The payments capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.payments.port import PaymentProvider


@lru_cache(maxsize=1)
def payments() -> PaymentProvider:
    """Stripe through the official SDK (timeouts sized for API Gateway's 29 s), behind the
    request budgets every function shares through Redis, the account's and each endpoint's:
    past either, ``PaymentRateLimited``."""
    from racecap.payments.budget import LimitedPaymentProvider
    from racecap.payments.stripe_provider import StripePaymentProvider, keys_from_secret
    from racecap.ratelimit import RequestBudget

    s = get_settings()
    stripe = StripePaymentProvider(keys_from_secret(s.payments_secret_id), api_base=s.payments_api_base)
    budget = RequestBudget(
        clients.cache,
        s.payments_rate_per_second,
        s.payments_endpoint_rate_per_second,
        endpoint_rates=s.payments_endpoint_rates,
        key=PAYMENTS_BUDGET_KEY,
    )
    return LimitedPaymentProvider(stripe, budget.reserve)


PAYMENTS_BUDGET_KEY = "rc:ratelimit:payments"
