"""A restarted ElasticMQ is ready only once its persisted queues are restored
(local/servers.py ``elasticmq_restored``, read from ElasticMQ's own log)."""

from __future__ import annotations

from pathlib import Path

from local import servers

LOG = """\
22:09:33.231 [d-6] INFO  o.e.rest.sqs.TheSQSRestServerBuilder - Started SQS rest server, bind address 127.0.0.1:9324
22:09:33.610 [d-8] INFO  o.elasticmq.actor.QueueManagerActor - Creating queue CreateQueueData(racecap-Emails,...)
22:09:33.681 [d-8] INFO  o.elasticmq.actor.QueueManagerActor - Creating queue CreateQueueData(racecap-Emails-dlq,...)
22:09:34.017 [d-11] INFO  o.elasticmq.actor.queue.QueueActor - Restored 50 messages in queue racecap-Emails-dlq
"""


def test_given_a_queue_created_but_not_yet_refilled_then_the_restore_is_not_done() -> None:
    assert not servers.elasticmq_restored(LOG, ["racecap-Emails", "racecap-Emails-dlq"])


def test_given_every_queue_refilled_then_the_restore_is_done() -> None:
    log = (
        LOG
        + "22:09:34.100 [d-5] INFO  o.elasticmq.actor.queue.QueueActor - Restored 0 messages in queue racecap-Emails\n"
    )
    assert servers.elasticmq_restored(log, ["racecap-Emails", "racecap-Emails-dlq"])


def test_given_no_queue_to_restore_then_a_fresh_store_is_ready_at_once() -> None:
    assert servers.elasticmq_restored("", [])


def test_given_a_persisted_store_then_the_conf_keeps_queues_and_messages_in_one_database(tmp_path: Path) -> None:
    conf = servers.elasticmq_conf(9324, store=tmp_path / "store")
    assert "messages-storage" in conf and "WRITE_DELAY=0" in conf and "prune-data-on-init = false" in conf
    assert "queues-storage" not in conf  # ignored by ElasticMQ when messages-storage is on
