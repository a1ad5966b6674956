"""AdminApi: race directors manage their races — behind the JWT authorizer (Cognito on AWS).

Every route first finds the calling director's race (another director's race answers
404 as if it did not exist), then makes one call into the capability that owns it. The routes
live in one Powertools router per capability (``racecap/api/admin/``), included in the order
they were always registered: the OpenAPI document and the matching of overlapping patterns
depend on it.
"""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.api.admin import audit, codes, fairness, questions, races, runners, stats, waitlist, window
from racecap.config import get_settings
from racecap.http import make_resolver
from racecap.observability import logger, metrics, tracer

get_settings()  # validate the environment at cold start
app = make_resolver()
for capability in (races, window, stats, fairness, runners, questions, codes, audit, waitlist):
    app.include_router(capability.router)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
