"""What a race director would check after a burst — read straight from the backend.

    python -m tools.audit --stack .local-stack/run/stack.json [--race RACE_ID]
    python -m tools.audit --stage <AdminApi function name or ARN> [--race RACE_ID]

``--stage`` audits a deployed stage with the AWS credentials and region of the
environment: its names come from the stage itself, the provider's records from the
provider's API with the stage's own key, the emails from the email sender's delivery log
(``tools/stage.py``).

The non-negotiables, per race:
* confirmed registrations ≤ cap for every event, and the cap shards agree;
* every place the shards count as taken is accounted for, each from its own source: the
  confirmed and cancelling registrations, the places of the live holds (held, paying,
  queued), the waitlist's offers out (its OFFER items) and its pooled places (the LINE's
  ``pool``); and the LINE's ``offered`` counter matches its OFFER items;
* every SWITCHED record (an entry moved to another event) names its runner's registration, in
  another event; every place deferred to the next edition has its personal code there;
* one registration per email per race, and a registration whose address moved (an email
  change, a place handed over) is the one its address's claim names;
* bibs per event are 1..N: no gaps, no duplicates;
* every option with stock (a T-shirt size) has exactly the units its live entries took: the
  confirmed (or cancelling) registrations whose answers chose it, and the holds still paying
  or queued whose attempt took it — a cancelled one's unit went back;
* every succeeded payment (from the provider's own records) belongs to one confirmed
  registration, or to one the director cancelled keeping part of it (the provider refunded
  exactly what the ledger says), or was refunded in full (Σ refunds ≤ the charge, in
  cents); every confirmed paid registration has its entry payment, a free one has none;
  every dispute is flagged on its registration;
* emails sent equal registrations confirmed (once the email queue has drained);
* nothing in any dead-letter queue.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3

import blueprint
from local.runtime import install_layer_path, local_session

install_layer_path()

from racecap.aws.items import from_item, get_all, query_all, values  # noqa: E402
from racecap.aws.keys import (  # noqa: E402
    WAITLIST_OFFER_PREFIX,
    cap_pk,
    code_pk,
    email_key,
    hold_key,
    live_partitions,
    option_counter,
    requeue_partitions,
    waitlist_line_key,
    waitlist_pk,
)
from racecap.ledger.cancellations import OUTSIDE_REASON  # noqa: E402
from racecap.ledger.store import DynamoLedger  # noqa: E402
from racecap.questions.models import StoredAnswers  # noqa: E402
from racecap.questions.store import DynamoQuestions  # noqa: E402

from tools.stage import DeliveredConfirmations, discover, stage_secret_key  # noqa: E402

# Which confirmations were sent, per registration: the local mailbox, or (a deployed stage)
# the email sender's delivery log.
Confirmations = Callable[[set[str]], Counter[str]]


@dataclass
class AuditReport:
    race_id: str
    events: dict[str, dict[str, int]] = field(default_factory=dict)
    confirmed: int = 0
    charges_succeeded: int = 0
    refunds: int = 0
    emails_sent: int = 0
    dlq_messages: int = 0
    violations: list[str] = field(default_factory=list)
    code_uses: dict[str, dict[str, Any]] = field(default_factory=dict)  # per discount code

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        lines = [f"audit of race {self.race_id}: {'OK' if self.ok else 'VIOLATIONS'}"]
        for event_id, e in self.events.items():
            lines.append(f"  {event_id}: cap {e['cap']}, taken {e['taken']}, confirmed {e['confirmed']}")
        lines.append(
            f"  confirmed {self.confirmed}, successful charges {self.charges_succeeded} "
            f"(refunded {self.refunds}), emails {self.emails_sent}, DLQ {self.dlq_messages}"
        )
        for code, u in self.code_uses.items():
            limit = u["limit"] or "no limit"
            lines.append(f"  code {code}: uses {u['taken']} of {limit}, on {u['registrations']} registrations")
        lines += [f"  ✗ {v}" for v in self.violations]
        return "\n".join(lines)


def _get_json(url: str, headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(url, headers=headers or {})  # noqa: S310 - loopback only
    for attempt in range(20):
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310 - loopback only
                return json.load(resp)
        except urllib.error.HTTPError as exc:
            if exc.code != 429 or attempt == 19:  # the provider's rate limit: the audit waits its turn
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Provider:
    """Where the provider's own records are read (Stripe's API: the stand-in locally)."""

    api_base: str
    secret_key: str

    def _all(self, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        after = ""
        while True:
            query = urllib.parse.urlencode({**params, "limit": "100", **({"starting_after": after} if after else {})})
            page = _get_json(f"{self.api_base}{path}?{query}", {"Authorization": f"Bearer {self.secret_key}"})
            out += page["data"]
            if not page.get("has_more") or not page["data"]:
                return out
            after = page["data"][-1]["id"]

    def intents(self, race_id: str) -> list[dict[str, Any]]:
        return self._all("/v1/payment_intents/search", {"query": f"metadata['raceId']:'{race_id}'"})

    def events(self, event_type: str) -> list[dict[str, Any]]:
        return self._all("/v1/events", {"type": event_type})

    def refunds(self) -> list[dict[str, Any]]:
        """Every refund as it stands now, a failed or cancelled one too (its status says so):
        a refund's own events only say how it started (a pending one may succeed or fail)."""
        return self._all("/v1/refunds", {})


# A refund that did not happen after all: it moved no money.
UNDONE = ("failed", "canceled")


def live_refunds(provider: Provider) -> list[dict[str, Any]]:
    """The provider's refunds that moved money or still may (succeeded, pending)."""
    return [r for r in provider.refunds() if r.get("status") not in UNDONE]


def local_provider(stack: Any) -> Provider:
    from local.stripe_standin.server import Keys

    return Provider(stack.stripe_url, Keys().secret)


def audit(
    dynamodb: Any,
    sqs: Any,
    race_id: str,
    *,
    provider: Provider,
    queue_urls: Mapping[str, str],
    mailbox_url: str | None = None,
    confirmations: Confirmations | None = None,
    tables: Mapping[str, str] | None = None,
    expect_emails: bool = True,
) -> AuditReport:
    """The race's invariants. Locally the mailbox (``mailbox_url``) holds the emails; a
    stage passes its own ``tables`` and ``confirmations`` (``audit_stage``)."""
    if confirmations is None and expect_emails:
        assert mailbox_url is not None, "mailbox_url or confirmations"
        confirmations = mailbox_confirmations(mailbox_url)
    names = dict(tables) if tables is not None else {t.id: t.local_name for t in blueprint.TABLES}
    report = AuditReport(race_id)
    races = names["Races"]
    inventory = names["Inventory"]
    regs_table = names["Registrations"]

    items = list(
        query_all(
            dynamodb,
            TableName=races,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues=values({":pk": f"RACE#{race_id}"}),
        )
    )
    events = [i for i in items if i["sk"].startswith("EVENT#")]
    regs: list[dict[str, Any]] = []
    every_reg: dict[str, dict[str, Any]] = {}
    for event in events:
        eid = event["eventId"]
        shards = _shards(dynamodb, inventory, cap_pk(race_id, eid))
        cap = sum(int(s["cap"]) for s in shards)
        taken = sum(int(s["taken"]) for s in shards)
        event_regs = list(
            query_all(
                dynamodb,
                TableName=regs_table,
                IndexName="gsi1",
                KeyConditionExpression="gsi1pk = :pk",
                ExpressionAttributeValues=values({":pk": f"EVENT#{race_id}#{eid}"}),
            )
        )
        confirmed = [r for r in event_regs if r.get("status") == "CONFIRMED"]
        regs += confirmed
        every_reg |= {r["registrationId"]: r for r in event_regs}
        report.events[eid] = {"cap": cap, "taken": taken, "confirmed": len(confirmed)}
        if cap != int(event["cap"]):
            report.violations.append(f"event {eid}: shard caps sum to {cap}, event cap is {event['cap']}")
        if len(confirmed) > cap:
            report.violations.append(f"event {eid}: {len(confirmed)} confirmed > cap {cap}")
        if taken > cap or _shard_out_of_bounds(shards):
            report.violations.append(f"event {eid}: a shard is over its cap or negative")
        if len(confirmed) > taken:
            report.violations.append(f"event {eid}: {len(confirmed)} confirmed but only {taken} places taken")
        # A cancelled registration keeps its bib (bibs are never given twice): count them all.
        bibs = sorted(int(r["bib"]) for r in event_regs if "bib" in r)
        if bibs != list(range(1, len(bibs) + 1)):
            dupes = [b for b, n in Counter(bibs).items() if n > 1]
            report.violations.append(f"event {eid}: bibs are not 1..{len(bibs)} (duplicates {dupes[:5]})")
    report.confirmed = len(regs)
    _audit_places(dynamodb, inventory, race_id, [str(e["eventId"]) for e in events], every_reg, report)
    _audit_stock(dynamodb, names, race_id, [str(e["eventId"]) for e in events], every_reg, report)
    codes = [i for i in items if i["sk"].startswith("CODE#")]
    _audit_codes(dynamodb, inventory, race_id, codes, list(every_reg.values()), report)

    # A race past its retention period has no emails left (retention.service).
    per_email = Counter(r["email"] for r in regs if r.get("email"))
    report.violations += [f"email {e} registered {n} times" for e, n in per_email.items() if n > 1]
    _audit_moved_claims(dynamodb, inventory, race_id, regs, report)
    _audit_switched(every_reg, report)
    _audit_deferred(dynamodb, races, every_reg, report)

    confirmed_ids = {r["registrationId"] for r in regs}
    # Every succeeded payment, from the provider's own records, in cents: its refunds never add
    # up to more than it (the ledger's reservation); one not refunded in full belongs to exactly
    # one confirmed registration (a partial refund leaves the runner registered).
    intents = provider.intents(race_id)
    succeeded = [i for i in intents if i["status"] == "succeeded"]
    report.charges_succeeded = len(succeeded)
    refunded: Counter[str] = Counter()
    live = live_refunds(provider)
    for refund in live:
        if refund.get("payment_intent"):
            refunded[refund["payment_intent"]] += int(refund.get("amount", 0))
    report.refunds = sum(1 for i in succeeded if refunded[i["id"]])
    over = [i for i in succeeded if refunded[i["id"]] > int(i["amount"])]
    report.violations += [f"payment {i['id']} refunded {refunded[i['id']]} of {i['amount']} cents" for i in over]
    per_registration: dict[str, list[dict[str, Any]]] = defaultdict(list)
    others: dict[str, list[dict[str, Any]]] = defaultdict(list)  # payments of another purpose
    for i in succeeded:
        purpose = i["metadata"].get("purpose", "entry")
        (per_registration if purpose == "entry" else others)[i["metadata"].get("registrationId", i["id"])].append(i)
    _audit_other_payments(dynamodb, regs_table, every_reg, others, per_registration, refunded, report)
    for rid, paid in per_registration.items():
        kept = [i for i in paid if refunded[i["id"]] < int(i["amount"])]
        if len(kept) > 1:
            report.violations.append(f"registration {rid} was charged {len(kept)} times")
        reg = every_reg.get(rid)
        team = bool((reg or {}).get("teamMembers"))  # a team's payment: checked whole in _audit_teams
        if kept and rid not in confirmed_ids and not team and not _kept_by_choice(reg, kept[0], refunded):
            report.violations.append(f"registration {rid} was charged but is not confirmed")
    # The other way round: a confirmed registration that paid has its payment; a free one none.
    by_id = {i["id"]: i for i in succeeded}
    _audit_teams(every_reg, by_id, refunded, report)
    _audit_refunds(dynamodb, regs_table, every_reg, live, report)
    _audit_prices(dynamodb, inventory, every_reg, report)
    for r in regs:
        rid, charge = r["registrationId"], str(r.get("chargeId", ""))
        if r.get("teamMembers"):
            continue  # a team member's share of the team's one payment: _audit_teams
        if int(r.get("amountCents", 0)) == 0:
            if charge or per_registration.get(rid):
                report.violations.append(f"free registration {rid} has a payment")
        elif not r.get("purgedAt") and (charge not in by_id or int(by_id[charge]["amount"]) != int(r["amountCents"])):
            report.violations.append(f"registration {rid} has no entry payment of {r['amountCents']}")
    # Every dispute of this race's payments is flagged on its registration.
    ours = {i["id"]: str(i["metadata"].get("registrationId", "")) for i in succeeded}
    disputes = [e["data"]["object"] for e in provider.events("charge.dispute.created")]
    disputes = [d for d in disputes if ours.get(d.get("payment_intent", ""))]
    all_regs = {r["registrationId"]: r for r in registrations_for(dynamodb, race_id, regs_table)} if disputes else {}
    for dispute in disputes:
        disputed = ours[dispute["payment_intent"]]
        if disputed in all_regs and all_regs[disputed].get("disputeId") != dispute["id"]:
            report.violations.append(f"registration {disputed}: dispute {dispute['id']} not flagged")

    if expect_emails and confirmations is not None:
        confirmed_mail = confirmations(confirmed_ids)
        report.emails_sent = len(confirmed_mail)
        twice = [rid for rid, n in confirmed_mail.items() if n > 1]
        if twice:
            report.violations.append(f"{len(twice)} registrations got more than one confirmation email")
        missing = confirmed_ids - set(confirmed_mail)
        if missing:
            report.violations.append(f"{len(missing)} confirmed registrations have no confirmation email")

    for q in blueprint.QUEUES:
        url = queue_urls.get(q.dlq_id) or queue_urls[q.id] + "-dlq"
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        report.dlq_messages += int(attrs["Attributes"]["ApproximateNumberOfMessages"])
    if report.dlq_messages:
        report.violations.append(f"{report.dlq_messages} messages in dead-letter queues")
    return report


def _shards(dynamodb: Any, inventory: str, pk: str) -> list[dict[str, Any]]:
    """A sharded counter's shards (an event's cap, a code's uses), read strongly consistent."""
    return list(
        query_all(
            dynamodb,
            TableName=inventory,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues=values({":pk": pk}),
            ConsistentRead=True,
        )
    )


def _shard_out_of_bounds(shards: list[dict[str, Any]]) -> bool:
    return any(int(s["taken"]) > int(s["cap"]) or int(s["taken"]) < 0 for s in shards)


def _audit_codes(
    dynamodb: Any,
    inventory: str,
    race_id: str,
    codes: list[dict[str, Any]],
    registrations: list[dict[str, Any]],
    report: AuditReport,
) -> None:
    """A discount code is used at most its limit: its shards never over their caps, and the
    registrations carrying it (a paid one keeps its use, cancelled or not) never more than the
    uses taken (the rest are holds not yet paid). A registration's discount is what its code
    takes off: what it paid plus the discount is a whole price, never negative."""
    carrying = Counter(str(r["code"]) for r in registrations if r.get("code"))
    for code_item in codes:
        code = str(code_item["code"])
        shards = _shards(dynamodb, inventory, code_pk(race_id, code))
        taken = sum(int(s["taken"]) for s in shards)
        report.code_uses[code] = {"taken": taken, "registrations": carrying[code], "limit": code_item.get("maxUses")}
        if _shard_out_of_bounds(shards):
            report.violations.append(f"code {code}: a shard is over its cap or negative")
        limit = code_item.get("maxUses")
        if limit is not None and taken > int(limit):
            report.violations.append(f"code {code}: {taken} uses > its limit {limit}")
        if carrying[code] > taken:
            report.violations.append(f"code {code}: {carrying[code]} registrations carry it, {taken} uses taken")
    unknown = set(carrying) - {str(c["code"]) for c in codes}
    report.violations += [f"registrations carry code {c}, which the race does not have" for c in sorted(unknown)]
    for r in registrations:
        if r.get("code") and (int(r.get("discountCents") or 0) < 0 or int(r["amountCents"]) < 0):
            report.violations.append(f"registration {r['registrationId']}: a negative amount or discount")


def _audit_prices(
    dynamodb: Any, inventory: str, every_reg: Mapping[str, Mapping[str, Any]], report: AuditReport
) -> None:
    """What each registration paid is the price fixed on its hold when the place was taken, less
    its code's discount (a team member's: the hold's price per place): a price edited meanwhile,
    or a discount that is not the code's, shows here. Holds from before prices rode on the hold,
    and holds gone (TTL), have nothing to compare."""
    regs = [r for r in every_reg.values() if not r.get("purgedAt") and r.get("holdId")]
    keys = [hold_key(h) for h in {str(r["holdId"]) for r in regs}]
    holds = {str(h["holdId"]): h for h in get_all(dynamodb, inventory, keys)}
    for r in regs:
        hold = holds.get(str(r["holdId"]))
        if hold is None or hold.get("amountCents") is None:
            continue
        paid, discount = int(r.get("amountCents") or 0), int(r.get("discountCents") or 0)
        held = int(hold["listCents"]) if r.get("code") and hold.get("listCents") is not None else None
        if paid != int(hold["amountCents"]) or (held is not None and paid + discount != held):
            report.violations.append(
                f"registration {r['registrationId']}: paid {paid} (discount {discount}), its hold's price is "
                f"{hold['amountCents']}" + (f" of {held}" if held is not None else "")
            )


def _audit_refunds(
    dynamodb: Any,
    regs_table: str,
    every_reg: Mapping[str, Mapping[str, Any]],
    live: list[dict[str, Any]],
    report: AuditReport,
) -> None:
    """Each refund, one by one, in cents: every refund the ledger says the provider made is the
    provider's, of that registration's payment, for that amount; and per payment the provider's
    refunds add up to what its registrations' ledgers recorded (a refund made outside Racecap is
    recorded by the charge's refunded total, so only the sum can match it)."""
    ledger = DynamoLedger(dynamodb, regs_table)
    by_refund = {refund["id"]: refund for refund in live}
    ledgered: Counter[str] = Counter()
    charges = set()
    for rid, r in every_reg.items():
        # Σ refunds ≤ Σ payments per registration, as its ledger keeps them: the sum the ledger
        # reserves refunds in never passes what the registration paid, entry and beyond.
        summed, paid = int(r.get("ledgerRefundedCents") or 0), int(r.get("amountCents") or 0)
        paid += int(r.get("ledgerExtraCents") or 0)
        if summed > paid:
            report.violations.append(f"registration {rid}: its ledger refunded {summed} of the {paid} cents it paid")
        if r.get("purgedAt") or not r.get("chargeId") or not (r.get("ledgerRefundedCents") or r.get("cancelRefund")):
            continue
        charges.add(str(r["chargeId"]))
        payments = ledger.payments(rid)
        charges.update(e.providerId for e in payments if e.providerId)
        refunds = ledger.refunds(rid)
        # The same, entry by entry: the refunds that moved money or may still (not REFUSED, FAILED).
        entered = sum(e.amountCents for e in refunds if e.status in ("PENDING", "PROCESSING", "SUCCEEDED"))
        if entered > int(r.get("amountCents") or 0) + sum(e.amountCents for e in payments):
            report.violations.append(
                f"registration {rid}: its ledger's refunds add up to {entered}, more than its payments"
            )
        for entry in refunds:
            if entry.status == "PENDING":  # the sweeper settles it within minutes: audit_until_clean waits
                report.violations.append(f"registration {rid}: refund {entry.key} still waits for the provider")
            if entry.status not in ("SUCCEEDED", "PROCESSING"):
                continue  # PENDING: not settled yet (audit_until_clean waits); REFUSED, FAILED: no money moved
            paid_by = entry.intentId or str(r["chargeId"])  # a refund's payment ('' before several)
            ledgered[paid_by] += entry.amountCents
            if entry.reason == OUTSIDE_REASON or not entry.providerId:
                continue
            made = by_refund.get(entry.providerId)
            if made is None or made.get("payment_intent") != paid_by or int(made["amount"]) != entry.amountCents:
                report.violations.append(
                    f"registration {rid}: ledger refund {entry.providerId} of {entry.amountCents} is not the provider's"
                )
    for charge in charges:
        made_sum = sum(int(x["amount"]) for x in by_refund.values() if x.get("payment_intent") == charge)
        if made_sum != ledgered[charge]:
            report.violations.append(
                f"payment {charge}: refunded {made_sum} by the provider, {ledgered[charge]} in the ledger"
            )


def _audit_stock(
    dynamodb: Any,
    names: Mapping[str, str],
    race_id: str,
    event_ids: list[str],
    every_reg: Mapping[str, Mapping[str, Any]],
    report: AuditReport,
) -> None:
    """Each option with stock (any version of an event's questions had it: counters outlive
    versions) has exactly the units its live entries took: the registrations not cancelled
    (CONFIRMED, CANCELLING) whose answers chose it, read from their answers and the stock of the
    version they answered, plus the holds still paying or queued (the sweeper's index) whose
    attempt took it. A cancellation that kept its unit, or an entry that never took one, shows."""
    questions = DynamoQuestions(dynamodb, names["Races"])
    holds: list[dict[str, Any]] | None = None
    for eid in event_ids:
        current = questions.current_version(race_id, eid)
        docs = {v: questions.get(race_id, eid, v) or {} for v in range(1, current + 1)}
        stocked = {k for doc in docs.values() for k in doc.get("stock") or {}}
        if not stocked:
            continue
        live = [
            r
            for r in every_reg.values()
            if r.get("eventId") == eid and r.get("status") not in ("CANCELLED", "SWITCHED")
        ]
        if any(r.get("purgedAt") for r in live):
            continue  # retention deleted the answers: nothing left to count them by
        held: Counter[str] = Counter()
        for r in live:
            answered = StoredAnswers.of(r.get("answers"), r.get("questionsVersion"))
            if answered is None:
                continue
            stock = docs.get(answered.questionsVersion, {}).get("stock") or {}
            for qid, value in answered.answers.items():
                for oid in value if isinstance(value, list) else [value]:
                    if f"{qid}#{oid}" in stock:
                        held[f"{qid}#{oid}"] += 1
        if holds is None:
            holds = _live_holds(dynamodb, names["Inventory"], race_id)
        for hold in holds:
            if hold.get("eventId") != eid:
                continue
            attempt = hold.get("attempt") or {}
            members = attempt.get("members")
            entries = [e for m in members for e in m.get("stock") or ()] if members else attempt.get("stock") or ()
            for entry in entries:
                qid, oid, _ = str(entry).split("#", 2)
                held[f"{qid}#{oid}"] += 1
        for key in sorted(stocked):
            qid, oid = key.split("#", 1)
            shards = _shards(dynamodb, names["Inventory"], cap_pk(race_id, option_counter(eid, qid, oid)))
            taken = sum(int(s["taken"]) for s in shards)
            if _shard_out_of_bounds(shards):
                report.violations.append(f"event {eid}: option {qid}/{oid}: a shard is over its cap or negative")
            if taken != held[key]:
                report.violations.append(
                    f"event {eid}: option {qid}/{oid}: {taken} units taken, its live entries hold {held[key]}"
                )


def _audit_moved_claims(
    dynamodb: Any, inventory: str, race_id: str, confirmed: list[dict[str, Any]], report: AuditReport
) -> None:
    """Each confirmed registration whose address moved after it was written (an email change, a
    transfer) must be the one its address's claim names: the claim moved with it, in one write.
    Only those are read: every other claim was written with its registration, and reading 50,000
    claims would make the audit of a big race slow for nothing."""
    moved = [r for r in confirmed if r.get("email") and (r.get("transfers") or r.get("emailChangedAt"))]
    claims = {
        str(c["registrationId"]): str(c["pk"])
        for c in get_all(dynamodb, inventory, [email_key(race_id, str(r["email"])) for r in moved])
    }
    for r in moved:
        rid = str(r["registrationId"])
        if claims.get(rid) != f"EMAIL#{race_id}#{r['email']}":
            report.violations.append(f"registration {rid}: its address's claim does not name it (moved without it)")


def _audit_switched(every_reg: Mapping[str, Mapping[str, Any]], report: AuditReport) -> None:
    """Each SWITCHED record (an entry its runner moved to another event) names the registration
    that lives on, in another event, having switched at least as often as its records say: a
    switch half-done (the record without the move, or the move in the same event) shows."""
    records: Counter[str] = Counter()
    for r in every_reg.values():
        if r.get("status") != "SWITCHED":
            continue
        live = every_reg.get(str(r.get("switchedTo", "")))
        if live is None or live.get("eventId") == r.get("eventId") or live.get("status") == "SWITCHED":
            report.violations.append(
                f"switched entry {r['registrationId']}: its runner's registration {r.get('switchedTo')} is not in "
                "another event"
            )
            continue
        records[str(live["registrationId"])] += 1
    for rid, n in records.items():
        if int(every_reg[rid].get("switches") or 0) < n:
            report.violations.append(f"registration {rid}: {n} switched entries name it, it switched fewer times")


def _audit_deferred(
    dynamodb: Any, races_table: str, every_reg: Mapping[str, Mapping[str, Any]], report: AuditReport
) -> None:
    """Each place deferred to the next edition has its credit there: the personal code it names,
    in that race, for the credit, one use, for the runner's address (until retention empties it)."""
    deferred = [r for r in every_reg.values() if r.get("deferredTo")]
    keys = [
        {"pk": {"S": f"RACE#{r['deferredTo']}"}, "sk": {"S": f"CODE#{r.get('deferralCode', '')}"}} for r in deferred
    ]
    codes = {(str(c["raceId"]), str(c["code"])): c for c in get_all(dynamodb, races_table, keys)}
    for r in deferred:
        code = codes.get((str(r["deferredTo"]), str(r.get("deferralCode", ""))))
        terms = (code or {}).get("terms") or {}
        mine = r.get("purgedAt") or (code or {}).get("forEmail") == r.get("email")
        if code is None or int(terms.get("amountCents") or 0) != int(r.get("deferralCreditCents") or 0) or not mine:
            report.violations.append(
                f"registration {r['registrationId']}: deferred to {r['deferredTo']} without its code there"
            )


def _audit_places(
    dynamodb: Any,
    inventory: str,
    race_id: str,
    event_ids: list[str],
    every_reg: Mapping[str, Mapping[str, Any]],
    report: AuditReport,
) -> None:
    """Σ shards' taken = confirmed + cancelling + places in live holds + offered + pooled, per event."""
    holds = _live_holds(dynamodb, inventory, race_id)
    for eid in event_ids:
        taken = sum(int(s["taken"]) for s in _shards(dynamodb, inventory, cap_pk(race_id, eid)))
        registered = sum(
            1 for r in every_reg.values() if r.get("eventId") == eid and r.get("status") in ("CONFIRMED", "CANCELLING")
        )
        held = sum(int(h.get("places", 1)) for h in holds if h.get("eventId") == eid)
        offers = list(
            query_all(
                dynamodb,
                TableName=inventory,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :offer)",
                ExpressionAttributeValues=values({":pk": waitlist_pk(race_id, eid), ":offer": WAITLIST_OFFER_PREFIX}),
                ConsistentRead=True,
            )
        )
        offered = sum(1 for o in offers if o.get("state") == "OFFERED")
        line = dynamodb.get_item(TableName=inventory, Key=waitlist_line_key(race_id, eid), ConsistentRead=True)
        counters = from_item(line["Item"]) if "Item" in line else {}
        pooled = int(counters.get("pool", 0))
        accounted = registered + held + offered + pooled
        if taken != accounted:
            report.violations.append(
                f"event {eid}: shards count {taken} places taken, but {registered} registered + {held} held + "
                f"{offered} offered + {pooled} pooled = {accounted}"
            )
        if int(counters.get("offered", 0)) != offered:
            report.violations.append(
                f"event {eid}: the waitlist counts {counters.get('offered', 0)} offers out, its offers say {offered}"
            )


def _live_holds(dynamodb: Any, inventory: str, race_id: str) -> list[dict[str, Any]]:
    """The race's holds that may still take or give back stock: held, paying, or paid and queued
    (the sweeper's sparse index), read whole."""
    keys = [
        hold_key(str(item["pk"]).removeprefix("HOLD#"))  # the index carries the table's keys
        for partition in (*live_partitions(), *requeue_partitions())
        for item in query_all(
            dynamodb,
            TableName=inventory,
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :p",
            FilterExpression="raceId = :r",
            ExpressionAttributeValues=values({":p": partition, ":r": race_id}),
        )
    ]
    return [h for h in get_all(dynamodb, inventory, keys) if h.get("status") in ("HELD", "PAYING", "QUEUED")]


def _audit_other_payments(
    dynamodb: Any,
    regs_table: str,
    every_reg: Mapping[str, Mapping[str, Any]],
    others: Mapping[str, list[dict[str, Any]]],
    entries: Mapping[str, list[dict[str, Any]]],
    refunded: Counter[str],
    report: AuditReport,
) -> None:
    """Payments beyond the entry (an upgrade, a fee), from the provider's records: each one is in
    the ledger of the registration it names, for its amount, and per registration the refunds
    of all its payments add up to no more than they do (each refund within its own payment is
    checked with every payment above)."""
    ledger = DynamoLedger(dynamodb, regs_table)
    for rid, paid in others.items():
        reg = every_reg.get(rid)
        recorded = {e.providerId: e.amountCents for e in ledger.payments(rid)} if reg is not None else {}
        for i in paid:
            if recorded.get(i["id"]) != int(i["amount"]) and refunded[i["id"]] < int(i["amount"]):
                purpose = i["metadata"].get("purpose")
                report.violations.append(f"payment {i['id']} ({purpose}) is not in registration {rid}'s ledger")
        every = [*paid, *entries.get(rid, [])]
        given, taken = sum(refunded[i["id"]] for i in every), sum(int(i["amount"]) for i in every)
        if given > taken:
            report.violations.append(f"registration {rid}: refunded {given} of the {taken} cents its payments took")


def _audit_teams(
    every_reg: Mapping[str, Mapping[str, Any]],
    by_id: Mapping[str, Mapping[str, Any]],
    refunded: Counter[str],
    report: AuditReport,
) -> None:
    """Each team complete or absent: every member its registration (confirmed or cancelled
    since), and the team's one payment exactly the sum of its members' shares. The records of
    entries a switch left (SWITCHED: a copy of the member's, bib and all) are not members."""
    teams: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in every_reg.values():
        if r.get("teamMembers") and r.get("status") != "SWITCHED":
            teams[str(r["holdId"])].append(r)
    for hold_id, members in teams.items():
        expected = set(members[0]["teamMembers"])
        present = {str(m["registrationId"]) for m in members}
        if present != expected:
            report.violations.append(f"team {hold_id}: {len(present)} of its {len(expected)} registrations")
        total = sum(int(m.get("amountCents") or 0) for m in members)
        charge = str(members[0].get("chargeId") or "")
        if any(str(m.get("chargeId") or "") != charge for m in members):
            report.violations.append(f"team {hold_id}: members name different payments")
        elif total and not members[0].get("purgedAt"):
            paid = by_id.get(charge)
            if paid is None or int(paid["amount"]) != total:
                report.violations.append(f"team {hold_id}: its payment is not the {total} its members' shares make")
        elif not total and charge:
            report.violations.append(f"free team {hold_id} has a payment")


def _kept_by_choice(reg: Mapping[str, Any] | None, intent: Mapping[str, Any], refunded: Counter[str]) -> bool:
    """A payment kept in part by a cancelled registration is the director's choice (refund NONE
    or an AMOUNT) when the provider refunded exactly what the registration's ledger recorded."""
    if reg is None or reg.get("status") != "CANCELLED" or reg.get("chargeId") != intent["id"]:
        return False
    return reg.get("cancelRefund") is not None and int(reg.get("ledgerRefundedCents", 0)) == refunded[intent["id"]]


def audit_until_clean(
    stack: Any, dynamodb: Any, sqs: Any, race_id: str, *, timeout_s: float, interval_s: float = 1.0
) -> AuditReport:
    """The audit of a local stack's race, repeated for a while if it fails: the last
    confirmation email may still be on its way through the rate-limited sender."""
    deadline = time.monotonic() + timeout_s
    while True:
        report = audit(
            dynamodb,
            sqs,
            race_id,
            provider=local_provider(stack),
            mailbox_url=stack.mailbox_url,
            queue_urls=stack.queue_urls,
        )
        if report.ok or time.monotonic() > deadline:
            return report
        time.sleep(interval_s)


def mailbox_confirmations(mailbox_url: str) -> Confirmations:
    """Confirmations in the local SES stand-in's mailbox, per registration."""

    def confirmations(registration_ids: set[str]) -> Counter[str]:
        mail = _get_json(f"{mailbox_url}/messages.json")["messages"]
        # A confirmation names its registration id; count each registration's emails.
        return Counter(rid for m in mail for rid in _registration_ids(m) if rid in registration_ids)

    return confirmations


def audit_stage(session: Any, function: str, race_ids: list[str] | None = None) -> list[AuditReport]:
    """Audit a stage found through one of its functions (every race unless ``race_ids``)."""
    dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
    stage = discover(session.client("lambda"), sqs, function)
    provider = Provider(stage.payments_api_base, stage_secret_key(stage))
    confirmations = DeliveredConfirmations(dynamodb, stage)
    ids = race_ids or _race_ids(dynamodb, stage.tables["Races"])
    return [
        audit(
            dynamodb,
            sqs,
            race_id,
            provider=provider,
            queue_urls=stage.queue_urls,
            confirmations=confirmations,
            tables=stage.tables,
        )
        for race_id in ids
    ]


def _race_ids(dynamodb: Any, races_table: str) -> list[str]:
    ids: list[str] = []
    pages = dynamodb.get_paginator("scan").paginate(
        TableName=races_table, FilterExpression="sk = :s", ExpressionAttributeValues=values({":s": "RACE"})
    )
    for page in pages:
        ids += [from_item(i)["raceId"] for i in page["Items"]]
    return ids


def _registration_ids(message: dict[str, Any]) -> set[str]:
    """The registration a confirmation email is about, from its SES tags."""
    tags = message.get("tags", {})
    return {tags["registrationId"]} if tags.get("kind") == "confirmation" and tags.get("registrationId") else set()


def registrations_for(dynamodb: Any, race_id: str, table: str | None = None) -> list[dict[str, Any]]:
    table = table or blueprint.table("Registrations").local_name
    out: list[dict[str, Any]] = []
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        out += [from_item(i) for i in page["Items"]]
    return [r for r in out if r.get("raceId") == race_id]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--stack", default=str(blueprint.ROOT / ".local-stack" / "run" / "stack.json"))
    where.add_argument("--stage", help="a deployed stage's AdminApi function (stack output AuditFunctionName)")
    parser.add_argument("--race", action="append", help="race id (default: every race)")
    args = parser.parse_args()
    if args.stage:
        reports = audit_stage(boto3.session.Session(), args.stage, args.race)
        for report in reports:
            print(report.summary())
        sys.exit(0 if all(r.ok for r in reports) else 1)
    from local.stripe_standin.server import Keys

    info = json.load(open(args.stack))  # noqa: SIM115
    env = info["env"]
    session = local_session()
    ddb = session.client("dynamodb", endpoint_url=env["AWS_ENDPOINT_URL_DYNAMODB"])
    sqs = session.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL_SQS"])
    race_ids = args.race or [
        from_item(i)["raceId"]
        for i in ddb.scan(
            TableName=blueprint.table("Races").local_name,
            FilterExpression="sk = :s",
            ExpressionAttributeValues=values({":s": "RACE"}),
        )["Items"]
    ]
    failed = False
    for race_id in race_ids:
        report = audit(
            ddb,
            sqs,
            race_id,
            provider=Provider(env["PAYMENTS_API_BASE"], Keys().secret),
            mailbox_url=info["mailbox"],
            queue_urls=info["queueUrls"],
        )
        print(report.summary())
        failed |= not report.ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
