"""What the audit reads on a deployed stage, found from the stage itself.

A stage is named by one of its deployed functions (``--stage <AdminApi's function name or
ARN>``, the stack output ``AuditFunctionName``): its configuration is the stage's own truth
about table names, queue URLs and where the payment provider's keys live, mapped through
the blueprint's declaration of that function's environment. Dead-letter queues are the
ones the queues' redrive policies name. Nothing here knows whether it talks to AWS or to
the local stack (``AWS_ENDPOINT_URL_*`` decide), so the local tests run this very code.

* provider records: the provider's API with the stage's own secret key (``tools.audit.Provider``:
  PaymentIntents searched by the race's metadata, refunds from the events Stripe keeps 30 days);
* emails: the email sender's durable delivery log (``emails.store``), never the
  deduplication records, which expire.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import blueprint
from local.runtime import install_layer_path

install_layer_path()

from racecap.emails.store import DynamoDeliveryLog  # noqa: E402
from racecap.payments.stripe_provider import keys_from_secret  # noqa: E402


@dataclass
class Stage:
    tables: dict[str, str] = field(default_factory=dict)  # blueprint table id -> table name
    queue_urls: dict[str, str] = field(default_factory=dict)  # blueprint queue id (and DLQ id) -> URL
    secrets: dict[str, str] = field(default_factory=dict)  # blueprint secret id -> secret id/ARN
    payments_api_base: str = ""


def discover(lambda_client: Any, sqs: Any, function: str) -> Stage:
    """The stage's names, from a deployed function's environment (the blueprint says which
    variable holds what) and the queues' redrive policies."""
    env = lambda_client.get_function_configuration(FunctionName=function)["Environment"]["Variables"]
    stage = Stage(payments_api_base=env.get("PAYMENTS_API_BASE", ""))
    for key, ref in blueprint.function_env(blueprint.function(blueprint.AUDIT_FUNCTION)).items():
        match ref:
            case blueprint.TableName(table=table_id):
                stage.tables[table_id] = env[key]
            case blueprint.QueueUrl(queue=queue_id):
                stage.queue_urls[queue_id] = env[key]
            case blueprint.SecretId(secret=secret_id):
                stage.secrets[secret_id] = env[key]
    for q in blueprint.QUEUES:
        url = stage.queue_urls.get(q.id)
        if url is None:
            continue
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]
        dlq_arn = json.loads(attrs["RedrivePolicy"])["deadLetterTargetArn"]
        stage.queue_urls[q.dlq_id] = sqs.get_queue_url(QueueName=dlq_arn.rsplit(":", 1)[-1])["QueueUrl"]
    return stage


def stage_secret_key(stage: Stage) -> str:
    """The provider's secret key, read from the stage's own secret (never from the environment)."""
    return keys_from_secret(stage.secrets["PaymentProvider"])().secret_key


class DeliveredConfirmations:
    """Confirmation emails sent per registration, from the email sender's delivery log."""

    def __init__(self, dynamodb: Any, stage: Stage) -> None:
        self._log = DynamoDeliveryLog(dynamodb, stage.tables["Registrations"])

    def __call__(self, registration_ids: set[str]) -> Counter[str]:
        counts = self._log.sent_counts(sorted(registration_ids), "confirmation")
        return Counter({rid: n for rid, n in counts.items() if n})
