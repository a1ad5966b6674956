"""The console's discount codes page in headless Chromium against the local stack: a director
lists a race's codes with their uses against their limits, makes one (the API's field errors
on the fields), and makes a sponsor's batch of single-use codes whose CSV downloads; by
keyboard, labelled, in contrast, at desktop and tablet widths."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect
from racecap.setup.models import EventDraft

from tests.browser.conftest import CHROMIUM
from tests.browser.steps import accessible, console_race, tab_to, unique
from tests.browser.test_console import CONSOLE, signed_in

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]


@pytest.mark.parametrize("width", [1280, 768])
def test_a_director_lists_makes_and_batches_codes_by_keyboard(new_page, stack, backend, api, demo_seed, width) -> None:
    from tests.integration.flows import hold

    assert stack.directors is not None
    race = console_race(
        backend,
        stack.directors.demo_sub,
        opened=True,
        name=unique("Codes 10K"),
        location="Harbour",
        events=[EventDraft(name="5K", cap=20, priceCents=2000), EventDraft(name="10K", cap=20, priceCents=3000)],
    )
    page = signed_in(new_page, demo_seed, viewport={"width": width, "height": 900})
    page.goto(f"{CONSOLE}#/races/{race.raceId}")
    expect(page.get_by_role("heading", name=race.name, level=1)).to_be_focused()
    tab_to(page, "tab-codes")
    page.keyboard.press("Enter")
    heading = page.get_by_role("heading", level=1)
    expect(heading).to_have_text(f"Discount codes · {race.name}")
    expect(heading).to_be_focused()
    expect(page.get_by_test_id("codes-empty")).to_be_visible()
    accessible(page, "no codes")

    # One code, typed with the keyboard; a percentage over 100 is refused on its field.
    one = page.get_by_test_id("code-form")
    one.get_by_label("Code", exact=True).focus()
    page.keyboard.type("spring10")
    one.get_by_label("Percent off").fill("150")
    one.get_by_label("10K").check()
    one.get_by_label("Maximum uses").fill("50")
    one.get_by_label("Maximum uses").press("Enter")
    value = one.get_by_label("Percent off")
    expect(value).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_test_id("code-value-error")).not_to_be_empty()
    expect(value).to_be_focused()
    accessible(page, "a field error")
    value.fill("10")
    value.press("Enter")
    expect(page.get_by_test_id("code-alert")).to_have_text("Code SPRING10 created.")
    row = page.get_by_test_id("code-row")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("SPRING10")
    expect(row).to_contain_text("10% off")
    expect(row).to_contain_text("10K")
    expect(row.get_by_test_id("code-uses")).to_have_text("0 / 50")

    # The same code again: the API's 409 on the Code field.
    one.get_by_label("Code", exact=True).fill("Spring10")
    one.get_by_label("Percent off").fill("5")
    page.get_by_test_id("create-code").click()
    expect(page.get_by_test_id("code-code-error")).to_have_text("Already exists.")
    expect(one.get_by_label("Code", exact=True)).to_be_focused()

    # A runner uses it: the page shows the use against the limit.
    ten_k = next(e for e in api.get(f"/api/races/{race.raceId}").json()["events"] if e["name"] == "10K")
    held = hold(api, race.raceId, ten_k["eventId"]).json()["holdId"]
    assert api.put(f"/api/holds/{held}/code", json={"code": "spring10"}).status_code == 200
    page.reload()
    expect(page.get_by_test_id("code-uses")).to_have_text("1 / 50")

    # A sponsor's batch: three single-use codes of $5.00 off, their CSV downloaded.
    bulk = page.get_by_test_id("bulk-form")
    bulk.get_by_label("How many codes").fill("3")
    bulk.get_by_label("Prefix").fill("acme")
    bulk.get_by_label("Discount").select_option("AMOUNT")
    bulk.get_by_label("Amount off (USD)").fill("5.00")
    with page.expect_download() as got:
        bulk.get_by_label("Amount off (USD)").press("Enter")
    lines = Path(got.value.path()).read_text(encoding="utf-8").split()
    assert lines[0] == "code" and len(lines) == 4
    assert all(c.startswith("ACME-") and len(c) == len("ACME-") + 8 for c in lines[1:])
    expect(page.get_by_test_id("bulk-alert")).to_have_text("3 single-use codes created; the CSV is downloaded.")
    expect(page.get_by_test_id("code-row")).to_have_count(4)
    for code in lines[1:]:
        batch_row = page.get_by_test_id("code-row").filter(has_text=code)
        expect(batch_row).to_contain_text("$5.00 off")
        expect(batch_row.get_by_test_id("code-uses")).to_have_text("0 / 1")
    accessible(page, "codes")

    # A guaranteed entry (issue 43): the box, and the list saying so.
    one.get_by_label("Code", exact=True).fill("charity-run")
    one.get_by_label("Percent off").fill("100")
    one.get_by_label("Guaranteed entry (charity, qualifier, deferral)").check()
    one.get_by_label("Percent off").press("Enter")
    expect(page.get_by_test_id("code-alert")).to_have_text("Code CHARITY-RUN created.")
    expect(page.get_by_test_id("code-row").filter(has_text="CHARITY-RUN")).to_contain_text(
        "100% off · guaranteed entry"
    )
    expect(page.get_by_test_id("code-row").filter(has_text="SPRING10")).not_to_contain_text("guaranteed")
