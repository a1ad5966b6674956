"""The HTTP API: one route per ``blueprint.ROUTES`` entry, each a Lambda proxy
(payload 2.0) to its function, the director routes behind the JWT authorizer. The stage
logs every request and throttles before the account limit is reached."""

from __future__ import annotations

import re

import jsii
from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigateway as apigw_v1
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

import blueprint

from .. import constants as c
from ..scanners import WHY_LOGS_NO_CMK, suppress

_ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "latencyMs": "$context.responseLatency",
    "integrationLatencyMs": "$context.integrationLatency",
    "integrationError": "$context.integrationErrorMessage",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
}


def route_construct_id(route: blueprint.Route) -> str:
    """``GET /api/races/{raceId}`` -> ``GetApiRacesRaceId``."""
    words = re.findall(r"[A-Za-z0-9]+", route.route_key)
    return "".join(w.capitalize() if w.isupper() else w[0].upper() + w[1:] for w in words)


class HttpApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: dict[str, lambda_.IFunction],
        director_authorizer: apigw.IHttpRouteAuthorizer,
    ) -> None:
        super().__init__(scope, construct_id)
        self.api = apigw.HttpApi(
            self,
            c.HTTP_API_RESOURCE_ID,
            description="Racecap API (served under /api)",
            create_default_stage=False,
        )
        access_logs = logs.LogGroup(
            self,
            c.ACCESS_LOGS_ID,
            retention=c.LOG_RETENTION,
            removal_policy=RemovalPolicy.DESTROY,
        )
        suppress(access_logs, "checkov", "CKV_AWS_158", WHY_LOGS_NO_CMK)
        self.stage = apigw.HttpStage(
            self,
            c.STAGE_ID,
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigw.ThrottleSettings(rate_limit=c.API_THROTTLE_RATE, burst_limit=c.API_THROTTLE_BURST),
            access_log_settings=_AccessLogs(access_logs),
            # Per-route 4xx/5xx/latency for the dashboard (racecap_cdk.constructs.monitoring).
            detailed_metrics_enabled=True,
        )
        # One integration per function, shared by its routes.
        integration_for = {
            fn_id: integrations.HttpLambdaIntegration(
                f"{fn_id}{c.INTEGRATION_SUFFIX}",
                fn,
                payload_format_version=apigw.PayloadFormatVersion.VERSION_2_0,
            )
            for fn_id, fn in functions.items()
            if blueprint.routes_for(fn_id)
        }
        self.routes: dict[str, apigw.HttpRoute] = {}
        for route in blueprint.ROUTES:
            self.routes[route.route_key] = apigw.HttpRoute(
                self,
                route_construct_id(route),
                http_api=self.api,
                route_key=apigw.HttpRouteKey.with_(route.path, apigw.HttpMethod(route.method)),
                integration=integration_for[route.function],
                authorizer=director_authorizer if route.auth == "director" else None,
            )


@jsii.implements(apigw.IAccessLogSettings)
class _AccessLogs:
    """The stage's access log: one JSON line per request into one log group."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigw.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigw.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw_v1.AccessLogFormat:
        return apigw_v1.AccessLogFormat.custom(_json_format())


def _json_format() -> str:
    body = ",".join(f'"{k}":"{v}"' for k, v in _ACCESS_LOG_FIELDS.items())
    return "{" + body + "}"
