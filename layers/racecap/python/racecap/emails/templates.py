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
from collections.abc import Callable
from datetime import date
from string import Template
from typing import Any

from pydantic import ValidationError

from racecap.emails.models import (
    AnswerLine,
    BallotConfirmData,
    BallotResultData,
    ConfirmationData,
    DeferredData,
    EmailChangeData,
    EmailMessage,
    LinkData,
    MovedData,
    PoisonMessage,
    RefundData,
    RenderedEmail,
    SwitchData,
    TransferOfferData,
    UnmatchedRefundData,
    WaitlistClosedData,
    WaitlistConfirmData,
    WaitlistJoinedData,
    WaitlistOfferData,
    _Data,
)
from racecap.money import decimals, in_units


def render(message: EmailMessage) -> RenderedEmail:
    template = TEMPLATES.get(message.kind)
    if template is None:
        raise PoisonMessage(f"unknown email kind {message.kind!r}")
    return template(message.data)


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
<p style="font-size:12px;color:#66788a;margin:16px 0 0">Racecap · $reference</p>
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


def _page(title: str, content: str, registration_id: str, what: str = "registration") -> str:
    """Wrap already-escaped ``content`` in the common frame (its footer names the ``what``: a
    registration, or a waitlist entry)."""
    return _HTML_FRAME.substitute(
        title=html.escape(title), content=content, reference=html.escape(f"{what} {registration_id}")
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
    content = _CONFIRMATION_HTML.substitute(_escaped(values)) + _answers_html(d.answers) + _manage_html(d.manageUrl)
    text = _CONFIRMATION_TEXT.substitute(values) + _answers_text(d.answers) + _manage_text(d.manageUrl)
    return RenderedEmail(subject, text, _page(subject, content, d.registrationId))


def _answers_text(answers: list[AnswerLine]) -> str:
    if not answers:
        return ""
    lines = "".join(f"  {a.label}: {_one_line(a.text)}\n" for a in answers)
    return f"\nYour answers (tell the organiser if something is wrong):\n{lines}"


def _answers_html(answers: list[AnswerLine]) -> str:
    if not answers:
        return ""
    cell = '<td style="color:#66788a;padding-right:12px">'
    rows = "".join(f"<tr>{cell}{html.escape(a.label)}</td><td>{html.escape(a.text)}</td></tr>" for a in answers)
    table = '<table role="presentation" style="border-collapse:collapse;width:100%;font-size:14px;line-height:1.8">'
    return (
        f'<h2 style="font-size:16px;margin:20px 0 8px">Your answers</h2>{table}{rows}</table>'
        '<p style="margin:8px 0 0;font-size:13px;color:#66788a">Tell the organiser if something is wrong.</p>'
    )


_MANAGE = "See, correct or cancel your registration (keep this link to yourself: it is your key to it):"


def _manage_text(url: str | None) -> str:
    return f"\n{_MANAGE}\n{url}\n" if url else ""


def _manage_html(url: str | None) -> str:
    if not url:
        return ""
    return (
        f'<p style="margin:20px 0 8px;font-size:14px">{html.escape(_MANAGE)}</p>'
        f'<p style="margin:0"><a href="{html.escape(url, quote=True)}" style="display:inline-block;background:#1f2933;'
        'color:#ffffff;padding:10px 18px;border-radius:6px;text-decoration:none">My registration</a></p>'
    )


_LINK_TEXT = Template(
    """Hi $firstName,

Here is the link to your registration for $raceName — $eventName ($raceDate)$state:

$manageUrl

Keep it to yourself: anyone with it can change or cancel your registration.
If you did not ask for it, you can ignore this email.

Racecap
"""
)


_LINK_HTML = Template(
    """<h1 style="font-size:22px;margin:0 0 12px">Your registration</h1>
<p style="margin:0 0 16px">Hi $firstName, here is the link to your registration for <strong>$raceName</strong>
— $eventName ($raceDate)$state.</p>
<p style="margin:0 0 16px"><a href="$manageUrl" style="display:inline-block;background:#1f2933;color:#ffffff;
padding:10px 18px;border-radius:6px;text-decoration:none">My registration</a></p>
<p style="margin:0;font-size:13px;color:#66788a">Keep it to yourself: anyone with it can change or cancel your
registration. If you did not ask for it, you can ignore this email.</p>"""
)


def render_link(raw: dict[str, Any]) -> RenderedEmail:
    d: LinkData = _data(LinkData, raw)  # type: ignore[arg-type]
    values = {
        "firstName": d.firstName,
        "raceName": d.raceName,
        "eventName": d.eventName,
        "raceDate": format_race_date(d.raceDate),
        "state": " (cancelled)" if d.cancelled else "",
        "manageUrl": d.manageUrl,
    }
    subject = _one_line(f"Your registration for {d.raceName}: the link you asked for")
    content = _LINK_HTML.substitute(_escaped(values))
    return RenderedEmail(subject, _LINK_TEXT.substitute(values), _page(subject, content, d.registrationId))


_CHANGE_TEXT = Template(
    """Hi $firstName,

Someone (we hope you) asked to use this address for a registration for $raceName — $eventName.
To confirm it, open this link within a day:

$confirmUrl

If you did not ask for it, ignore this email: nothing changes.

Racecap
"""
)


_CHANGE_HTML = Template(
    """<h1 style="font-size:22px;margin:0 0 12px">Confirm your new address</h1>
<p style="margin:0 0 16px">Hi $firstName, someone (we hope you) asked to use this address for a registration for
<strong>$raceName</strong> — $eventName. To confirm it, open this link within a day:</p>
<p style="margin:0 0 16px"><a href="$confirmUrl" style="display:inline-block;background:#1f2933;color:#ffffff;
padding:10px 18px;border-radius:6px;text-decoration:none">Confirm this address</a></p>
<p style="margin:0;font-size:13px;color:#66788a">If you did not ask for it, ignore this email: nothing changes.</p>"""
)


def render_email_change(raw: dict[str, Any]) -> RenderedEmail:
    d: EmailChangeData = _data(EmailChangeData, raw)  # type: ignore[arg-type]
    values = {
        "firstName": d.firstName,
        "raceName": d.raceName,
        "eventName": d.eventName,
        "confirmUrl": d.confirmUrl,
    }
    subject = _one_line(f"Confirm your new email address for {d.raceName}")
    content = _CHANGE_HTML.substitute(_escaped(values))
    return RenderedEmail(subject, _CHANGE_TEXT.substitute(values), _page(subject, content, d.registrationId))


def render_email_moved(raw: dict[str, Any]) -> RenderedEmail:
    d: MovedData = _data(MovedData, raw)  # type: ignore[arg-type]
    text = (
        f"Hi {d.firstName},\n\nYour registration for {d.raceName} now uses another email address, as asked from "
        "its link and confirmed from the new address. Links to it sent to this address no longer work.\n\n"
        "If you did not ask for this, contact the race's organiser.\n\nRacecap\n"
    )
    subject = _one_line(f"Your registration for {d.raceName} moved to another address")
    content = "".join(f'<p style="margin:0 0 12px">{html.escape(line)}</p>' for line in text.split("\n\n"))
    return RenderedEmail(subject, text, _page(subject, content, d.registrationId))


def render_email_changed(raw: dict[str, Any]) -> RenderedEmail:
    """The registration's details at its new address: the confirmation's body, its own subject."""
    confirmation = render_confirmation(raw)
    d: ConfirmationData = _data(ConfirmationData, raw)
    subject = _one_line(f"Your registration for {d.raceName} now uses this address (bib {d.bib})")
    return RenderedEmail(subject, confirmation.text, confirmation.html)


def render_transfer_offer(raw: dict[str, Any]) -> RenderedEmail:
    d: TransferOfferData = _data(TransferOfferData, raw)  # type: ignore[arg-type]
    fee = (
        f"Taking it over costs a {format_money(d.feeCents, d.currency)} transfer fee, paid when you accept."
        if d.feeCents
        else "Taking it over costs nothing."
    )
    text = (
        f"Hi,\n\n{d.fromFirstName} offers you their place in {d.raceName} — {d.eventName} ({d.raceDate}). "
        f"{fee}\n\nTo take it over, open this link by {d.until} and enter your details (the event's questions "
        f"and waiver are asked as at registration):\n\n{d.acceptUrl}\n\n"
        "If you do not want it, ignore this email: the place stays theirs.\n\nRacecap\n"
    )
    subject = _one_line(f"{d.fromFirstName} offers you their place in {d.raceName}")
    content = "".join(f'<p style="margin:0 0 12px">{_linked(line, d.acceptUrl)}</p>' for line in text.split("\n\n"))
    return RenderedEmail(subject, text, _page(subject, content, d.registrationId))


def _linked(line: str, url: str) -> str:
    """A paragraph, escaped; the one that is the link, as a link."""
    if line == url:
        return f'<a href="{html.escape(url)}">Take the place over</a>'
    return html.escape(line)


def render_transfer_confirmed(raw: dict[str, Any]) -> RenderedEmail:
    """The new runner's confirmation: the confirmation's body, its own subject."""
    confirmation = render_confirmation(raw)
    d: ConfirmationData = _data(ConfirmationData, raw)
    subject = _one_line(f"The place in {d.raceName} is yours (bib {d.bib})")
    return RenderedEmail(subject, confirmation.text, confirmation.html)


def render_transferred_away(raw: dict[str, Any]) -> RenderedEmail:
    d: MovedData = _data(MovedData, raw)  # type: ignore[arg-type]
    text = (
        f"Hi {d.firstName},\n\nYour place in {d.raceName} is now the runner's you offered it to: they accepted "
        "it. Your link to the registration no longer works, and your details were removed from it.\n\n"
        "If you did not offer it, contact the race's organiser.\n\nRacecap\n"
    )
    subject = _one_line(f"Your place in {d.raceName} was taken over")
    content = "".join(f'<p style="margin:0 0 12px">{html.escape(line)}</p>' for line in text.split("\n\n"))
    return RenderedEmail(subject, text, _page(subject, content, d.registrationId))


def render_switch_confirmed(raw: dict[str, Any]) -> RenderedEmail:
    d: SwitchData = _data(SwitchData, raw)  # type: ignore[arg-type]
    refund = (
        f"The difference, {format_money(d.refundCents, d.currency)}, is refunded to the card that paid; it can take "
        "a few days to appear."
        if d.refundCents
        else ""
    )
    paragraphs = [
        f"Hi {d.firstName},",
        f"You switched from {d.fromEventName} to {d.eventName} at {d.raceName} ({d.raceDate}). "
        f"Your new bib is {d.bib}; your old one is no longer yours.",
        *([refund] if refund else []),
        *([f"See or manage your registration: {d.manageUrl}"] if d.manageUrl else []),
        "If you did not ask for this, contact the race's organiser.",
        "Racecap",
    ]
    text = "\n\n".join(paragraphs) + "\n"
    subject = _one_line(f"{d.raceName}: you are in {d.eventName} now (bib {d.bib})")
    content = "".join(f'<p style="margin:0 0 12px">{html.escape(line)}</p>' for line in paragraphs)
    return RenderedEmail(subject, text, _page(subject, content, d.registrationId))


def render_deferred(raw: dict[str, Any]) -> RenderedEmail:
    d: DeferredData = _data(DeferredData, raw)  # type: ignore[arg-type]
    credit = format_money(d.creditCents, d.currency)
    paragraphs = [
        f"Hi {d.firstName},",
        f"Your place in {d.raceName} ({d.eventName}) is deferred to the race's next edition: it is cancelled "
        "here, with no refund, and what you paid is a credit there.",
        f"When you register for the next edition, use the code {d.code}: it takes {credit} off your entry. It is "
        "for this email address only, and for one registration.",
        "If you did not ask for this, contact the race's organiser.",
        "Racecap",
    ]
    text = "\n\n".join(paragraphs) + "\n"
    subject = _one_line(f"{d.raceName}: your place is deferred (code {d.code})")
    content = "".join(f'<p style="margin:0 0 12px">{html.escape(line)}</p>' for line in paragraphs)
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
    if d.payerFirstName and d.amountCents:
        return _render_payers_refund(d, values)
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


def _render_payers_refund(d: RefundData, values: dict[str, str]) -> RenderedEmail:
    """To a team's captain: a member's place was cancelled and their share went back to the
    captain's card, which paid for the team (the member is told in their own email)."""
    team = f" ({d.teamName})" if d.teamName else ""
    subject = _one_line(f"Refund to your card for {d.raceName}: {values['amount']}")
    said = (
        f"{values['firstName']}'s place in {values['raceName']} — {values['eventName']}{team} has been cancelled, "
        f"and {values['amount']} has been refunded to the card that paid for the team."
    )
    text = (
        f"Hi {d.payerFirstName},\n\n{said}\nIt can take a few days to appear.\n\n"
        f"  Registration:  {d.registrationId}\n\nRacecap\n"
    )
    content = (
        '<h1 style="font-size:22px;margin:0 0 12px">A refund to your card</h1>'
        f'<p style="margin:0 0 16px">Hi {html.escape(d.payerFirstName or "")}, {html.escape(said)}</p>'
    )
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


_WAITLIST_CONFIRM_TEXT = Template(
    """Hi $firstName,

Someone (we hope you) asked to join the waitlist for $raceName — $eventName with this address.
To confirm it and take your place in line, open this link within a week:

$confirmUrl

The same link shows your place later, and lets you leave the list.
If you did not ask for it, ignore this email: nothing happens.

Racecap
"""
)


_WAITLIST_CONFIRM_HTML = Template(
    """<h1 style="font-size:22px;margin:0 0 12px">Confirm your place on the waitlist</h1>
<p style="margin:0 0 16px">Hi $firstName, someone (we hope you) asked to join the waitlist for
<strong>$raceName</strong> — $eventName with this address. To confirm it and take your place in line, open
this link within a week:</p>
<p style="margin:0 0 16px"><a href="$confirmUrl" style="display:inline-block;background:#1f2933;color:#ffffff;
padding:10px 18px;border-radius:6px;text-decoration:none">Confirm my place</a></p>
<p style="margin:0;font-size:13px;color:#66788a">The same link shows your place later, and lets you leave the
list. If you did not ask for it, ignore this email: nothing happens.</p>"""
)


def render_waitlist_confirm(raw: dict[str, Any]) -> RenderedEmail:
    d: WaitlistConfirmData = _data(WaitlistConfirmData, raw)  # type: ignore[arg-type]
    values = {
        "firstName": d.firstName,
        "raceName": d.raceName,
        "eventName": d.eventName,
        "confirmUrl": d.confirmUrl,
    }
    subject = _one_line(f"Confirm your place on the waitlist for {d.raceName} — {d.eventName}")
    content = _WAITLIST_CONFIRM_HTML.substitute(_escaped(values))
    page = _page(subject, content, d.entryId, "waitlist entry")
    return RenderedEmail(subject, _WAITLIST_CONFIRM_TEXT.substitute(values), page)


_BALLOT_CONFIRM_TEXT = Template(
    """Hi $firstName,

$who applied to the ballot for $raceName — $eventName with this address$group.
Your application counts only once you confirm it: open this link before the ballot closes ($closesAt):

$confirmUrl

The same link shows your application later, and lets you withdraw it until the ballot closes.
The draw's result comes by email. If you did not apply, ignore this email: nothing happens.

Racecap
"""
)


_BALLOT_CONFIRM_HTML = Template(
    """<h1 style="font-size:22px;margin:0 0 12px">Confirm your ballot application</h1>
<p style="margin:0 0 16px">Hi $firstName, $who applied to the ballot for <strong>$raceName</strong> —
$eventName with this address$group. Your application counts only once you confirm it, before the ballot
closes ($closesAt):</p>
<p style="margin:0 0 16px"><a href="$confirmUrl" style="display:inline-block;background:#1f2933;color:#ffffff;
padding:10px 18px;border-radius:6px;text-decoration:none">Confirm my application</a></p>
<p style="margin:0;font-size:13px;color:#66788a">The same link shows your application later, and lets you
withdraw it until the ballot closes. The draw's result comes by email. If you did not apply, ignore this
email: nothing happens.</p>"""
)


def render_ballot_confirm(raw: dict[str, Any]) -> RenderedEmail:
    d: BallotConfirmData = _data(BallotConfirmData, raw)  # type: ignore[arg-type]
    values = {
        "firstName": d.firstName,
        "raceName": d.raceName,
        "eventName": d.eventName,
        "confirmUrl": d.confirmUrl,
        "who": d.appliedBy if d.appliedBy else "Someone (we hope you)",
        "group": f", in a group of {d.groupSize} drawn together" if d.groupSize > 1 else "",
        "closesAt": d.closesAt or "see the race page",
    }
    subject = _one_line(f"Confirm your ballot application for {d.raceName} — {d.eventName}")
    content = _BALLOT_CONFIRM_HTML.substitute(_escaped(values))
    page = _page(subject, content, d.applicationId, "ballot application")
    return RenderedEmail(subject, _BALLOT_CONFIRM_TEXT.substitute(values), page)


_WAITLIST_JOINED_TEXT = Template(
    """Hi $firstName,

You're on the waitlist for $raceName — $eventName at position $position.

When a place frees up, it is offered to the next runner in line by email. Your place, and
leaving the list, are at this link (keep it to yourself):

$manageUrl

Racecap
"""
)


_WAITLIST_JOINED_HTML = Template(
    """<h1 style="font-size:22px;margin:0 0 12px">You're on the list at position $position</h1>
<p style="margin:0 0 16px">Hi $firstName, you're on the waitlist for <strong>$raceName</strong> — $eventName
at position <strong>$position</strong>.</p>
<p style="margin:0 0 16px">When a place frees up, it is offered to the next runner in line by email.</p>
<p style="margin:0 0 16px"><a href="$manageUrl" style="display:inline-block;background:#1f2933;color:#ffffff;
padding:10px 18px;border-radius:6px;text-decoration:none">My place on the waitlist</a></p>
<p style="margin:0;font-size:13px;color:#66788a">Keep this link to yourself: it shows your place and lets you
leave the list.</p>"""
)


def render_waitlist_joined(raw: dict[str, Any]) -> RenderedEmail:
    d: WaitlistJoinedData = _data(WaitlistJoinedData, raw)  # type: ignore[arg-type]
    values = {
        "firstName": d.firstName,
        "raceName": d.raceName,
        "eventName": d.eventName,
        "position": str(d.position),
        "manageUrl": d.manageUrl,
    }
    subject = _one_line(f"You're on the waitlist for {d.raceName} — {d.eventName} at position {d.position}")
    content = _WAITLIST_JOINED_HTML.substitute(_escaped(values))
    page = _page(subject, content, d.entryId, "waitlist entry")
    return RenderedEmail(subject, _WAITLIST_JOINED_TEXT.substitute(values), page)


_WAITLIST_OFFER_TEXT = Template(
    """Hi $firstName,

A place in $raceName — $eventName is yours if you take it: you were next on the waitlist.
Claim it before $expiresAt (UTC), then register and pay ($price) as usual, with this address:

$claimUrl

If you no longer want it, the same page lets you pass it on to the next runner at once.

Racecap
"""
)


_WAITLIST_OFFER_HTML = Template(
    """<h1 style="font-size:22px;margin:0 0 12px">A place is yours if you take it</h1>
<p style="margin:0 0 16px">Hi $firstName, you were next on the waitlist for <strong>$raceName</strong> —
$eventName. Claim the place before <strong>$expiresAt (UTC)</strong>, then register and pay ($price) as usual,
with this address.</p>
<p style="margin:0 0 16px"><a href="$claimUrl" style="display:inline-block;background:#1f2933;color:#ffffff;
padding:10px 18px;border-radius:6px;text-decoration:none">Claim my place</a></p>
<p style="margin:0;font-size:13px;color:#66788a">No longer want it? The same page passes it on to the next
runner at once.</p>"""
)


def render_waitlist_offer(raw: dict[str, Any]) -> RenderedEmail:
    d: WaitlistOfferData = _data(WaitlistOfferData, raw)  # type: ignore[arg-type]
    values = {
        "firstName": d.firstName,
        "raceName": d.raceName,
        "eventName": d.eventName,
        "claimUrl": d.claimUrl,
        "expiresAt": d.expiresAt[:16].replace("T", " "),
        "price": format_money(d.priceCents, d.currency) if d.priceCents else "free",
    }
    if d.ballot:  # the ballot's winners: this offer is their one result email
        subject = _one_line(f"You have a place in {d.raceName} — {d.eventName}: the ballot drew you")
        content = _BALLOT_WON_HTML.substitute(_escaped(values))
        page = _page(subject, content, d.entryId, "ballot application")
        return RenderedEmail(subject, _BALLOT_WON_TEXT.substitute(values), page)
    subject = _one_line(f"A place in {d.raceName} — {d.eventName} is yours if you claim it")
    content = _WAITLIST_OFFER_HTML.substitute(_escaped(values))
    page = _page(subject, content, d.entryId, "waitlist entry")
    return RenderedEmail(subject, _WAITLIST_OFFER_TEXT.substitute(values), page)


_BALLOT_WON_TEXT = Template(
    """Hi $firstName,

You have a place in $raceName — $eventName: the ballot drew your application.
Claim it before $expiresAt (UTC), then register and pay ($price) as usual, with this address:

$claimUrl

If you no longer want it, the same page passes it on to the next runner on the waitlist at once.

Racecap
"""
)


_BALLOT_WON_HTML = Template(
    """<h1 style="font-size:22px;margin:0 0 12px">You have a place: the ballot drew you</h1>
<p style="margin:0 0 16px">Hi $firstName, the ballot for <strong>$raceName</strong> — $eventName drew your
application. Claim your place before <strong>$expiresAt (UTC)</strong>, then register and pay ($price) as usual,
with this address.</p>
<p style="margin:0 0 16px"><a href="$claimUrl" style="display:inline-block;background:#1f2933;color:#ffffff;
padding:10px 18px;border-radius:6px;text-decoration:none">Claim my place</a></p>
<p style="margin:0;font-size:13px;color:#66788a">No longer want it? The same page passes it on to the next
runner on the waitlist at once.</p>"""
)


_BALLOT_RESULT_TEXT = Template(
    """Hi $firstName,

The ballot for $raceName — $eventName has been drawn. Your application was not among the winners this time:
you are number $position on the waitlist. If a winner does not take their place, it is offered to the next
runner in line, in drawn order, by email.

The draw can be checked by anyone: the race page publishes the seed and the list of applications.
$raceUrl

Racecap
"""
)


_BALLOT_RESULT_HTML = Template(
    """<h1 style="font-size:22px;margin:0 0 12px">You are number $position on the waitlist</h1>
<p style="margin:0 0 16px">Hi $firstName, the ballot for <strong>$raceName</strong> — $eventName has been
drawn. Your application was not among the winners this time: you are <strong>number $position</strong> on
the waitlist. If a winner does not take their place, it is offered to the next runner in line, in drawn
order, by email.</p>
<p style="margin:0;font-size:13px;color:#66788a">The draw can be checked by anyone: the
<a href="$raceUrl">race page</a> publishes the seed and the list of applications.</p>"""
)


def render_ballot_result(raw: dict[str, Any]) -> RenderedEmail:
    d: BallotResultData = _data(BallotResultData, raw)  # type: ignore[arg-type]
    values = {
        "firstName": d.firstName,
        "raceName": d.raceName,
        "eventName": d.eventName,
        "position": f"{d.position:,}",
        "raceUrl": d.raceUrl,
    }
    subject = _one_line(f"The ballot for {d.raceName} — {d.eventName}: you are number {d.position:,} on the waitlist")
    content = _BALLOT_RESULT_HTML.substitute(_escaped(values))
    page = _page(subject, content, d.applicationId, "ballot application")
    return RenderedEmail(subject, _BALLOT_RESULT_TEXT.substitute(values), page)


_WAITLIST_CLOSED_TEXT = Template(
    """Hi $firstName,

The waitlist for $raceName — $eventName has closed: no more places will be offered from it.
${offerEnded}Thank you for waiting, and we hope to see you at the next edition.

Racecap
"""
)


_WAITLIST_CLOSED_HTML = Template(
    """<h1 style="font-size:22px;margin:0 0 12px">The waitlist has closed</h1>
<p style="margin:0 0 16px">Hi $firstName, the waitlist for <strong>$raceName</strong> — $eventName has closed:
no more places will be offered from it.$offerEndedHtml</p>
<p style="margin:0">Thank you for waiting, and we hope to see you at the next edition.</p>"""
)


_OFFER_ENDED = "The place offered to you was not claimed before it closed, so it has gone back on sale."


def render_waitlist_closed(raw: dict[str, Any]) -> RenderedEmail:
    d: WaitlistClosedData = _data(WaitlistClosedData, raw)  # type: ignore[arg-type]
    values = {"firstName": d.firstName, "raceName": d.raceName, "eventName": d.eventName}
    ended = _OFFER_ENDED if d.offerEnded else ""
    subject = _one_line(f"The waitlist for {d.raceName} — {d.eventName} has closed")
    content = _WAITLIST_CLOSED_HTML.substitute(_escaped(values), offerEndedHtml=f" {ended}" if ended else "")
    values["offerEnded"] = f"{ended}\n" if ended else ""
    page = _page(subject, content, d.entryId, "waitlist entry")
    return RenderedEmail(subject, _WAITLIST_CLOSED_TEXT.substitute(values), page)


TEMPLATES: dict[str, Callable[[dict[str, Any]], RenderedEmail]] = {
    "confirmation": render_confirmation,
    "refund": render_refund,
    "unmatched_refund": render_unmatched_refund,
    "registration-link": render_link,
    "email-change": render_email_change,
    "email-changed": render_email_changed,
    "email-moved": render_email_moved,
    "transfer-offer": render_transfer_offer,
    "transfer-confirmed": render_transfer_confirmed,
    "transferred-away": render_transferred_away,
    "switch-confirmed": render_switch_confirmed,
    "deferred": render_deferred,
    "waitlist-confirm": render_waitlist_confirm,
    "waitlist-joined": render_waitlist_joined,
    "waitlist-offer": render_waitlist_offer,
    "waitlist-closed": render_waitlist_closed,
    "ballot-confirm": render_ballot_confirm,
    "ballot-result": render_ballot_result,
}
