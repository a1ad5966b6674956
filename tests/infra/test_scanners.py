"""Issue 12: the synthesized templates pass cfn-lint (with the serverless rules) and checkov,
and every suppression says why, next to its resource. Also: what the scanners asked for
and was fixed (the sweeper's schedule dead-lettered, personal data under a CMK, ...)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from racecap_cdk import constants as c
from racecap_cdk.scanners import WHY_KEY

import blueprint

from .conftest import Synth, TemplateView

VENV_BIN = blueprint.ROOT / ".venv" / "bin"
CHECKOV = blueprint.ROOT / ".cache" / "checkov" / "bin" / "checkov"
# Each scanner needs ~8 s of CPU; on a shared, loaded machine the wall time can be many times that.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def templates(synth: Synth, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("scan")
    paths = []
    for stack in (synth.stack, synth.stack.edge):
        assert stack is not None
        path = out / f"{stack.stack_name}.template.json"
        path.write_text(json.dumps(synth.app.synth().get_stack_by_name(stack.stack_name).template))
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def scans(templates: list[Path]) -> dict[str, subprocess.CompletedProcess[str]]:
    """Both scanners at once (each takes tens of seconds on a loaded machine)."""
    files = [str(p) for p in templates]
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    procs = {
        "cfn-lint": subprocess.Popen(
            [str(VENV_BIN / "cfn-lint"), "-a", "cfn_lint_serverless.rules", "--format", "json", "--", *files],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ),
        "checkov": subprocess.Popen(
            [str(CHECKOV), "--framework", "cloudformation", "--skip-download", "-o", "json"]
            + [arg for f in files for arg in ("-f", f)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        ),
    }
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=300)  # reads the pipes as it waits (checkov's JSON is large)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def test_cfn_lint_with_the_serverless_rules_is_clean(scans: dict[str, subprocess.CompletedProcess[str]]) -> None:
    result = scans["cfn-lint"]
    findings = json.loads(result.stdout or "[]")
    assert [f"{f['Rule']['Id']} {f['Location']['Path']}: {f['Message']}" for f in findings] == []
    assert result.returncode == 0, result.stderr


def test_checkov_is_clean(scans: dict[str, subprocess.CompletedProcess[str]]) -> None:
    result = scans["checkov"]
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed = [f"{f['check_id']} {f['resource']}" for r in reports for f in r["results"]["failed_checks"]]
    assert failed == []
    passed = sum(r["summary"]["passed"] for r in reports)
    assert passed > 100  # it really scanned both templates
    for report in reports:
        for skipped in report["results"]["skipped_checks"]:
            assert skipped["check_result"].get("suppress_comment", "").strip(), skipped["check_id"]


def _all_resources(synth: Synth) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for stack in (synth.stack, synth.stack.edge):
        assert stack is not None
        out.update(synth.app.synth().get_stack_by_name(stack.stack_name).template["Resources"])
    return out


def test_every_suppression_says_why_next_to_its_resource(synth: Synth) -> None:
    count = 0
    for lid, resource in _all_resources(synth).items():
        meta = resource.get("Metadata", {})
        for skip in meta.get("checkov", {}).get("skip", []):
            assert len(skip["comment"]) > 20, (lid, skip)
            count += 1
        for check in meta.get("cfn-lint", {}).get("config", {}).get("ignore_checks", []):
            assert len(meta[WHY_KEY][check]) > 20, (lid, check)
            count += 1
    assert count > 0


# ---------------------------------------------------------------------------
# What was fixed rather than suppressed
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("schedule", blueprint.SCHEDULES, ids=lambda s: s.id)
def test_a_schedule_dead_letters_its_ticks(view: TemplateView, schedule: blueprint.Schedule) -> None:
    queues = view.tagged("AWS::SQS::Queue")
    failures, _ = queues[schedule.failures_queue_id]
    _, rule = view.tagged("AWS::Events::Rule")[schedule.id]
    (target,) = rule["Targets"]
    assert view.ref_target(target["DeadLetterConfig"]["Arn"]) == failures
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0
    fn_lid, _ = view.tagged("AWS::Lambda::Function")[schedule.function]
    (props,) = [
        c["Properties"]
        for c in view.of_type("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Fn::GetAtt": [fn_lid, "Arn"]}
    ]
    assert props["MaximumRetryAttempts"] == 0
    assert props["MaximumEventAgeInSeconds"] == schedule.every_minutes * 60
    assert view.ref_target(props["DestinationConfig"]["OnFailure"]["Destination"]) == failures


@pytest.mark.parametrize("trigger", blueprint.OBJECT_TRIGGERS, ids=lambda t: t.failures_queue_id)
def test_an_object_trigger_keeps_the_events_that_failed_every_try(
    view: TemplateView, trigger: blueprint.ObjectTrigger
) -> None:
    # cfn-lint-serverless ES1007 (an asynchronous permission with no on-failure destination)
    # was suppressed for S3's permission before; now it is met: the permission and the
    # EventInvokeConfig name the same function ARN.
    failures, _ = view.tagged("AWS::SQS::Queue")[trigger.failures_queue_id]
    fn_lid, _ = view.tagged("AWS::Lambda::Function")[trigger.function]
    arn = {"Fn::GetAtt": [fn_lid, "Arn"]}
    (props,) = [
        c["Properties"]
        for c in view.of_type("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == arn
    ]
    assert props["MaximumRetryAttempts"] == 2
    assert view.ref_target(props["DestinationConfig"]["OnFailure"]["Destination"]) == failures
    s3_permissions = [
        p["Properties"]
        for p in view.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "s3.amazonaws.com"
    ]
    assert s3_permissions and all(p["FunctionName"] == arn for p in s3_permissions)


@pytest.mark.parametrize("queue", blueprint.QUEUES, ids=lambda q: q.id)
def test_queues_with_personal_data_use_the_customer_managed_key(view: TemplateView, queue: blueprint.Queue) -> None:
    queues = view.tagged("AWS::SQS::Queue")
    keys = set()
    for bp_id in (queue.id, queue.dlq_id):
        _, props = queues[bp_id]
        assert queue.personal_data
        keys.add(view.ref_target(props["KmsMasterKeyId"]))
    (key,) = keys
    assert key.startswith(c.PERSONAL_DATA_KEY_ID)


def test_site_bucket_is_versioned_and_logged(view: TemplateView) -> None:
    (bucket,) = [lid for lid, r in view.of_type("AWS::S3::Bucket").items() if "LoggingConfiguration" in r["Properties"]]
    props = view.props(bucket)
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["LoggingConfiguration"]["LogFilePrefix"] == c.SITE_BUCKET_LOG_PREFIX
