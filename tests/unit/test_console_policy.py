"""The console's refund policy in words and its fee in the currency's own units
(site/admin/src/policy.js and zone.js): what a director reads back beside the form is the
policy the API keeps, and a fee typed in units is the API's smallest unit in two-, zero- and
three-decimal currencies. Runs in the installer's Node 22 (no sockets)."""

from __future__ import annotations

import json
import subprocess

import pytest

import blueprint
from tests.unit.test_console_srp import NODE

SRC = blueprint.ROOT / "site" / "admin" / "src"


def _node(script: str) -> object:
    if not NODE.exists():
        pytest.fail(f"Node 22 is not installed at {NODE}: run `local/install.sh node`")
    code = (
        f"import * as p from {json.dumps((SRC / 'policy.js').as_uri())};\n"
        f"import * as z from {json.dumps((SRC / 'zone.js').as_uri())};\n"
        f"console.log(JSON.stringify(await ({script})(p, z)));"
    )
    proc = subprocess.run(
        [str(NODE), "--input-type=module", "-e", code], capture_output=True, text=True, check=False, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def words(policy: dict, currency: str) -> str:
    return str(_node(f"(p) => p.policyInWords({json.dumps(policy)}, {json.dumps(currency)})"))


# What a policy without switches or deferrals (issue 41) ends with.
NO_MOVES = " Runners may not switch event. Runners may not defer to the next edition."
TWO_TIERS = [{"until": "2027-03-01", "percent": 100}, {"until": "2027-05-01", "percent": 50}]


@pytest.mark.parametrize(
    ("currency", "fee", "said"),
    [
        ("EUR", 250, "a 2.50 EUR fee"),
        ("JPY", 250, "a 250 JPY fee"),
        ("KWD", 2500, "a 2.500 KWD fee"),
        ("USD", 0, "no fee"),
    ],
)
def test_the_policy_in_words_names_each_tier_and_the_fee_in_the_currencys_units(currency, fee, said) -> None:
    policy = {"runnersMayCancel": True, "tiers": TWO_TIERS, "feeCents": fee, "editUntil": "2027-05-15"}
    assert words(policy, currency) == (
        f"Runners may cancel their own entry: 100 % until 1 March 2027, 50 % until 1 May 2027, nothing after; {said}. "
        "Runners may edit their details until 15 May 2027. Runners may not hand their place to someone else." + NO_MOVES
    )


def test_a_policy_that_is_off_says_so() -> None:
    off = {"runnersMayCancel": False, "tiers": TWO_TIERS, "feeCents": 0, "editUntil": None}
    assert words(off, "EUR") == (
        "Runners may not cancel their own entry. Runners may not edit their details. "
        "Runners may not hand their place to someone else." + NO_MOVES
    )
    none = {"runnersMayCancel": True, "tiers": [], "feeCents": 0, "editUntil": None}
    assert words(none, "EUR").startswith("Runners may cancel their own entry, with no refund.")


@pytest.mark.parametrize(
    ("currency", "fee", "refundable", "said"),
    [
        ("EUR", 500, True, "the new runner pays a 5.00 EUR fee; a place taken over may be refunded by the tiers"),
        ("JPY", 500, False, "the new runner pays a 500 JPY fee; a place taken over is not refunded"),
        ("USD", 0, True, "no fee; a place taken over may be refunded by the tiers"),
    ],
)
def test_handing_a_place_over_says_until_when_the_new_runners_fee_and_whether_it_is_refunded(
    currency, fee, refundable, said
) -> None:
    policy = {"runnersMayCancel": False, "tiers": [], "feeCents": 0, "editUntil": None,
              "transfersUntil": "2027-04-01", "transferFeeCents": fee, "transferredRefundable": refundable}  # fmt: skip
    assert words(policy, currency) == (
        "Runners may not cancel their own entry. Runners may not edit their details. "
        f"Runners may hand their place to someone else until 1 April 2027; {said}." + NO_MOVES
    )


@pytest.mark.parametrize(("fee", "said"), [(500, "you keep 5.00 EUR"), (0, "you keep nothing")])
def test_switching_and_deferring_say_until_when_and_what_the_organiser_keeps(fee, said) -> None:
    policy = {"runnersMayCancel": False, "tiers": [], "feeCents": 0, "editUntil": None,
              "switchesUntil": "2027-04-01", "deferralsUntil": "2027-04-15", "deferralFeeCents": fee}  # fmt: skip
    assert words(policy, "EUR").endswith(
        "Runners may switch to another event until 1 April 2027 (a dearer one's difference paid, a cheaper one's "
        f"refunded). Runners may defer to the next edition until 15 April 2027; what they paid becomes a code there, "
        f"{said}."
    )


def test_a_fee_typed_in_units_is_the_smallest_unit_and_back() -> None:
    typed = [
        ("2.50", "EUR"),
        ("2.5", "EUR"),
        ("250", "JPY"),
        ("2.500", "KWD"),
        ("2.5", "KWD"),
        ("2.505", "EUR"),
        ("2.5", "JPY"),
    ]
    minor = _node(f"(p, z) => {json.dumps(typed)}.map(([t, c]) => z.minorFrom(t, c))")
    assert minor == [250, 250, 250, 2500, 2500, None, None]  # NaN (not an amount) is null in JSON
    shown = _node("(p, z) => [[250, 'EUR'], [250, 'JPY'], [2500, 'KWD']].map(([m, c]) => p.feeInWords(m, c))")
    assert shown == ["2.50 EUR", "250 JPY", "2.500 KWD"]
