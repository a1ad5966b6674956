"""Issue 13: one Powertools (the pinned one, in our deps layer), and the dashboard, alarms
and alarm topic the team watches during an opening."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path
from typing import Any

import pytest
from racecap_cdk import constants as c
from racecap_cdk.constructs import monitoring as m
from racecap_cdk.constructs.functions import DepsLayerError, check_deps_layer, pinned_version

import blueprint

from .conftest import TemplateView

LAYER_CODE = blueprint.ROOT / "layers" / "racecap" / "python" / "racecap"


# ---------------------------------------------------------------------------
# One Powertools
# ---------------------------------------------------------------------------
def test_the_deployed_powertools_is_the_tested_one() -> None:
    runtime_pin = pinned_version("aws-lambda-powertools", (blueprint.ROOT / "requirements.txt").read_text())
    dev_pin = pinned_version("aws-lambda-powertools", (blueprint.ROOT / "requirements-dev.txt").read_text())
    assert runtime_pin == dev_pin == importlib.metadata.version("aws-lambda-powertools")


def test_no_layer_arn_is_written_by_hand(view: TemplateView) -> None:
    text = json.dumps(view.json)
    assert "AWSLambdaPowertools" not in text
    assert not re.search(r"arn:aws:lambda:[^\"]*:layer:", text)
    built = set(view.of_type("AWS::Lambda::LayerVersion"))
    for _, props in view.tagged("AWS::Lambda::Function").values():
        assert {view.ref_target(layer) for layer in props["Layers"]} <= built


def test_a_built_deps_layer_must_carry_the_pinned_powertools(tmp_path: Path) -> None:
    requirements = "aws-lambda-powertools[tracer]==3.37.0\npydantic==2.14.3\n"
    check_deps_layer(tmp_path, requirements)  # not built yet (offline synth): fine
    site = tmp_path / "python"
    (site / "aws_lambda_powertools-3.36.0.dist-info").mkdir(parents=True)
    with pytest.raises(DepsLayerError, match=r"pins 3\.37\.0"):
        check_deps_layer(tmp_path, requirements)
    (site / "aws_lambda_powertools-3.36.0.dist-info").rename(site / "aws_lambda_powertools-3.37.0.dist-info")
    check_deps_layer(tmp_path, requirements)


# ---------------------------------------------------------------------------
# Metrics the dashboard reads are the metrics the code writes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("metric", m.APP_METRICS, ids=lambda x: x.name)
def test_every_dashboard_metric_is_emitted_by_its_function(metric: m.AppMetric) -> None:
    # The name argument of every add_metric call (a literal, or a choice between literals).
    names = re.compile(r"add_metric\(name=([^,]+),")
    emitted = {
        literal
        for path in LAYER_CODE.rglob("*.py")
        for argument in names.findall(path.read_text())
        for literal in re.findall(r'"(\w+)"', argument)
    }
    assert metric.name in emitted
    assert metric.service == blueprint.function_env(blueprint.function(metric.function))["POWERTOOLS_SERVICE_NAME"]


def test_handlers_emit_powertools_cold_starts() -> None:
    for fn in blueprint.FUNCTIONS:
        source = (fn.path / "handler.py").read_text()
        assert "@metrics.log_metrics(capture_cold_start_metric=True)" in source, fn.id


# ---------------------------------------------------------------------------
# Alarms and their topic
# ---------------------------------------------------------------------------
def _alarms(view: TemplateView) -> dict[str, dict[str, Any]]:
    return {lid: view.props(lid) for lid in view.of_type("AWS::CloudWatch::Alarm")}


def _alarm(view: TemplateView, alarm_id: str) -> dict[str, Any]:
    found = [props for lid, props in _alarms(view).items() if lid.startswith(f"{c.MONITORING_ID}{alarm_id}")]
    assert len(found) == 1, alarm_id
    return found[0]


def _topic(view: TemplateView) -> str:
    (topic,) = view.of_type("AWS::SNS::Topic")
    return topic


def test_every_alarm_notifies_the_team_topic(view: TemplateView) -> None:
    topic = _topic(view)
    alarms = _alarms(view)
    assert len(alarms) == len(blueprint.QUEUES) + len(blueprint.async_failure_queues()) + 4
    for props in alarms.values():
        assert [view.ref_target(a) for a in props["AlarmActions"]] == [topic]
        assert [view.ref_target(a) for a in props["OKActions"]] == [topic]
        assert props["TreatMissingData"] == "notBreaching"
        assert props["AlarmDescription"]


def test_alarm_topic_is_encrypted_with_a_key_cloudwatch_may_use(view: TemplateView) -> None:
    props = view.props(_topic(view))
    key = view.ref_target(props["KmsMasterKeyId"])
    key_props = view.props(key)
    assert key_props["EnableKeyRotation"] is True
    principals = [s["Principal"] for s in key_props["KeyPolicy"]["Statement"]]
    assert {"Service": "cloudwatch.amazonaws.com"} in principals
    assert c.OUTPUT_ALARM_TOPIC in view.json["Outputs"]


@pytest.mark.parametrize("queue", blueprint.QUEUES, ids=lambda q: q.id)
def test_any_message_in_a_dead_letter_queue_alarms(view: TemplateView, queue: blueprint.Queue) -> None:
    props = _alarm(view, f"{queue.id}DlqNotEmpty")
    assert props["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert props["Statistic"] == "Maximum"
    (dim,) = props["Dimensions"]
    assert view.tag(view.ref_target(dim["Value"])) == queue.dlq_id
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert props["Threshold"] == 0
    assert props["EvaluationPeriods"] == 1 and props["Period"] == 60


@pytest.mark.parametrize("queue_id", sorted(blueprint.async_failure_queues()))
def test_a_failed_asynchronous_invocation_alarms(view: TemplateView, queue_id: str) -> None:
    # A schedule's tick or an S3 event that failed every try.
    props = _alarm(view, f"{queue_id}DlqNotEmpty")
    (dim,) = props["Dimensions"]
    assert view.tag(view.ref_target(dim["Value"])) == queue_id
    assert (props["Threshold"], props["ComparisonOperator"]) == (0, "GreaterThanThreshold")


def test_writer_lag_over_a_minute_alarms(view: TemplateView) -> None:
    props = _alarm(view, c.ALARM_WRITER_LAG)
    assert props["MetricName"] == "ApproximateAgeOfOldestMessage"
    (dim,) = props["Dimensions"]
    assert view.tag(view.ref_target(dim["Value"])) == "Registrations"
    assert (props["Threshold"], props["ComparisonOperator"], props["Period"]) == (60, "GreaterThanThreshold", 60)


def _expression(props: dict[str, Any]) -> tuple[str, dict[str, dict[str, Any]]]:
    queries = props["Metrics"]
    (main,) = [q for q in queries if "Expression" in q]
    inputs = {q["Id"]: q["MetricStat"]["Metric"] for q in queries if "MetricStat" in q}
    return main["Expression"], inputs


def test_5xx_rate_alarm_is_a_percentage_of_requests(view: TemplateView) -> None:
    props = _alarm(view, c.ALARM_API_5XX)
    expression, inputs = _expression(props)
    assert expression == "IF(n >= 20, 100 * FILL(e, 0) / n, 0)"
    assert inputs["e"]["MetricName"] == "5xx" and inputs["n"]["MetricName"] == "Count"
    assert all(i["Namespace"] == "AWS/ApiGateway" for i in inputs.values())
    assert (props["Threshold"], props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (1, 3, 2)


def test_payment_failure_rate_alarm_reads_the_powertools_metrics(view: TemplateView) -> None:
    props = _alarm(view, c.ALARM_PAYMENT_FAILURES)
    expression, inputs = _expression(props)
    assert "100 * FILL(u, 0)" in expression
    assert {i["MetricName"] for i in inputs.values()} == {
        "RegistrationQueued",
        "PaymentDeclined",
        "PaymentRejected",
        "PaymentUnavailable",
    }
    for metric in inputs.values():
        assert metric["Namespace"] == blueprint.COMMON_ENV["POWERTOOLS_METRICS_NAMESPACE"]
        assert metric["Dimensions"] == [{"Name": "service", "Value": "registration-api"}]
    assert props["Threshold"] == 5


def test_ses_throttling_alarms(view: TemplateView) -> None:
    props = _alarm(view, c.ALARM_SES_THROTTLING)
    assert props["MetricName"] == "EmailThrottled"
    assert props["Dimensions"] == [{"Name": "service", "Value": "email-sender"}]
    assert (props["Threshold"], props["Period"], props["ComparisonOperator"]) == (
        5,
        300,
        "GreaterThanOrEqualToThreshold",
    )


# ---------------------------------------------------------------------------
# The dashboard
# ---------------------------------------------------------------------------
def _dashboard_body(view: TemplateView) -> str:
    (dashboard,) = view.of_type("AWS::CloudWatch::Dashboard")
    body = view.props(dashboard)["DashboardBody"]
    # Fn::Join of literal strings and tokens: the literal parts are what the tests read.
    return "".join(p if isinstance(p, str) else "<token>" for p in body["Fn::Join"][1])


def test_dashboard_shows_the_openings_vital_signs(view: TemplateView) -> None:
    body = _dashboard_body(view)
    for title in (
        "Holds / registrations",
        "Sold-out answers",
        "5xx by route",
        "4xx by route",
        "p99 latency by route",
        "Writer lag",
        "Dead-letter queue depths",
        "Throttles",
        "Lambda concurrency / cold starts",
        "Payments: declines and failures",
        "Emails sent vs queued",
    ):
        assert title in body, title
    for metric in m.APP_METRICS:
        assert f'"{metric.name}"' in body, metric.name
    for name in (
        "ApproximateAgeOfOldestMessage",
        "ConcurrentExecutions",
        "Throttles",
        "ColdStart",
        "NumberOfMessagesSent",
    ):
        assert name in body
    assert "{AWS/ApiGateway,ApiId,Method,Resource,Stage}" in body


def test_stage_publishes_per_route_metrics(view: TemplateView) -> None:
    (stage,) = view.of_type("AWS::ApiGatewayV2::Stage")
    assert view.props(stage)["DefaultRouteSettings"]["DetailedMetricsEnabled"] is True
