"""Payments: the provider port, Stripe behind it, the request budget all functions share,
the provider's calls in the runner's terms, and the webhook log."""
