"""What Racecap answers the payment provider's webhook. Apart from the ledger's models, which
the registering function (RegistrationApi, where the webhook lands) would otherwise build at
cold start for this one class."""

from __future__ import annotations

from pydantic import Field

from racecap.models import Model


class WebhookAnswer(Model):
    received: bool
    outcome: str = Field(description="What the event did: queued, already, orphan, declined, cancelled, flagged…")
