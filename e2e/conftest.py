"""Browser tests: Playwright (Python, async) driving Debian's Chromium against a real server
on a cloned, migrated Postgres (the fixtures of tests/conftest.py). Offline: no CDN, axe-core
comes vendored in axe-playwright-python. CSP is enforced in the browser as in production."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Page, async_playwright, expect

from board.store.auth import hash_password
from board.config import Settings
from board.store.db import EmbeddedPostgres
from board.store.store import Human
from tests.conftest import *  # noqa: F401,F403  (pg_admin_url, db_url, live_server, ...)

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
PASSWORD = "correct horse battery"
AXE_OPTIONS = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]},
               "resultTypes": ["violations"]}

expect.set_options(timeout=10_000)


@pytest.fixture(scope="session")
def pg_admin_url():
    """The fixtures of tests/conftest.py are imported here, not shared: a sibling conftest
    gets its own session instances. Two instances of the same embedded server in one process
    would stop it under each other's feet at the end (its handle counts the process once),
    so the browser tests run their own embedded Postgres in a data dir of their own."""
    url = os.environ.get("DATABASE_URL")
    server = None
    if not url:
        base = Path(os.environ.get("SWITCHBOARD_TEST_DATA_DIR", ROOT / ".switchboard" / "test"))
        server = EmbeddedPostgres(base.with_name(base.name + "-e2e"))
        url = server.start()
    yield url
    if server is not None:
        server.stop()


@pytest.fixture
def server_settings(db_url):
    """As tests/conftest.py's, but the browser tests set up attempt history with an injected
    clock, so the sweeps stay off and a real-time reaper does not race them."""
    return Settings(database_url=db_url, secret_key="e2e-secret-key-0123456789", reaper_interval_seconds=0,
                    retry_interval_seconds=0, retention_interval_seconds=0, doorbell_heartbeat_seconds=0)


@pytest.fixture(scope="session")
async def browser():
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        await browser.close()


@pytest.fixture
async def page(browser, live_server):
    context = await browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.dialogs = []  # any alert/confirm/prompt that fires (none should)
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.console_errors = []
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    yield page
    await context.close()  # closes its SSE stream before the server stops


async def make_human(store, name: str) -> Human:
    row = await store.user_insert(name, hash_password(PASSWORD))
    return Human(row["id"], row["username"])


async def sign_in(page: Page, name: str) -> None:
    await page.goto("/login")
    await page.get_by_label("Username").fill(name)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Board", level=1)).to_be_visible()


async def assert_accessible(page: Page, what: str) -> None:
    results = await Axe().run(page, options=AXE_OPTIONS)
    assert results.violations_count == 0, f"axe found violations on {what}:\n{results.generate_report()}"


async def live_on(page: Page, watching: str = "") -> None:
    """Waits until the page's SSE stream (watching that todo's drawer, if any) has delivered
    its snapshot: from then on every committed change reaches the page."""
    status = page.locator("#live-status")
    await expect(status).to_have_attribute("data-state", "on")
    await expect(status).to_have_attribute("data-watching", watching)


def no_csp_errors(page: Page) -> None:
    blocked = [e for e in page.console_errors if re.search(r"Content Security Policy|Refused to", e)]
    assert not blocked, blocked
