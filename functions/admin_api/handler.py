"""AdminApi: race directors manage their races — behind the JWT authorizer (Cognito on AWS).

Every route first finds the calling director's race (another director's race answers
404 as if it did not exist), then makes one call into the capability that owns it. The routes
live in one Powertools router per capability (``racecap/api/admin/``); each is imported by the
first request that needs it (``racecap.api.lazy``), so a cold start builds one capability's
models, not nine (issue 38).
"""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.api.admin import ORDER, capability_of
from racecap.api.lazy import LazyRouters
from racecap.config import get_settings
from racecap.http import make_resolver
from racecap.observability import logger, metrics, tracer

get_settings()  # validate the environment at cold start
app = make_resolver()
routers = LazyRouters(app, "racecap.api.admin", ORDER, capability_of)
routers.include("races")  # the race list and a race's page: a director's first requests


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    method = event.get("requestContext", {}).get("http", {}).get("method", "GET")
    routers.ensure(method, event.get("rawPath", ""))
    return app.resolve(event, context)
