"""MyRegistrationApi: a runner's own entry, from the link in their email — "find my
registration", see it, correct it, change its address, cancel it under the race's refund
policy (``racecap/api/runner/own.py``) — and a sold-out event's waitlist: join it, confirm
from the emailed link, see the place, leave (``racecap/api/runner/waitlist.py``); an event's
ballot: apply, confirm, see, withdraw (``racecap/api/runner/ballot.py``).

A function of its own, not a router of RegistrationApi: that function is the opening's, kept
warm by the hundred (provisioned concurrency) and cold-started by the thousand in a burst, and
this router's init (the ledger, cancellations, email change, edits) would be in every one of
those cold starts for requests that come days later, a few at a time (issue 38: RegistrationApi
went from 80 to 143 ms over the framework's floor with it). Same rate limits and origin check.
"""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.api.runner import ballot, own, waitlist
from racecap.config import get_settings
from racecap.fairness.wiring import runner_rate_limit
from racecap.http import make_resolver
from racecap.observability import logger, metrics, tracer

get_settings()  # validate the environment at cold start
app = make_resolver(rate_limit=runner_rate_limit)
for capability in (own, waitlist, ballot):
    app.include_router(capability.router)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
