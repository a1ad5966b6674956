"""Emails without any server: templates, the message contract, the SES adapter's error
mapping, the rate limiter's fallback and the per-record delivery rules (with fakes)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
from botocore.exceptions import ClientError
from pydantic import ValidationError
from racecap.emails.models import PoisonMessage, parse_message
from racecap.emails.sender import Notifier, RetryPolicy
from racecap.emails.store import MailThrottled, SesMailer
from racecap.emails.templates import EmailMessage, RenderedEmail, format_money, render
from racecap.observability import metrics
from racecap.ratelimit import DEFAULT_MAX_INSTANCES, SendRateLimiter

import blueprint
from local.runtime import LambdaContext


def confirmation(**data: Any) -> dict[str, Any]:
    return {
        "kind": "confirmation",
        "dedupKey": "confirmation:reg-1",
        "to": "runner@example.com",
        "data": {
            "firstName": "Ada",
            "lastName": "Lovelace",
            "raceName": "Harbour Half",
            "eventName": "Half Marathon",
            "bib": 1042,
            "registrationId": "reg-1",
            "amountCents": 4500,
            "currency": "usd",
            "raceDate": "2030-10-13",
            **data,
        },
    }


def refund(**data: Any) -> dict[str, Any]:
    return {
        "kind": "refund",
        "dedupKey": "refund:reg-1",
        "to": "runner@example.com",
        "data": {
            "firstName": "Ada",
            "raceName": "Harbour Half",
            "eventName": "Half Marathon",
            "registrationId": "reg-1",
            "amountCents": 4500,
            "currency": "EUR",
            **data,
        },
    }


@pytest.fixture(autouse=True)
def _no_metric_flush() -> Iterator[None]:
    yield
    metrics.clear_metrics()


# -- templates ---------------------------------------------------------------------------
def test_given_a_confirmation_when_rendered_then_text_and_html_show_the_bib_and_the_amount():
    email = render(EmailMessage.model_validate(confirmation()))
    assert "1042" in email.subject
    for body in (email.text, email.html):
        assert "1042" in body
        assert "Harbour Half" in body
        assert "Half Marathon" in body
        assert "$45.00" in body
        assert "Sunday 13 October 2030" in body
        assert "reg-1" in body
    assert email.html.lstrip().startswith("<!doctype html>")
    assert 'style="' in email.html


def test_given_a_refund_when_rendered_then_both_bodies_state_the_refunded_amount():
    email = render(EmailMessage.model_validate(refund()))
    assert "€45.00" in email.subject
    assert "€45.00" in email.text
    assert "€45.00" in email.html
    assert "refunded" in email.text


def test_a_team_members_refund_told_to_the_payer_says_whose_place_and_that_their_card_was_refunded():
    body = refund()
    body["data"] |= {"payerFirstName": "Cap<tain>", "teamName": "Night & Owls"}
    email = render(EmailMessage.model_validate(body))
    assert email.text.startswith("Hi Cap<tain>,")
    assert "'s place in" in email.text and "(Night & Owls)" in email.text
    assert "refunded to the card that paid for the team" in email.text and "€45.00" in email.subject
    assert "Cap&lt;tain&gt;" in email.html and "Night &amp; Owls" in email.html and "<tain>" not in email.html


def test_given_markup_in_the_data_when_rendered_then_the_html_escapes_every_value():
    hostile = '<script>alert("x")</script>'
    body = confirmation(
        firstName=hostile,
        raceName="Tom & Jerry's 10K",
        bib="<b>7</b>",
        registrationId="r<1>",
    )
    email = render(EmailMessage.model_validate(body))
    assert "<script>" not in email.html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in email.html
    assert "Tom &amp; Jerry&#x27;s 10K" in email.html
    assert "&lt;b&gt;7&lt;/b&gt;" in email.html
    assert "r&lt;1&gt;" in email.html  # the footer too
    assert "<b>7</b>" not in email.html
    # The text body is plain text: shown as typed.
    assert hostile in email.text


def _mail(kind: str, **data: Any) -> RenderedEmail:
    return render(EmailMessage.model_validate({"kind": kind, "dedupKey": f"{kind}:1", "to": "x@example.com",
                                               "data": data}))  # fmt: skip


def test_a_place_offered_says_who_offers_it_the_fee_until_when_and_links_once_escaped():
    offer = {"fromFirstName": "Ada <b>", "raceName": "Harbour Half", "eventName": "10K", "raceDate": "2030-10-13",
             "registrationId": "reg-1", "currency": "EUR", "until": "2030-09-30",
             "acceptUrl": "https://racecap.example/#/transfer/trf.abc"}  # fmt: skip
    paid = _mail("transfer-offer", feeCents=800, **offer)
    assert paid.subject == "Ada <b> offers you their place in Harbour Half"
    assert "8.00" in paid.text and "by 2030-09-30" in paid.text and offer["acceptUrl"] in paid.text
    assert '<a href="https://racecap.example/#/transfer/trf.abc">Take the place over</a>' in paid.html
    assert "Ada &lt;b&gt;" in paid.html and "<b>" not in paid.html
    free = _mail("transfer-offer", feeCents=0, **offer)
    assert "costs nothing" in free.text and "fee" not in free.text


def test_the_new_runner_gets_their_own_confirmation_and_the_old_runner_a_notice():
    mine = confirmation()["data"]
    taken = _mail("transfer-confirmed", **mine)
    assert taken.subject == "The place in Harbour Half is yours (bib 1042)" and "1042" in taken.text
    away = _mail("transferred-away", firstName="Ada", raceName="Harbour Half", registrationId="reg-1")
    assert away.subject == "Your place in Harbour Half was taken over"
    assert "no longer works" in away.text and "Ada" in away.html


def test_a_switch_says_the_new_event_and_bib_and_any_refund_escaped():
    moved = {"firstName": "Ada <b>", "raceName": "Harbour Half", "fromEventName": "10K", "eventName": "5K",
             "bib": 7, "registrationId": "reg-1", "currency": "eur", "raceDate": "2027-05-01"}  # fmt: skip
    cheaper = _mail("switch-confirmed", refundCents=2000, manageUrl="https://racecap.example/#/my/abc", **moved)
    assert cheaper.subject == "Harbour Half: you are in 5K now (bib 7)"
    assert (
        "from 10K to 5K" in cheaper.text
        and "€20.00" in cheaper.text
        and "https://racecap.example/#/my/abc" in cheaper.text
    )
    assert "Ada &lt;b&gt;" in cheaper.html and "<b>" not in cheaper.html
    same = _mail("switch-confirmed", **moved)
    assert "refunded" not in same.text and "manage" not in same.text


def test_a_deferral_gives_the_runner_their_code_and_what_it_takes_off():
    deferred = _mail("deferred", firstName="Ada", raceName="Harbour Half", eventName="10K", registrationId="reg-1",
                     code="DEFER-ABC123", creditCents=4000, currency="eur")  # fmt: skip
    assert deferred.subject == "Harbour Half: your place is deferred (code DEFER-ABC123)"
    assert "DEFER-ABC123" in deferred.text and "€40.00" in deferred.text and "no refund" in deferred.text
    assert "this email address only" in deferred.html


def test_a_closed_list_tells_a_runner_with_an_offer_out_that_the_place_went_with_it():
    data = {"firstName": "Ada", "raceName": "Harbour Half", "eventName": "10K", "entryId": "wl-1"}
    waiting = _mail("waitlist-closed", **data)
    offered = _mail("waitlist-closed", **data, offerEnded=True)
    assert waiting.subject == offered.subject == "The waitlist for Harbour Half — 10K has closed"
    assert "not claimed" not in waiting.text and "from it.\nThank you" in waiting.text
    assert "not claimed before it closed" in offered.text and "not claimed before it closed" in offered.html


def test_a_change_of_address_asks_the_new_one_and_tells_the_old_one():
    asked = _mail("email-change", firstName="Ada", raceName="Harbour Half", eventName="10K", registrationId="reg-1",
                  confirmUrl="https://racecap.example/#/my/email/eml.abc")  # fmt: skip
    assert "within a day" in asked.text and "https://racecap.example/#/my/email/eml.abc" in asked.html
    moved = _mail("email-moved", firstName="Ada", raceName="Harbour Half", registrationId="reg-1")
    assert moved.subject == "Your registration for Harbour Half moved to another address"
    changed = _mail("email-changed", **confirmation()["data"])
    assert changed.subject == "Your registration for Harbour Half now uses this address (bib 1042)"


def test_given_line_breaks_in_the_data_when_rendered_then_the_subject_stays_one_line():
    email = render(EmailMessage.model_validate(confirmation(raceName="Harbour\r\nBcc: x@evil.example")))
    assert "\n" not in email.subject
    assert "\r" not in email.subject


@pytest.mark.parametrize(
    ("cents", "currency", "expected"),
    [
        (4500, "USD", "$45.00"),
        (123456, "usd", "$1,234.56"),
        (4500, "EUR", "€45.00"),
        (4500, "JPY", "¥4,500"),
        (4500, "CHF", "45.00 CHF"),
        (4500, "KWD", "4.500 KWD"),
        (0, "GBP", "£0.00"),
    ],
)
def test_money_is_formatted_with_the_currencys_minor_units(cents, currency, expected):
    assert format_money(cents, currency) == expected


# -- the message contract -------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        {k: v for k, v in confirmation().items() if k != "to"},
        {**confirmation(), "to": "not-an-email"},
        {**confirmation(), "to": "a@b.example\nBcc: c@d.example"},
        {**confirmation(), "dedupKey": ""},
        {**confirmation(), "kind": ""},
        {**confirmation(), "data": ["not", "an", "object"]},
    ],
)
def test_the_message_model_rejects_bad_envelopes(body):
    with pytest.raises(ValidationError):
        EmailMessage.model_validate(body)
    with pytest.raises(PoisonMessage):
        parse_message(json.dumps(body))


@pytest.mark.parametrize("raw", ["", "not json", "[1, 2]", "null"])
def test_a_body_that_is_not_a_json_object_is_poison(raw):
    with pytest.raises(PoisonMessage):
        parse_message(raw)


def test_an_unknown_kind_is_poison():
    message = parse_message(json.dumps({**confirmation(), "kind": "horoscope"}))
    with pytest.raises(PoisonMessage, match="horoscope"):
        render(message)


@pytest.mark.parametrize(
    "body",
    [
        confirmation(bib=None),
        confirmation(amountCents=-1),
        confirmation(currency="dollars"),
        {**confirmation(), "data": {"firstName": "Ada"}},
        refund(raceName=""),
    ],
)
def test_data_missing_or_wrong_for_its_kind_is_poison(body):
    with pytest.raises(PoisonMessage):
        render(parse_message(json.dumps(body)))


# -- the SES adapter ---------------------------------------------------------------------------
class _FakeSes:
    def __init__(self, error: tuple[str, int] | None = None) -> None:
        self.error = error
        self.requests: list[dict[str, Any]] = []

    def send_email(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        if self.error:
            code, status = self.error
            response: Any = {
                "Error": {"Code": code, "Message": "no"},
                "ResponseMetadata": {"HTTPStatusCode": status},
            }
            raise ClientError(response, "SendEmail")
        return {"MessageId": "ses-1"}


RENDERED = RenderedEmail("Subject", "text", "<p>html</p>")


def test_the_ses_mailer_sends_both_bodies_and_safe_tags():
    ses = _FakeSes()
    assert (
        SesMailer(ses, "Racecap <no-reply@racecap.example>").send(
            "runner@example.com", RENDERED, {"kind": "confirmation", "registrationId": "reg:1 2"}
        )
        == "ses-1"
    )
    request = ses.requests[0]
    assert request["Destination"] == {"ToAddresses": ["runner@example.com"]}
    assert request["Content"]["Simple"]["Body"]["Html"]["Data"] == "<p>html</p>"
    assert request["Content"]["Simple"]["Body"]["Text"]["Data"] == "text"
    assert {"Name": "registrationId", "Value": "reg_1_2"} in request["EmailTags"]


@pytest.mark.parametrize(
    "error",
    [("TooManyRequestsException", 429), ("Throttling", 400), ("LimitExceededException", 400), ("Other", 429)],
)
def test_ses_throttling_becomes_mail_throttled(error):
    with pytest.raises(MailThrottled):
        SesMailer(_FakeSes(error), "from@example.com").send("a@example.com", RENDERED, {})


def test_the_ses_client_makes_one_attempt_per_send(placeholder_env: dict[str, str]) -> None:
    # botocore would retry a TooManyRequestsException by itself, outside the shared rate
    # limiter; the Notifier's own retries take a slot for each attempt instead.
    from racecap import clients

    assert clients.ses().meta.config.retries == {"total_max_attempts": 1, "mode": "standard"}
    assert clients.ses().meta.service_model.service_name == "sesv2"


def test_other_ses_errors_propagate_unchanged():
    with pytest.raises(ClientError, match="MessageRejected"):
        SesMailer(_FakeSes(("MessageRejected", 400)), "from@example.com").send("a@example.com", RENDERED, {})


# -- the rate limiter -----------------------------------------------------------------------
class _DeadRedis:
    calls = 0

    def __getattr__(self, name: str) -> Any:
        def fail(*_a: Any, **_k: Any) -> Any:
            _DeadRedis.calls += 1
            raise redis.ConnectionError("down")

        return fail


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_given_redis_down_when_sending_then_this_instance_keeps_to_its_share_of_the_rate():
    _DeadRedis.calls = 0
    clock = _Clock()
    limiter = SendRateLimiter(
        _DeadRedis,  # type: ignore[arg-type]
        10,
        max_instances=2,
        headroom=0.0,
        clock=clock,
        sleep=clock.sleep,
    )
    sent_at = []
    for _ in range(11):
        limiter.acquire()
        sent_at.append(clock.now)
    # rate / max_instances = 5 per second: 0.2 s apart, so 2 instances together make 10/s.
    gaps = [b - a for a, b in itertools.pairwise(sent_at)]
    assert gaps == pytest.approx([0.2] * 10)
    assert sum(1 for t in sent_at if t - sent_at[0] < 1.0) == 5
    # The breaker: after the first failure Redis is left alone for the cooldown.
    assert _DeadRedis.calls == 1
    assert not limiter.shared


def test_given_the_cooldown_has_passed_then_the_limiter_tries_redis_again():
    _DeadRedis.calls = 0
    clock = _Clock()
    limiter = SendRateLimiter(
        _DeadRedis,  # type: ignore[arg-type]
        10,
        cooldown_s=5,
        clock=clock,
        sleep=clock.sleep,
    )
    limiter.acquire()
    clock.now += 5.0
    assert limiter.shared
    limiter.acquire()
    assert _DeadRedis.calls == 2


def test_given_a_caller_wakes_late_then_it_gives_up_its_slot_and_takes_the_next_free_one():
    clock = _Clock()
    oversleep = [0.05]

    def sleep(seconds: float) -> None:
        clock.sleep(seconds + (oversleep.pop() if oversleep else 0.0))

    limiter = SendRateLimiter(
        _DeadRedis,  # type: ignore[arg-type]
        10,
        max_instances=2,
        headroom=0.0,
        clock=clock,
        sleep=sleep,
    )
    start = clock.now
    limiter.acquire()  # slot at start, no wait
    limiter.acquire()  # slot at +0.2, but wakes at +0.25: too late to send into that window
    # A fresh slot after the abandoned one, never a send squeezed between two slots.
    assert clock.now == pytest.approx(start + 0.4)


def test_headroom_spaces_slots_slightly_wider_than_one_over_rate():
    limiter = SendRateLimiter(_DeadRedis, 10, headroom=0.05)  # type: ignore[arg-type]
    assert limiter.interval == pytest.approx(0.105)


def test_the_fallback_divides_by_the_email_senders_reserved_concurrency():
    assert blueprint.function("EmailSender").reserved_concurrency == DEFAULT_MAX_INSTANCES


# -- delivering one record (fakes for SES, the limiter and the idempotency store) --------------
class InMemoryPersistence(BasePersistenceLayer):
    """Powertools' idempotency store contract, in a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.records: dict[str, DataRecord] = {}

    def _get_record(self, idempotency_key: str) -> DataRecord:
        try:
            return self.records[idempotency_key]
        except KeyError:
            raise IdempotencyItemNotFoundError from None

    def _put_record(self, data_record: DataRecord) -> None:
        existing = self.records.get(data_record.idempotency_key)
        if existing is not None and not existing.is_expired:
            raise IdempotencyItemAlreadyExistsError(old_data_record=existing)
        self.records[data_record.idempotency_key] = data_record

    def _update_record(self, data_record: DataRecord) -> None:
        self.records[data_record.idempotency_key] = data_record

    def _delete_record(self, data_record: DataRecord) -> None:
        self.records.pop(data_record.idempotency_key, None)


class FakeMailer:
    def __init__(self, throttle_first: int = 0) -> None:
        self.throttle_first = throttle_first
        self.sent: list[tuple[str, RenderedEmail]] = []
        self.attempts = 0

    def send(self, to: str, rendered: RenderedEmail, tags: Any) -> str:
        self.attempts += 1
        if self.attempts <= self.throttle_first:
            raise MailThrottled("slow down")
        self.sent.append((to, rendered))
        return f"ses-{len(self.sent)}"


class CountingLimiter:
    def __init__(self) -> None:
        self.acquired = 0

    def acquire(self) -> float:
        self.acquired += 1
        return 0.0


def notifier(mailer: FakeMailer, limiter: CountingLimiter | None = None, **kw: Any) -> Notifier:
    return Notifier(mailer, limiter or CountingLimiter(), InMemoryPersistence(), sleep=lambda _s: None, **kw)


def record(body: dict[str, Any], message_id: str = "m-1") -> SQSRecord:
    return SQSRecord({"messageId": message_id, "receiptHandle": "rh", "body": json.dumps(body)})


def context() -> Any:
    return LambdaContext("EmailSender", 512, 10)


def test_given_the_same_dedup_key_three_times_then_one_email_is_sent():
    mailer = FakeMailer()
    n = notifier(mailer)
    ids = [n.handle_record(record(confirmation(), f"m-{i}"), context()) for i in range(3)]
    assert len(mailer.sent) == 1
    assert ids == ["ses-1"] * 3


def test_given_ses_throttles_twice_then_the_third_attempt_sends_and_each_attempt_waited_for_a_slot():
    mailer, limiter = FakeMailer(throttle_first=2), CountingLimiter()
    assert notifier(mailer, limiter).handle_record(record(confirmation()), context()) == "ses-1"
    assert mailer.attempts == 3
    assert limiter.acquired == 3


def test_given_ses_keeps_throttling_then_the_record_fails_and_its_redelivery_still_sends():
    mailer = FakeMailer(throttle_first=4)
    n = notifier(mailer, retry=RetryPolicy(max_attempts=3))
    with pytest.raises(MailThrottled):
        n.handle_record(record(confirmation()), context())
    assert mailer.sent == []
    # SQS redelivers: the failed attempt left no idempotency record behind, so it sends.
    assert n.handle_record(record(confirmation()), context()) == "ses-1"
    assert len(mailer.sent) == 1


def test_given_too_little_time_left_then_the_record_is_deferred_without_sending():
    mailer = FakeMailer()
    short: Any = LambdaContext("EmailSender", 512, 1)
    with pytest.raises(Exception, match="left in the invocation"):
        notifier(mailer).handle_record(record(confirmation()), short)
    assert mailer.attempts == 0


def test_given_a_poison_message_then_it_fails_before_anything_is_sent_or_stored():
    mailer = FakeMailer()
    persistence = InMemoryPersistence()
    n = Notifier(mailer, CountingLimiter(), persistence)
    with pytest.raises(PoisonMessage):
        n.handle_record(record({**confirmation(), "kind": "horoscope"}), context())
    assert mailer.attempts == 0
    assert persistence.records == {}


class RecordingLog:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.writes = 0
        self.items: list[tuple[str, str, str, str]] = []

    def record(self, registration_id: str, kind: str, dedup_key: str, ses_message_id: str, at: Any) -> None:
        if self.fail:
            raise RuntimeError("table unavailable")
        self.items.append((registration_id, kind, dedup_key, ses_message_id))

    def record_many(self, deliveries: Any) -> None:
        if self.fail:
            raise RuntimeError("table unavailable")
        self.writes += 1
        self.items += [(d.registration_id, d.kind, d.dedup_key, d.ses_message_id) for d in deliveries]


def test_given_an_email_is_sent_then_the_delivery_log_has_it_once_duplicates_included():
    log = RecordingLog()
    n = notifier(FakeMailer(), deliveries=log)
    body = confirmation()
    for i in range(3):
        n.handle_record(record(body, f"m-{i}"), context())
    assert log.items == [(body["data"]["registrationId"], "confirmation", body["dedupKey"], "ses-1")]


def test_given_the_delivery_log_fails_then_the_email_is_not_sent_again():
    mailer = FakeMailer()
    n = notifier(mailer, deliveries=RecordingLog(fail=True))
    body = confirmation()
    assert n.handle_record(record(body), context()) == "ses-1"
    assert n.handle_record(record(body, "m-2"), context()) == "ses-1"  # the redelivery finds it sent
    assert len(mailer.sent) == 1


def test_a_batchs_deliveries_are_logged_in_one_write_when_the_batch_is_done():
    log = RecordingLog()
    n = notifier(FakeMailer(), deliveries=log)
    bodies = [confirmation(registrationId=f"reg-{i}") for i in range(3)]
    bodies = [{**b, "dedupKey": f"confirmation:reg-{i}"} for i, b in enumerate(bodies)]
    with n.batched():
        for i, body in enumerate(bodies):
            n.handle_record(record(body, f"m-{i}"), context())
        assert log.items == []  # nothing written mid-batch
    assert log.writes == 1 and [item[0] for item in log.items] == ["reg-0", "reg-1", "reg-2"]


def test_a_batchs_failed_log_write_is_counted_and_the_emails_stay_sent_once():
    mailer = FakeMailer()
    n = notifier(mailer, deliveries=RecordingLog(fail=True))
    with n.batched():
        assert n.handle_record(record(confirmation()), context()) == "ses-1"
    assert n.handle_record(record(confirmation(), "m-2"), context()) == "ses-1"  # redelivered: not sent again
    assert len(mailer.sent) == 1


def test_a_ballot_asks_each_runner_to_confirm_then_tells_each_their_one_result():
    data = {"firstName": "Bo", "raceName": "Harbour Half", "eventName": "10K", "applicationId": "app_1",
            "confirmUrl": "https://racecap.example/#/ballot/bal.abc", "closesAt": "2027-01-10 18:00 CET"}  # fmt: skip
    alone = _mail("ballot-confirm", **data)
    partner = _mail("ballot-confirm", **data, groupSize=3, appliedBy="Ada <b>")
    assert alone.subject == "Confirm your ballot application for Harbour Half — 10K"
    assert "Someone (we hope you)" in alone.text and "group" not in alone.text and "2027-01-10 18:00 CET" in alone.text
    assert "Ada <b> applied" in partner.text and "in a group of 3 drawn together" in partner.text
    assert "Ada &lt;b&gt;" in partner.html and "https://racecap.example/#/ballot/bal.abc" in partner.html
    result = _mail("ballot-result", firstName="Bo", raceName="Harbour Half", eventName="10K", applicationId="app_1",
                   position=1234, raceUrl="https://racecap.example/#/races/r1")  # fmt: skip
    assert result.subject == "The ballot for Harbour Half — 10K: you are number 1,234 on the waitlist"
    assert "number 1,234" in result.text and "https://racecap.example/#/races/r1" in result.html
    offer = {"firstName": "Bo", "raceName": "Harbour Half", "eventName": "10K", "entryId": "wl-1", "priceCents": 4000,
             "claimUrl": "https://racecap.example/#/waitlist/offer/wto.x", "expiresAt": "2027-02-01T10:00:00+00:00",
             "currency": "eur"}  # fmt: skip
    won = _mail("waitlist-offer", **offer, ballot=True)
    assert won.subject == "You have a place in Harbour Half — 10K: the ballot drew you"
    assert "€40.00" in won.text and "2027-02-01 10:00" in won.text and "wto.x" in won.html
    assert "next on the waitlist" in _mail("waitlist-offer", **offer).text
