"""The emails Racecap sends: the queue message contract and one template per kind.

Producers (the registration writer, refunds) put an ``EmailMessage`` on the Emails queue;
the EmailSender renders it here and sends it. Each kind has a text and an HTML body.
Every value is HTML-escaped in the HTML body, and subjects are single lines.

A message that can never be rendered (not JSON, a broken envelope, an unknown kind, data
missing for its kind) raises ``PoisonMessage``: retrying cannot help, so it is failed at
once and the queue's redrive policy moves it to the dead-letter queue for a person to see.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from datetime import date
from string import Template
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator

from racecap.domain import EmailMessage, RenderedEmail
from racecap.models import Model
from racecap.money import decimals, in_units

__all__ = ["EmailMessage", "PoisonMessage", "RenderedEmail", "parse_message", "render", "tags_for"]


class PoisonMessage(Exception):
    """A message that would never succeed; it goes to the DLQ without retries."""


# -- the contract (the envelope, EmailMessage, is in racecap.domain) -----------------
class _Data(Model):
    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    registrationId: str = Field(min_length=1, max_length=100)
    amountCents: int = Field(ge=0)
    currency: str = Field(pattern=r"^[A-Za-z]{3}$")

    @field_validator("currency")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()


class ConfirmationData(_Data):
    lastName: str = Field(min_length=1, max_length=200)
    bib: str = Field(min_length=1, max_length=20)
    raceDate: str = Field(min_length=1, max_length=40)


class RefundData(_Data):
    pass


class UnmatchedRefundData(Model):
    """A payment no place could be given for, refunded automatically (names may be unknown)."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    raceName: str = Field(default="the race", min_length=1, max_length=300)
    registrationId: str = Field(min_length=1, max_length=100)
    amountCents: int = Field(ge=0)
    currency: str = Field(pattern=r"^[A-Za-z]{3}$")


def parse_message(body: str) -> EmailMessage:
    """The message on the queue, validated; ``PoisonMessage`` if it never can be."""
    try:
        return EmailMessage.model_validate(json.loads(body))
    except (ValueError, TypeError, ValidationError) as exc:
        raise PoisonMessage(f"not a valid email message: {exc}") from exc


def render(message: EmailMessage) -> RenderedEmail:
    template = TEMPLATES.get(message.kind)
    if template is None:
        raise PoisonMessage(f"unknown email kind {message.kind!r}")
    return template(message.data)


def tags_for(message: EmailMessage) -> dict[str, str]:
    """SES message tags: what a bounce or complaint report can be traced back with."""
    tags = {"kind": message.kind}
    registration_id = message.data.get("registrationId")
    if isinstance(registration_id, str) and registration_id:
        tags["registrationId"] = registration_id
    return tags


# -- formatting ----------------------------------------------------------------------
# Symbols for the currencies races use most (minor units: racecap.money, as the provider counts them).
_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "CAD": "CA$", "AUD": "A$", "NZD": "NZ$"}


def format_money(amount_cents: int, currency: str) -> str:
    """``2500, "USD"`` → ``$25.00``; ``2500, "JPY"`` → ``¥2,500``; ``2500, "CHF"`` → ``25.00 CHF``."""
    currency = currency.upper()
    number = f"{in_units(amount_cents, currency):,.{decimals(currency)}f}"
    symbol = _SYMBOLS.get(currency)
    return f"{symbol}{number}" if symbol else f"{number} {currency}"


def format_race_date(value: str) -> str:
    try:
        day = date.fromisoformat(value)
    except ValueError:
        return value  # not ISO: show what the director wrote
    return f"{day:%A} {day.day} {day:%B %Y}"


def _one_line(value: str) -> str:
    return " ".join(value.split())


def _escaped(values: dict[str, str]) -> dict[str, str]:
    return {k: html.escape(v, quote=True) for k, v in values.items()}


def _data(model: type[_Data], data: dict[str, Any]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise PoisonMessage(f"{model.__name__} is invalid: {exc}") from exc


# -- templates -----------------------------------------------------------------------
# Inline CSS only: most mail clients drop <style> blocks and external sheets.
_HTML_FRAME = Template(
    """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>$title</title></head>
<body style="margin:0;padding:0;background:#f4f5f7;font-family:Arial,Helvetica,sans-serif;color:#1f2933">
<div style="max-width:560px;margin:0 auto;padding:24px 16px">
<div style="background:#ffffff;border-radius:8px;padding:24px">
$content
</div>
<p style="font-size:12px;color:#66788a;margin:16px 0 0">Racecap · registration $registrationId</p>
</div>
</body></html>
"""
)

_CONFIRMATION_TEXT = Template(
    """Hi $firstName,

You're registered for $raceName — $eventName.

  Runner:        $firstName $lastName
  Bib:           $bib
  Race day:      $raceDate
  Paid:          $amount
  Registration:  $registrationId

Keep this email: your bib number is what you collect at packet pick-up.

See you at the start line!
Racecap
"""
)

_CONFIRMATION_HTML = Template(
    """<h1 style="font-size:22px;margin:0 0 12px">You're in, $firstName!</h1>
<p style="margin:0 0 16px">You're registered for <strong>$raceName</strong> — $eventName.</p>
<p style="margin:0 0 16px;text-align:center">
<span style="display:inline-block;border:2px solid #1f2933;border-radius:6px;padding:8px 20px">
<span style="display:block;font-size:12px;letter-spacing:1px">BIB</span>
<span style="display:block;font-size:32px;font-weight:bold">$bib</span></span></p>
<table role="presentation" style="border-collapse:collapse;width:100%;font-size:14px;line-height:1.8">
<tr><td style="color:#66788a">Runner</td><td>$firstName $lastName</td></tr>
<tr><td style="color:#66788a">Race day</td><td>$raceDate</td></tr>
<tr><td style="color:#66788a">Paid</td><td>$amount</td></tr>
<tr><td style="color:#66788a">Registration</td><td>$registrationId</td></tr>
</table>
<p style="margin:16px 0 0">Keep this email: your bib number is what you collect at packet pick-up.</p>"""
)

_REFUND_TEXT = Template(
    """Hi $firstName,

Your registration for $raceName — $eventName has been cancelled$refunded

  Registration:  $registrationId

Racecap
"""
)

_REFUND_HTML = Template(
    """<h1 style="font-size:22px;margin:0 0 12px">Your refund is on its way</h1>
<p style="margin:0 0 16px">Hi $firstName, your registration for <strong>$raceName</strong> — $eventName
has been cancelled$refundedHtml</p>
<p style="margin:0;font-size:14px;color:#66788a">Registration $registrationId</p>"""
)


def _page(title: str, content: str, registration_id: str) -> str:
    """Wrap already-escaped ``content`` in the common frame."""
    return _HTML_FRAME.substitute(
        title=html.escape(title), content=content, registrationId=html.escape(registration_id)
    )


def render_confirmation(raw: dict[str, Any]) -> RenderedEmail:
    d: ConfirmationData = _data(ConfirmationData, raw)
    values = {
        "firstName": d.firstName,
        "lastName": d.lastName,
        "raceName": d.raceName,
        "eventName": d.eventName,
        "bib": d.bib,
        "raceDate": format_race_date(d.raceDate),
        "amount": format_money(d.amountCents, d.currency) if d.amountCents else "Nothing (a free entry)",
        "registrationId": d.registrationId,
    }
    subject = _one_line(f"You're registered: {d.raceName} — {d.eventName} (bib {d.bib})")
    content = _CONFIRMATION_HTML.substitute(_escaped(values))
    text = _CONFIRMATION_TEXT.substitute(values)
    return RenderedEmail(subject, text, _page(subject, content, d.registrationId))


def render_refund(raw: dict[str, Any]) -> RenderedEmail:
    d: RefundData = _data(RefundData, raw)
    values = {
        "firstName": d.firstName,
        "raceName": d.raceName,
        "eventName": d.eventName,
        "amount": format_money(d.amountCents, d.currency),
        "registrationId": d.registrationId,
    }
    # The director may cancel with no refund (or the entry was free): say so, not "0.00 refunded".
    if d.amountCents:
        tail = " and {} has been refunded to your original payment method.\nIt can take a few days to appear."
        subject = _one_line(f"Refund for {d.raceName} — {d.eventName}: {values['amount']}")
    else:
        tail = "{}. No payment was refunded."
        subject = _one_line(f"Cancelled: {d.raceName} — {d.eventName}")
    escaped = _escaped(values)
    refunded_html = tail.format(f"<strong>{escaped['amount']}</strong>" if d.amountCents else "")
    content = _REFUND_HTML.substitute(escaped | {"refundedHtml": refunded_html})
    text = _REFUND_TEXT.substitute(values | {"refunded": tail.format(values["amount"] if d.amountCents else "")})
    return RenderedEmail(subject, text, _page(subject, content, d.registrationId))


_UNMATCHED_TEXT = Template(
    """Hello,

We received your payment of $amount for $raceName, but your hold on the place had already
ended (it expired or was released) before the payment reached us, so we could not register
you. We have refunded the full $amount to your original payment method; it can take a few
days to appear. You are welcome to hold a new place if any are left.

  Reference:  $registrationId

Racecap
"""
)

_UNMATCHED_HTML = Template(
    """<h1 style="font-size:22px;margin:0 0 12px">We refunded your payment</h1>
<p style="margin:0 0 16px">We received your payment of <strong>$amount</strong> for <strong>$raceName</strong>,
but your hold on the place had already ended before the payment reached us, so we could not register you.
The full amount has been refunded to your original payment method; it can take a few days to appear.</p>
<p style="margin:0;font-size:14px;color:#66788a">Reference $registrationId</p>"""
)


def render_unmatched_refund(raw: dict[str, Any]) -> RenderedEmail:
    d: UnmatchedRefundData = _data(UnmatchedRefundData, raw)  # type: ignore[arg-type]
    values = {
        "raceName": d.raceName,
        "amount": format_money(d.amountCents, d.currency.upper()),
        "registrationId": d.registrationId,
    }
    subject = _one_line(f"Your payment for {d.raceName} was refunded: {values['amount']}")
    content = _UNMATCHED_HTML.substitute(_escaped(values))
    text = _UNMATCHED_TEXT.substitute(values)
    return RenderedEmail(subject, text, _page(subject, content, d.registrationId))


TEMPLATES: dict[str, Callable[[dict[str, Any]], RenderedEmail]] = {
    "confirmation": render_confirmation,
    "refund": render_refund,
    "unmatched_refund": render_unmatched_refund,
}
