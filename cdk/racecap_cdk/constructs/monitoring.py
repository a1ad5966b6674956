"""What the team watches during an opening: one CloudWatch dashboard per stage, the alarms
that say something is going wrong, and the SNS topic they publish to.

The application's figures (holds, registrations, sold-out answers, payments, emails, cold
starts) are Powertools Metrics: each handler writes them as embedded metric format (EMF)
log lines, namespace ``POWERTOOLS_METRICS_NAMESPACE`` and dimension ``service`` (the
function's ``POWERTOOLS_SERVICE_NAME``), and CloudWatch extracts them. Nothing here
publishes a metric; everything else comes from the services' own metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

import blueprint

from .. import constants as c
from ..refs import Registry

NAMESPACE = str(blueprint.COMMON_ENV["POWERTOOLS_METRICS_NAMESPACE"])
MINUTE = Duration.minutes(1)


@dataclass(frozen=True)
class AppMetric:
    """A metric the application emits through Powertools (``metrics.add_metric(name=...)``)."""

    name: str
    function: str  # the blueprint function whose handler emits it

    @property
    def service(self) -> str:
        return str(blueprint.function_env(blueprint.function(self.function))["POWERTOOLS_SERVICE_NAME"])


# Every application metric the dashboard or an alarm reads. tests/infra checks that each is
# really emitted by the layer's code, so a renamed metric cannot leave a silent graph.
HOLDS = AppMetric("HoldCreated", "RegistrationApi")
SOLD_OUT = AppMetric("SoldOut", "RegistrationApi")
SOLD_OUT_FROM_CACHE = AppMetric("SoldOutFromCache", "RegistrationApi")
QUEUED = AppMetric("RegistrationQueued", "RegistrationApi")
CONFIRMED = AppMetric("RegistrationConfirmed", "RegistrationWriter")
DECLINED = AppMetric("PaymentDeclined", "RegistrationApi")
REJECTED = AppMetric("PaymentRejected", "RegistrationApi")
PAYMENT_UNAVAILABLE = AppMetric("PaymentUnavailable", "RegistrationApi")
EMAIL_SENT = AppMetric("EmailSent", "EmailSender")
EMAIL_THROTTLED = AppMetric("EmailThrottled", "EmailSender")
DDB_THROTTLED = AppMetric("Throttled", "RegistrationApi")
DDB_CONFLICT = AppMetric("TransactionConflict", "RegistrationApi")
APP_METRICS = (
    HOLDS,
    SOLD_OUT,
    SOLD_OUT_FROM_CACHE,
    QUEUED,
    CONFIRMED,
    DECLINED,
    REJECTED,
    PAYMENT_UNAVAILABLE,
    EMAIL_SENT,
    EMAIL_THROTTLED,
    DDB_THROTTLED,
    DDB_CONFLICT,
)
COLD_START = "ColdStart"  # Powertools' own (log_metrics(capture_cold_start_metric=True))

# --- alarm thresholds (why each is where it is) ----------------------------------------
# Any message in a dead-letter queue is a registration or an email that needs a person.
DLQ_DEPTH_THRESHOLD = 0
# The API answers 4xx/429/503 by design; a 5xx is a bug or an outage. Over 1 % of requests for
# 2 of 3 minutes (with at least MIN_REQUESTS in the minute, so one error at night is quiet).
API_5XX_PERCENT = 1
MIN_REQUESTS = 20
# The paper's waiting screen polls at 10/20/40/60 s: a registration still queued after a
# minute is visible to runners.
WRITER_LAG_SECONDS = 60
# Provider unreachable (outcome unknown) on over 5 % of payment attempts for 2 of 3 minutes.
PAYMENT_FAILURE_PERCENT = 5
MIN_PAYMENT_ATTEMPTS = 10
# The sender paces itself below the configured SES rate; repeated throttling means the
# account's rate is lower than EmailSendRatePerSecond (or another sender shares it).
SES_THROTTLES_PER_5_MIN = 5


def app_metric(metric: AppMetric, statistic: str = "Sum", period: Duration = MINUTE) -> cw.Metric:
    return cw.Metric(
        namespace=NAMESPACE,
        metric_name=metric.name,
        dimensions_map={"service": metric.service},
        statistic=statistic,
        period=period,
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        registry: Registry,
        api: apigw.HttpApi,
    ) -> None:
        super().__init__(scope, construct_id)
        self._reg = registry
        self._api = api
        self.topic = self._topic()
        self.alarms: dict[str, cw.Alarm] = {}
        self._alarms()
        self.dashboard = cw.Dashboard(
            self,
            c.DASHBOARD_ID,
            default_interval=Duration.hours(1),
            period_override=cw.PeriodOverride.INHERIT,
        )
        self._widgets()

    # --- the topic ----------------------------------------------------------------------
    def _topic(self) -> sns.Topic:
        # A customer managed key: CloudWatch must be allowed to encrypt what it publishes,
        # which an AWS managed key's policy can never say.
        key = kms.Key(
            self,
            c.ALARM_KEY_ID,
            description="Racecap alarm topic",
            enable_key_rotation=True,
        )
        key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*")
        return sns.Topic(self, c.ALARM_TOPIC_ID, display_name="Racecap alarms", master_key=key, enforce_ssl=True)

    # --- alarms -------------------------------------------------------------------------
    def _alarm(
        self,
        alarm_id: str,
        metric: cw.IMetric,
        *,
        threshold: float,
        description: str,
        evaluation_periods: int = 1,
        datapoints_to_alarm: int | None = None,
        comparison: cw.ComparisonOperator = cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
    ) -> None:
        alarm = cw.Alarm(
            self,
            alarm_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints_to_alarm,
            comparison_operator=comparison,
            # No data = nothing happening (a quiet day), not an outage.
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        alarm.add_ok_action(cw_actions.SnsAction(self.topic))
        self.alarms[alarm_id] = alarm

    def _alarms(self) -> None:
        for queue_id, dlq in self._reg.dead_letter_queues.items():
            self._alarm(
                f"{queue_id}DlqNotEmpty",
                dlq.metric_approximate_number_of_messages_visible(statistic="Maximum", period=MINUTE),
                threshold=DLQ_DEPTH_THRESHOLD,
                description=f"A message reached the {queue_id} dead-letter queue: inspect it, fix, redrive.",
            )
        self._alarm(
            c.ALARM_API_5XX,
            cw.MathExpression(
                expression=f"IF(n >= {MIN_REQUESTS}, 100 * FILL(e, 0) / n, 0)",
                using_metrics={
                    "e": self._api.metric_server_error(period=MINUTE),
                    "n": self._api.metric_count(period=MINUTE),
                },
                period=MINUTE,
                label="5xx %",
            ),
            threshold=API_5XX_PERCENT,
            evaluation_periods=3,
            datapoints_to_alarm=2,
            description=f"Over {API_5XX_PERCENT} % of API requests answered 5xx for 2 of 3 minutes.",
        )
        self._alarm(
            c.ALARM_WRITER_LAG,
            self._reg.queues["Registrations"].metric_approximate_age_of_oldest_message(
                statistic="Maximum", period=MINUTE
            ),
            threshold=WRITER_LAG_SECONDS,
            evaluation_periods=2,
            description=f"Paid registrations waited over {WRITER_LAG_SECONDS} s for the writer, 2 minutes running.",
        )
        attempts = {m: app_metric(m) for m in (QUEUED, DECLINED, REJECTED, PAYMENT_UNAVAILABLE)}
        ids = dict(zip(attempts, ("q", "d", "r", "u"), strict=True))
        total = " + ".join(f"FILL({i}, 0)" for i in ids.values())
        self._alarm(
            c.ALARM_PAYMENT_FAILURES,
            cw.MathExpression(
                expression=f"IF(({total}) >= {MIN_PAYMENT_ATTEMPTS}, 100 * FILL(u, 0) / ({total}), 0)",
                using_metrics={ids[m]: metric for m, metric in attempts.items()},
                period=MINUTE,
                label="payment failures %",
            ),
            threshold=PAYMENT_FAILURE_PERCENT,
            evaluation_periods=3,
            datapoints_to_alarm=2,
            description=(
                f"The payment provider did not answer on over {PAYMENT_FAILURE_PERCENT} % of payment attempts "
                "(outcome unknown: the sweeper settles them) for 2 of 3 minutes."
            ),
        )
        self._alarm(
            c.ALARM_SES_THROTTLING,
            app_metric(EMAIL_THROTTLED, period=Duration.minutes(5)),
            threshold=SES_THROTTLES_PER_5_MIN,
            comparison=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            description="SES kept throttling the email sender: the account's rate is below EmailSendRatePerSecond.",
        )

    # --- the dashboard ------------------------------------------------------------------
    def _graph(self, title: str, metrics: list[cw.IMetric], *, right: list[cw.IMetric] | None = None) -> cw.GraphWidget:
        return cw.GraphWidget(title=title, left=metrics, right=right or [], width=8, height=6)

    def _api_search(self, metric_name: str, statistic: str) -> cw.MathExpression:
        # 4xx/5xx and latency per route need the stage's detailed metrics (Resource, Method).
        return cw.MathExpression(
            expression=(
                "SEARCH('{AWS/ApiGateway,ApiId,Method,Resource,Stage} "
                f'MetricName="{metric_name}" ApiId="' + self._api.api_id + f"\"', '{statistic}', 60)"
            ),
            using_metrics={},
            period=MINUTE,
            label="",
        )

    def _widgets(self) -> None:
        reg = self._reg
        fns = reg.functions
        self.dashboard.add_widgets(
            cw.TextWidget(
                markdown=(
                    "# Racecap opening\nHolds and registrations per minute, what runners saw, "
                    "and what is queued. Alarms publish to the stack's `AlarmTopicArn`."
                ),
                width=24,
                height=2,
            )
        )
        self.dashboard.add_widgets(
            self._graph(
                "Holds / registrations (per minute)", [app_metric(HOLDS), app_metric(QUEUED), app_metric(CONFIRMED)]
            ),
            self._graph("Sold-out answers", [app_metric(SOLD_OUT), app_metric(SOLD_OUT_FROM_CACHE)]),
            self._graph(
                "Writer lag (oldest registration message, s)",
                [
                    reg.queues["Registrations"].metric_approximate_age_of_oldest_message(
                        statistic="Maximum", period=MINUTE
                    )
                ],
            ),
        )
        self.dashboard.add_widgets(
            self._graph("5xx by route", [self._api_search("5xx", "Sum")]),
            self._graph("4xx by route", [self._api_search("4xx", "Sum")]),
            self._graph(
                "p99 latency by route (ms)",
                [self._api_search("Latency", "p99")],
                right=[self._api.metric_latency(statistic="p99", period=MINUTE)],
            ),
        )
        self.dashboard.add_widgets(
            self._graph(
                "Dead-letter queue depths",
                [
                    dlq.metric_approximate_number_of_messages_visible(
                        statistic="Maximum", label=f"{qid} DLQ", period=MINUTE
                    )
                    for qid, dlq in reg.dead_letter_queues.items()
                ],
            ),
            self._graph(
                "Throttles",
                [fn.metric_throttles(period=MINUTE, label=f"{fid} Lambda") for fid, fn in fns.items()],
                right=[app_metric(DDB_THROTTLED), app_metric(DDB_CONFLICT)],
            ),
            self._graph(
                "Lambda concurrency / cold starts",
                [
                    fn.metric("ConcurrentExecutions", statistic="Maximum", period=MINUTE, label=fid)
                    for fid, fn in fns.items()
                ],
                right=[
                    cw.Metric(
                        namespace=NAMESPACE,
                        metric_name=COLD_START,
                        dimensions_map={
                            "function_name": fn.function_name,
                            "service": AppMetric(COLD_START, fid).service,
                        },
                        statistic="Sum",
                        period=MINUTE,
                        label=f"{fid} cold starts",
                    )
                    for fid, fn in fns.items()
                ],
            ),
        )
        self.dashboard.add_widgets(
            self._graph(
                "Payments: declines and failures",
                [app_metric(DECLINED), app_metric(REJECTED), app_metric(PAYMENT_UNAVAILABLE)],
            ),
            self._graph(
                "Emails sent vs queued",
                [
                    app_metric(EMAIL_SENT),
                    reg.queues["Emails"].metric_number_of_messages_sent(period=MINUTE, label="queued"),
                ],
                right=[app_metric(EMAIL_THROTTLED)],
            ),
            cw.AlarmStatusWidget(alarms=list(self.alarms.values()), title="Alarms", width=8, height=6),
        )
