"""Lambda's SQS event-source mappings and EventBridge schedules, for the local stack.

For each ``blueprint.QUEUE_TRIGGERS`` entry it runs as many pollers as the mapping's
maximum concurrency allows — and never more than the function's reserved concurrency —
each receiving up to ``batch_size`` messages, invoking the same handler with an SQS
event, and deleting only what succeeded:

* handler returns ``batchItemFailures``: those messages stay, the rest are deleted;
* handler raises: nothing is deleted, the whole batch comes back after the queue's
  visibility timeout;
* a message received more than ``maxReceiveCount`` times is moved to the DLQ by the
  queue's own redrive policy (ElasticMQ implements it, as SQS does).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import multiprocessing.process
import os
import signal
import threading
import time
import traceback
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

import blueprint
from local.provision import object_event
from local.runtime import ACCOUNT, REGION, FunctionHost
from local.servers import die_with_parent


def sqs_event(queue_arn: str, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {
                    k: {
                        "stringValue": v.get("StringValue"),
                        "binaryValue": v.get("BinaryValue"),
                        "stringListValues": [],
                        "binaryListValues": [],
                        "dataType": v["DataType"],
                    }
                    for k, v in (m.get("MessageAttributes") or {}).items()
                },
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for m in messages
        ]
    }


def failed_ids(result: Any) -> set[str] | None:
    """Message ids the handler reported as failed; None means the whole batch failed."""
    if isinstance(result, dict) and "batchItemFailures" in result:
        return {f["itemIdentifier"] for f in result["batchItemFailures"]}
    return set()


IDLE_WAIT_S = 2
WINDOW_LOOK_S = 0.2
# On AWS the event-source mapping's polling runs in Lambda's service, on no function's CPU;
# here it shares the pollers' processes, which the bench charges per registration. So its
# client skips botocore's request validation and per-request User-Agent assembly, as the
# functions' own clients do (racecap.clients).
STAND_IN_CLIENT = Config(parameter_validation=False, user_agent="racecap-local event-source-mapping")


class QueuePoller(threading.Thread):
    def __init__(
        self,
        host: FunctionHost,
        trigger: blueprint.QueueTrigger,
        queue_url: str,
        stop: threading.Event,
        n: int,
    ) -> None:
        super().__init__(name=f"{trigger.function}-{n}", daemon=True)
        self.host = host
        self.trigger = trigger
        self.queue_url = queue_url
        self.queue_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{queue_url.rsplit('/', 1)[-1]}"
        self.stop = stop
        self.sqs = boto3.session.Session().client("sqs", config=STAND_IN_CLIENT)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.poll_once()
            except Exception:
                traceback.print_exc()
                self.stop.wait(1.0)

    def receive(self, up_to: int, wait_s: int) -> list[dict[str, Any]]:
        resp = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=min(up_to, 10),  # SQS's most per call
            WaitTimeSeconds=wait_s,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages: list[dict[str, Any]] = [dict(m) for m in resp.get("Messages", [])]
        return messages

    def batch(self) -> list[dict[str, Any]]:
        """What Lambda's poller hands one invocation: from the first message, more until the
        batch is full or the mapping's batching window has passed."""
        # Lambda long-polls for 20 s; 2 s keeps a stopping poller prompt. A shorter wait is an
        # empty receive a second per poller, CPU the bench counts against the product.
        messages = self.receive(self.trigger.batch_size, IDLE_WAIT_S)
        if not messages or not self.trigger.max_batching_window_s:
            return messages
        deadline = time.monotonic() + self.trigger.max_batching_window_s
        while len(messages) < self.trigger.batch_size and not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            more = self.receive(self.trigger.batch_size - len(messages), 0)
            messages += more
            if not more:
                # A few looks per window, not one every few milliseconds: each empty
                # receive is a request's CPU in the poller and in ElasticMQ.
                self.stop.wait(min(left, WINDOW_LOOK_S))
        return messages

    def poll_once(self) -> int:
        messages = self.batch()
        if not messages:
            return 0
        try:
            result = self.host.invoke(self.trigger.function, sqs_event(self.queue_arn, messages))
            failed = failed_ids(result) or set()
        except Exception as exc:
            print(f"[pollers] {self.trigger.function} failed its batch: {type(exc).__name__}: {exc}", flush=True)
            return len(messages)
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            chunk = done[start : start + 10]
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
        return len(messages)


class ObjectWatcher(threading.Thread):
    """S3 event notifications: moto stores objects but notifies no Lambda, so this lists
    the bucket's prefix a few times a second and invokes the function with the same
    ObjectCreated event S3 sends, once per new object (or new version of a key)."""

    INTERVAL_S = 1.0  # uploads are rare; a listing costs CPU in moto and here

    def __init__(self, host: FunctionHost, trigger: blueprint.ObjectTrigger, stop: threading.Event) -> None:
        super().__init__(name=f"{trigger.function}-{trigger.bucket}", daemon=True)
        self.host, self.trigger, self.stop = host, trigger, stop
        self.s3 = boto3.session.Session().client("s3")
        self.bucket = blueprint.bucket(trigger.bucket).local_name
        self.seen: dict[str, str] = {}

    def run(self) -> None:
        while not self.stop.wait(self.INTERVAL_S):
            try:
                self.poll_once()
            except Exception:
                traceback.print_exc()
                self.stop.wait(1.0)

    def poll_once(self) -> int:
        new = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.trigger.prefix):
            for obj in page.get("Contents", []):
                key, etag = obj["Key"], obj["ETag"]
                if key.endswith(self.trigger.suffix) and self.seen.get(key) != etag:
                    new.append((obj["LastModified"], key, int(obj["Size"]), etag))
        for _, key, size, etag in sorted(new):
            self.seen[key] = etag
            try:
                self.host.invoke(self.trigger.function, object_event(self.trigger, key, size, etag))
            except Exception as exc:
                # Lambda retries an asynchronous invocation twice; the function's own
                # state (the upload's status) decides what a retry would do.
                print(f"[pollers] {self.trigger.function} failed on {key}: {type(exc).__name__}: {exc}", flush=True)
        return len(new)


class Scheduler(threading.Thread):
    """EventBridge rate() schedules: invoke the function with a Scheduled Event."""

    def __init__(self, host: FunctionHost, schedule: blueprint.Schedule, stop: threading.Event, scale: float) -> None:
        super().__init__(name=f"schedule-{schedule.id}", daemon=True)
        self.host, self.schedule, self.stop = host, schedule, stop
        self.interval = schedule.every_minutes * 60 * scale

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            event = {
                "version": "0",
                "id": str(uuid.uuid4()),
                "detail-type": "Scheduled Event",
                "source": "aws.events",
                "account": ACCOUNT,
                "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "region": REGION,
                "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{self.schedule.id}"],
                "detail": {},
            }
            try:
                self.host.invoke(self.schedule.function, event)
            except Exception:
                traceback.print_exc()


def concurrency(trigger: blueprint.QueueTrigger) -> int:
    reserved = blueprint.function(trigger.function).reserved_concurrency
    return min(trigger.max_concurrency, reserved) if reserved else trigger.max_concurrency


# How long a stopping process waits for its thread to finish the batch in hand. A thread
# blocked on a server that is gone (botocore retrying a dead ElasticMQ) would otherwise
# keep the process alive forever; it is a daemon thread, so the process simply exits.
STOP_GRACE_S = 5.0


def _run_poller(trigger: blueprint.QueueTrigger, queue_url: str, n: int) -> None:
    _serve([QueuePoller(FunctionHost(), trigger, queue_url, _stop_event(), n)])


def _run_watcher(trigger: blueprint.ObjectTrigger) -> None:
    _serve([ObjectWatcher(FunctionHost(), trigger, _stop_event())])


def _run_schedule(schedule: blueprint.Schedule, scale: float) -> None:
    _serve([Scheduler(FunctionHost(), schedule, _stop_event(), scale)])


def _stop_event() -> threading.Event:
    """Set by SIGTERM/SIGINT, and by the death of the pollers' main process (a forked
    child gets no parent-death signal of its own: it is asked for here)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    die_with_parent(os.getppid())
    return stop


def _serve(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.start()
    stopping_since: float | None = None
    while any(t.is_alive() for t in threads):  # the threads end when SIGTERM sets their event
        for t in threads:
            t.join(timeout=0.5)
        if stopping_since is None and any(getattr(t, "stop", threading.Event()).is_set() for t in threads):
            stopping_since = time.monotonic()
        if stopping_since is not None and time.monotonic() - stopping_since > STOP_GRACE_S:
            print(f"[pollers] {threads[0].name}: gave up waiting for the batch in hand", flush=True)
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queue-urls", required=True, help="JSON map of queue id -> URL")
    parser.add_argument("--schedule-scale", type=float, default=1.0, help="shrink schedule intervals (tests)")
    parser.add_argument("--pids-file", type=Path, default=None, help="write {name: pid} here (fault tests)")
    args = parser.parse_args()
    urls: dict[str, str] = json.loads(args.queue_urls)
    # One process per concurrent "execution environment", as Lambda runs them: module
    # state (Powertools' metrics, the idempotency layer) is never shared between two
    # invocations in flight. Processes are forked before any AWS client exists.
    ctx = multiprocessing.get_context("fork")
    specs: dict[str, tuple[Any, tuple[Any, ...]]] = {}
    for t in blueprint.QUEUE_TRIGGERS:
        for n in range(concurrency(t)):
            specs[f"{t.function}-{n}"] = (_run_poller, (t, urls[t.queue], n))
    for sched in blueprint.SCHEDULES:
        specs[f"schedule-{sched.id}"] = (_run_schedule, (sched, args.schedule_scale))
    for ot in blueprint.OBJECT_TRIGGERS:
        specs[f"objects-{ot.function}"] = (_run_watcher, (ot,))

    def start(name: str) -> multiprocessing.process.BaseProcess:
        target, target_args = specs[name]
        proc = ctx.Process(target=target, args=target_args, name=name, daemon=True)
        proc.start()
        return proc

    procs = {name: start(name) for name in specs}
    _write_pids(args.pids_file, procs)
    print(f"[pollers] {len(procs)} pollers and schedules running, one process each", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.is_set():
        stop.wait(0.5)
        if stop.is_set():
            break
        for name, p in list(procs.items()):
            if not p.is_alive():
                # An execution environment that died mid-batch (killed, out of memory) is
                # replaced, as Lambda starts a new one; its batch comes back to the queue
                # when the visibility timeout ends, since nothing deleted it.
                print(f"[pollers] {name} exited with {p.exitcode}; starting a new one", flush=True)
                procs[name] = start(name)
                _write_pids(args.pids_file, procs)
    for p in procs.values():
        p.terminate()
    deadline = time.monotonic() + STOP_GRACE_S + 2
    for p in procs.values():
        p.join(timeout=max(0.1, deadline - time.monotonic()))
    for p in procs.values():  # every wait is bounded: what has not stopped by now is killed
        if p.is_alive():
            p.kill()
            p.join(timeout=2)


def _write_pids(path: Path | None, procs: dict[str, multiprocessing.process.BaseProcess]) -> None:
    if path is None:
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({name: p.pid for name, p in procs.items()}))
    os.replace(tmp, path)  # atomic: a reader never sees half a file


if __name__ == "__main__":
    main()
