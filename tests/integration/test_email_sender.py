"""The EmailSender end to end: real ElasticMQ, pollers, DynamoDB Local, Redis and the
local SES endpoint, which enforces a send rate and can be told to throttle."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from racecap.ratelimit import SendRateLimiter

import blueprint
from local.pollers import sqs_event
from local.runtime import FunctionHost
from tests.integration.latency import machine

pytestmark = pytest.mark.integration

ONE_SECOND_NS = 1_000_000_000


class Mailbox:
    """The local SES endpoint's test API."""

    def __init__(self, url: str) -> None:
        self.url = url

    def clear(self) -> None:
        requests.delete(f"{self.url}/messages", timeout=10).raise_for_status()

    def throttle_next(self, n: int) -> None:
        requests.post(f"{self.url}/_faults", json={"throttle": n}, timeout=10).raise_for_status()

    def state(self) -> dict[str, Any]:
        resp = requests.get(f"{self.url}/messages.json", timeout=10)
        resp.raise_for_status()
        return resp.json()  # type: ignore[no-any-return]

    def messages(self, to: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.state()["messages"] if to is None or to in m["to"]]

    def wait_for(self, to: str, count: int, timeout: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            found = self.messages(to)
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.25)


@pytest.fixture
def mailbox(stack) -> Iterator[Mailbox]:
    box = Mailbox(stack.mailbox_url)
    box.clear()
    yield box
    box.throttle_next(0)


def recipient(test: str) -> str:
    return f"{test}-{uuid.uuid4().hex[:10]}@example.com"


def confirmation(to: str, n: int, dedup: str | None = None) -> dict[str, Any]:
    registration_id = f"reg-{uuid.uuid4().hex[:12]}"
    return {
        "kind": "confirmation",
        "dedupKey": dedup or f"confirmation:{registration_id}",
        "to": to,
        "data": {
            "firstName": "Ada",
            "lastName": f"Runner{n}",
            "raceName": "Harbour Half",
            "eventName": "Half Marathon",
            "bib": 1000 + n,
            "registrationId": registration_id,
            "amountCents": 4500,
            "currency": "USD",
            "raceDate": "2030-10-13",
        },
    }


def enqueue(backend, stack, bodies: list[dict[str, Any]]) -> None:
    url = stack.queue_urls["Emails"]
    for start in range(0, len(bodies), 10):
        chunk = bodies[start : start + 10]
        resp = backend.sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": json.dumps(b)} for i, b in enumerate(chunk)]
        )
        assert not resp.get("Failed"), resp


def sent_ns(message: dict[str, Any]) -> int:
    # The local SES names each message f"{time.time_ns():x}-…" when it accepts it.
    return int(message["messageId"].split("-", 1)[0], 16)


def max_in_any_second(times_ns: list[int], seconds: int = 1) -> int:
    times = sorted(times_ns)
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while t - times[lo] >= seconds * ONE_SECOND_NS:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def configured_rate(stack) -> float:
    return float(stack.function_env()["EMAIL_SEND_RATE_PER_SECOND"])


def test_given_forty_confirmations_then_forty_emails_arrive_never_faster_than_the_send_rate(stack, backend, mailbox):
    to = recipient("rate")
    bodies = [confirmation(to, n) for n in range(40)]

    enqueue(backend, stack, bodies)
    received = mailbox.wait_for(to, 40, timeout=90)
    time.sleep(1.0)  # anything extra would show up now

    received = mailbox.messages(to)
    assert len(received) == 40
    assert {m["tags"]["registrationId"] for m in received} == {b["data"]["registrationId"] for b in bodies}
    # Every email the account sent in that time counts against its rate, not only ours.
    everything = mailbox.messages()
    rate = configured_rate(stack)
    arrivals = [sent_ns(m) for m in everything]
    peak = max_in_any_second(arrivals)
    sustained = max_in_any_second(arrivals, seconds=3)
    span_s = (max(map(sent_ns, received)) - min(map(sent_ns, received))) / ONE_SECOND_NS
    print(
        f"\n[email] 40 emails in {span_s:.2f}s; peak {peak} in any 1 s window, {sustained} in any 3 s (rate {rate:g}/s)"
    )
    # The limiter spaces its slots (1 + headroom) / rate apart, so no second of *slots* holds more
    # than the rate. What SES counts is arrivals: a send stalled in flight past the headroom (a
    # starved CPU between the slot and the request; seen once in CI at 0.1 s) lands beside the
    # next second's sends. SES tolerates such a short burst ("you can exceed this quota for short
    # bursts, but not for a sustained period") and a throttled send is retried (the test below),
    # so the bound is: one extra send in a second at most, and never more than the rate sustained.
    assert peak <= rate + 1
    assert sustained <= 3 * rate
    # ...and the limiter does not starve the queue either. Not a speed bound: at the rate the 40
    # take 40/rate s; a loaded machine's sender is slower, a starving limiter (one a second,
    # or waiting out whole windows) far slower.
    assert span_s < 10 * 40 / rate, (span_s, rate, machine())


def test_given_the_same_dedup_key_three_times_then_one_email_is_sent(stack, backend, mailbox):
    to = recipient("dup")
    dedup = f"confirmation:dup-{uuid.uuid4().hex}"
    for n in range(3):  # three separate sends, as a retrying producer would make
        enqueue(backend, stack, [confirmation(to, n, dedup=dedup)])

    first = mailbox.wait_for(to, 1, timeout=30)
    assert len(first) == 1
    time.sleep(4.0)  # the other two copies have long been received by now

    assert len(mailbox.messages(to)) == 1


def test_given_ses_throttles_fifteen_sends_then_all_ten_emails_still_arrive(stack, backend, mailbox):
    to = recipient("throttle")
    bodies = [confirmation(to, n) for n in range(10)]
    throttled_before = mailbox.state()["throttled"]

    mailbox.throttle_next(15)
    enqueue(backend, stack, bodies)
    # Retries inside the invocation absorb most of it; a record that stays throttled comes
    # back after the queue's visibility timeout, so allow for one redelivery.
    visibility = blueprint.queue("Emails").visibility_timeout_s
    received = mailbox.wait_for(to, 10, timeout=visibility + 60)

    assert len(received) == 10
    assert {m["tags"]["registrationId"] for m in received} == {b["data"]["registrationId"] for b in bodies}
    assert mailbox.state()["throttled"] - throttled_before >= 15


def test_given_a_poison_message_in_a_batch_then_only_it_is_reported_failed(stack, mailbox, in_process_env):
    to = recipient("poison")
    good = confirmation(to, 1)
    unknown_kind = {**confirmation(to, 2), "kind": "horoscope"}
    url = stack.queue_urls["Emails"]
    event = sqs_event(
        f"arn:aws:sqs:us-east-1:000000000000:{url.rsplit('/', 1)[-1]}",
        [
            {"MessageId": "good-1", "ReceiptHandle": "rh-1", "Body": json.dumps(good)},
            {"MessageId": "poison-kind", "ReceiptHandle": "rh-2", "Body": json.dumps(unknown_kind)},
            {"MessageId": "poison-json", "ReceiptHandle": "rh-3", "Body": "{not json"},
        ],
    )

    result = FunctionHost().invoke("EmailSender", event)

    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == {"poison-kind", "poison-json"}
    delivered = mailbox.wait_for(to, 1, timeout=10)
    assert [m["tags"]["registrationId"] for m in delivered] == [good["data"]["registrationId"]]


def test_a_failed_email_is_dead_lettered_after_max_receive_count(stack, backend):
    queue = blueprint.queue("Emails")
    url = stack.queue_urls["Emails"]
    dlq_url = stack.queue_urls.get(queue.dlq_id) or f"{url}-dlq"
    attrs = backend.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]
    dlq_arn = backend.sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]

    redrive = json.loads(attrs["RedrivePolicy"])
    assert int(redrive["maxReceiveCount"]) == queue.max_receive_count
    assert redrive["deadLetterTargetArn"] == dlq_arn["QueueArn"]


def test_given_three_instances_sharing_redis_then_sends_never_exceed_the_rate(backend):
    rate, per_instance = 40.0, 30
    key = f"rc:test:ratelimit:{uuid.uuid4().hex}"
    times: list[int] = []
    lock = threading.Lock()

    def instance() -> None:
        limiter = SendRateLimiter(lambda: backend.redis, rate, key=key)
        for _ in range(per_instance):
            limiter.acquire()
            with lock:
                times.append(time.time_ns())

    threads = [threading.Thread(target=instance) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert len(times) == 3 * per_instance
    assert max_in_any_second(times) <= rate
    assert (max(times) - min(times)) / ONE_SECOND_NS >= (3 * per_instance - rate) / rate
