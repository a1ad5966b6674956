"""The content security policy, in a real browser: the site and the API docs run under it
with no violation (the fixture fails a test on any), and an inline script is refused."""

from __future__ import annotations

from playwright.sync_api import Page, expect

import blueprint


def test_the_site_and_the_api_docs_send_the_policy_and_run_under_it(page: Page, stack) -> None:
    resp = page.goto("/")
    assert resp is not None
    csp = resp.headers["content-security-policy"]
    assert csp == blueprint.content_security_policy(blueprint.PaymentOrigins.single(stack.stripe_url))
    assert "unsafe-inline" not in csp
    expect(page.get_by_test_id("view")).not_to_have_attribute("aria-busy", "true")  # the app ran

    docs = page.goto("/api/docs")
    assert docs is not None and docs.headers["content-security-policy"] == csp
    expect(page.locator(".opblock").first).to_be_visible()  # Swagger UI rendered the document
    expect(page.get_by_text("/api/races/{raceId}", exact=True).first).to_be_visible()


def test_an_inline_script_is_refused(browser, stack) -> None:
    # Its own context, not new_page's: the violation it provokes is the point, not a failure.
    context = browser.new_context(base_url=stack.url)
    page = context.new_page()
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.goto("/")
    page.evaluate("() => { const s = document.createElement('script'); s.textContent = 'window.__ran = 1'; "
                  "document.body.appendChild(s); }")  # fmt: skip
    assert page.evaluate("() => window.__ran") is None
    page.wait_for_timeout(200)
    context.close()
    assert any("script-src" in text for text in refused), refused
