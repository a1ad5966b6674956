"""QueueApi: the opening's waiting room — a device's token, the proof-of-work challenge, joining
the queue, a runner's place in it and the shared "now serving" (issue 38).

Its own function, not RegistrationApi's: in a queued opening the waiting room answers several
polls per runner for each hold (11,139 polls for 2,300 runners in the opening-queue burst), and
in RegistrationApi they took the environments — and on AWS the provisioned concurrency — that
an opening sizes for its holds and payments. Apart, each scales on its own and neither waits for
the other's environments. Holds still check the admission token this function signs (the same
key, ``FairnessSigningKey``).
"""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.api.runner import queue
from racecap.config import get_settings
from racecap.fairness.wiring import runner_rate_limit
from racecap.http import make_resolver
from racecap.observability import logger, metrics, tracer

get_settings()  # validate the environment at cold start, not mid-burst
app = make_resolver(rate_limit=runner_rate_limit)
app.include_router(queue.router)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
