"""RegistrationApi: the runner's side — races are read by PublicApi; this function holds
places, takes registrations and their payment step, and hears the payment provider's webhooks
(the opening's waiting room is QueueApi's; a runner's own entry, later, is MyRegistrationApi's). The routes
live in one Powertools router per capability (``racecap/api/runner/``), included in the order
they were always registered: the OpenAPI document and the matching of overlapping patterns
depend on it.
"""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.api.runner import codes, holds, payments, registration
from racecap.config import get_settings
from racecap.fairness.wiring import runner_rate_limit
from racecap.http import make_resolver
from racecap.observability import logger, metrics, tracer

get_settings()  # validate the environment at cold start, not mid-burst
app = make_resolver(rate_limit=runner_rate_limit, rate_exempt=(payments.WEBHOOK_PATH,))
for capability in (holds, codes, registration, payments):
    app.include_router(capability.router)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
