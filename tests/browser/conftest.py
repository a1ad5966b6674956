"""Browser tests: Debian's headless Chromium, driven by Playwright, against the local stack.

The stack is started the same way as for the integration tests (``tests.integration``'s
``Backend`` gives direct handles for arranging state), but package-scoped: it stops when
the browser tests are done, so a full ``pytest tests`` run never keeps two stacks up at once.

Every test gets a fresh browser context (its own sessionStorage) and leaves a full-page
screenshot in ``test-artifacts/browser/<test>.png``; uncaught page errors fail the test.
Never ``playwright install``: the browser is the system's ``/usr/bin/chromium``
(``local/install.sh`` installs it).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright

import blueprint
from local import directors
from local.stack import LocalStack
from tests.integration.conftest import Backend, backend_for, local_stack
from tools.smoke_director import DirectorSecret

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
]
ARTIFACTS = blueprint.ROOT / "test-artifacts" / "browser"
SITE_BUILD = blueprint.ROOT / ".build" / "site"
# Generous: a loaded 2-core machine runs the stack, its pollers and the browser together.
EXPECT_TIMEOUT_MS = 20_000
ACTION_TIMEOUT_MS = 20_000
NAVIGATION_TIMEOUT_MS = 45_000

expect.set_options(timeout=EXPECT_TIMEOUT_MS)


@pytest.fixture(scope="package")
def built_site() -> Path:
    """The fingerprinted build the gateway serves (``make test`` builds it first; a direct
    ``pytest tests/browser`` builds it here, so the tests never run against stale files)."""
    subprocess.run(
        [sys.executable, str(blueprint.ROOT / "site" / "build.py"), "--out", str(SITE_BUILD)],
        check=True,
        capture_output=True,
    )
    return SITE_BUILD


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory, built_site: Path) -> Iterator[LocalStack]:
    with local_stack(tmp_path_factory.mktemp("browser-stack")) as running:
        yield running


@pytest.fixture(scope="package")
def backend(stack: LocalStack) -> Backend:
    return backend_for(stack)


@pytest.fixture(scope="module")
def demo_seed(stack: LocalStack) -> str:
    """The demo director's TOTP seed (kept in the stack's Secrets Manager), to type their codes."""
    secrets = directors._clients({"env": stack.function_env()})[1]
    return DirectorSecret.read(secrets, directors.DEMO_SECRET).totpSeed


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
    yield browser
    browser.close()


def artifact_name(node: pytest.Item, suffix: str = "") -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^\w.-]+", "_", node.name).strip("_")
    return ARTIFACTS / f"{safe}{suffix}.png"


@pytest.fixture
def new_page(browser: Browser, stack: LocalStack, request: pytest.FixtureRequest) -> Iterator[Callable[..., Page]]:
    """Opens pages in fresh contexts (``new_page(viewport=..., is_mobile=True, ...)``). At the end
    the last page opened is screenshotted to ``test-artifacts/browser/<test>.png`` (pass or
    fail), and any uncaught JavaScript error or CSP violation on any page fails the test."""
    contexts: list[BrowserContext] = []
    pages: list[Page] = []
    errors: list[str] = []

    def open_page(**context_options: Any) -> Page:
        context_options.setdefault("viewport", {"width": 1024, "height": 768})
        context_options.setdefault("locale", "en-US")
        context_options.setdefault("timezone_id", "UTC")
        context = browser.new_context(base_url=stack.url, **context_options)
        context.set_default_timeout(ACTION_TIMEOUT_MS)
        context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(f"{page.url}: {exc}"))
        # The content security policy is part of what is tested: a violation (an inline
        # script or style, an origin not allowed) fails the test like an uncaught error.
        page.on(
            "console",
            lambda msg: (
                errors.append(f"{page.url}: CSP: {msg.text}") if "Content Security Policy" in msg.text else None
            ),
        )
        pages.append(page)
        return page

    yield open_page
    try:
        if pages and not pages[-1].is_closed():
            pages[-1].screenshot(path=artifact_name(request.node), full_page=True)
    finally:
        for context in contexts:
            context.close()
    assert not errors, f"uncaught JavaScript errors or CSP violations: {errors}"


@pytest.fixture
def page(new_page: Callable[..., Page]) -> Page:
    """A desktop-sized page in a fresh context."""
    return new_page()


@pytest.fixture
def snap(request: pytest.FixtureRequest) -> Callable[[Page, str], None]:
    """``snap(page, "step")`` saves ``test-artifacts/browser/<test>--step.png``."""

    def save(page: Page, step: str) -> None:
        page.screenshot(path=artifact_name(request.node, f"--{step}"), full_page=True)

    return save
