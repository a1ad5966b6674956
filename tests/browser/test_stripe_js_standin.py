"""The Stripe.js stand-in in Chromium: a merchant page on its own origin mounts the card form
(an iframe from the stand-in's origin), confirms, declines, and answers 3-D Secure.

The merchant here is a few lines of HTML served by the test, so this checks the stand-in
alone; the runner's site uses the same calls. Every request the merchant's server receives is
recorded: no card number may reach it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import stripe
from playwright.sync_api import Browser, Page, expect

import blueprint
from local import servers
from local.stripe_standin.server import Keys

pytestmark = pytest.mark.browser

KEYS = Keys()

MERCHANT_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Merchant</title>
<script src="{standin}/v3/"></script></head><body>
<div id="pay"></div><button id="submit" type="button">Pay</button><p id="result"></p>
<script>
  const params = new URLSearchParams(location.search);
  const stripe = Stripe("{pk}");
  const elements = stripe.elements({{ clientSecret: params.get("cs") }});
  elements.create("payment").mount("#pay");
  document.getElementById("submit").addEventListener("click", async () => {{
    const {{ error, paymentIntent }} = await stripe.confirmPayment({{ elements, redirect: "if_required",
      confirmParams: {{ return_url: location.href }} }});
    document.getElementById("result").textContent =
      error ? "error " + (error.decline_code || error.code) : "paid " + paymentIntent.status;
  }});
</script></body></html>"""


class Merchant:
    """The merchant's web server: serves the page, records every request it gets."""

    def __init__(self, standin: str) -> None:
        self.requests: list[str] = []
        merchant = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:
                merchant.requests.append(self.path)
                body = MERCHANT_PAGE.format(standin=standin, pk=KEYS.publishable).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                merchant.requests.append(self.path + " " + self.rfile.read(length).decode(errors="replace"))
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = servers.free_port()
    cmd = [sys.executable, "-m", "local.stripe_standin", "--port", str(port)]
    log_dir: Path = tmp_path_factory.mktemp("stripe-js")
    proc = servers.spawn("stripe", cmd, port, log_dir, env={"PYTHONPATH": str(blueprint.ROOT)}, cwd=blueprint.ROOT)
    yield proc.endpoint
    proc.stop()


@pytest.fixture(scope="module")
def merchant(standin: str) -> Iterator[Merchant]:
    m = Merchant(standin)
    yield m
    m.server.shutdown()


@pytest.fixture
def client(standin: str) -> stripe.StripeClient:
    return stripe.StripeClient(KEYS.secret, base_addresses={"api": standin}, max_network_retries=2)


@pytest.fixture
def checkout(browser: Browser, merchant: Merchant, client: stripe.StripeClient) -> Iterator[Any]:
    contexts = []
    errors: list[str] = []

    def open_checkout() -> tuple[Page, stripe.PaymentIntent]:
        intent = client.v1.payment_intents.create(
            params={"amount": 2500, "currency": "eur", "payment_method_types": ["card"]}
        )
        context = browser.new_context()
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{merchant.url}/checkout?cs={intent.client_secret}")
        return page, intent

    yield open_checkout
    for context in contexts:
        context.close()
    assert not errors


def pay(page: Page, number: str) -> None:
    card = page.frame_locator("iframe[title='Secure payment input frame']")
    card.locator("#number").fill(number)
    card.locator("#expiry").fill("12 / 34")
    card.locator("#cvc").fill("123")
    page.click("#submit")


def test_a_card_pays_from_the_standins_own_origin(
    checkout: Any, merchant: Merchant, standin: str, client: stripe.StripeClient
) -> None:
    page, intent = checkout()
    frame = page.locator("iframe[title='Secure payment input frame']")
    assert frame.get_attribute("src").startswith(f"{standin}/elements/payment")  # type: ignore[union-attr]
    assert not frame.get_attribute("src").startswith(merchant.url)  # type: ignore[union-attr]
    pay(page, "4242 4242 4242 4242")
    expect(page.locator("#result")).to_have_text("paid succeeded")
    assert client.v1.payment_intents.retrieve(intent.id).status == "succeeded"
    assert not any("4242" in r for r in merchant.requests), merchant.requests


def test_a_decline_then_a_success_on_the_same_intent(checkout: Any, client: stripe.StripeClient) -> None:
    page, intent = checkout()
    pay(page, "4000 0000 0000 0002")
    expect(page.locator("#result")).to_have_text("error generic_decline")
    pay(page, "4000 0000 0000 9995")
    expect(page.locator("#result")).to_have_text("error insufficient_funds")
    pay(page, "4242 4242 4242 4242")
    expect(page.locator("#result")).to_have_text("paid succeeded")
    assert client.v1.payment_intents.retrieve(intent.id).status == "succeeded"


@pytest.mark.parametrize(
    ("button", "result", "status"),
    [
        ("Complete authentication", "paid succeeded", "succeeded"),
        ("Fail authentication", "error payment_intent_authentication_failure", "requires_payment_method"),
    ],
)
def test_3d_secure_is_approved_or_failed(
    checkout: Any, client: stripe.StripeClient, standin: str, button: str, result: str, status: str
) -> None:
    page, intent = checkout()
    pay(page, "4000 0025 0000 3155")
    challenge = page.locator("iframe[title='3D Secure authentication']")
    expect(challenge).to_be_visible()
    assert challenge.get_attribute("src").startswith(f"{standin}/3ds/")  # type: ignore[union-attr]
    page.frame_locator("iframe[title='3D Secure authentication']").get_by_role("button", name=button).click()
    expect(page.locator("#result")).to_have_text(result)
    expect(challenge).to_have_count(0)
    assert client.v1.payment_intents.retrieve(intent.id).status == status
