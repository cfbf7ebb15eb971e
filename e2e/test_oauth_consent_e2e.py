"""OAuth for MCP hosts in Chromium: the MCP Python SDK's OAuth client sends the person to the
consent screen, where they sign in and approve a narrowed set of verbs by keyboard alone; the
client then works with exactly those, and the person sees it under Connected agents."""

from __future__ import annotations

import asyncio

from playwright.async_api import expect

from e2e.conftest import PASSWORD, assert_accessible, make_human, no_csp_errors
from e2e.test_board_e2e import tab_to
from tests.acceptance.mcp_helpers import call
from tests.acceptance.oauth_helpers import REDIRECT, MemoryStorage, query_of, sdk_provider, sdk_session


class BrowserConsent:
    """The SDK client's redirect and callback handlers with Chromium as the person's browser:
    the client opens the authorization URL; the test, as the person, acts on what the browser
    shows; the redirect back to the client is caught in the browser."""

    def __init__(self, page):
        self.page = page
        self.opened = asyncio.Event()
        self.returned: asyncio.Future = asyncio.get_event_loop().create_future()

    async def install(self) -> None:
        async def back(route):
            if not self.returned.done():
                self.returned.set_result(route.request.url)
            await route.fulfill(status=200, content_type="text/html",
                                body="<!doctype html><title>Connected</title><p>You can close this tab.</p>")
        await self.page.context.route(REDIRECT + "*", back)

    async def redirect_handler(self, url: str) -> None:
        await self.page.goto(url)
        self.opened.set()

    async def callback_handler(self):
        from mcp.shared.auth import AuthorizationCodeResult

        back = query_of(await asyncio.wait_for(self.returned, timeout=60))
        return AuthorizationCodeResult(code=back["code"], state=back.get("state"), iss=back.get("iss"))


async def approve_by_keyboard(page) -> None:
    """Sign in, then narrow the verbs to list_todos, get_todo and claim_next, grant queue
    builds and allow, with the keyboard alone."""
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await page.keyboard.press("Tab")  # the skip link first
    await tab_to(page, page.get_by_label("Username"))
    await page.keyboard.type("ada")
    await page.keyboard.press("Tab")
    await page.keyboard.type(PASSWORD)
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Connect SDK Host to Switchboard?")).to_be_visible()
    await expect(page.get_by_text("unverified: Switchboard cannot confirm who made it")).to_be_visible()
    await expect(page.get_by_text("will do work as you, not just read")).to_be_visible()
    await expect(page.get_by_text("must not contain passwords, tokens, keys or other secrets")).to_be_visible()
    await assert_accessible(page, "the consent screen, light")
    await page.emulate_media(color_scheme="dark")
    await assert_accessible(page, "the consent screen, dark")
    await page.emulate_media(color_scheme="light")
    # The client asked for every verb; ticked at first is a worker's loop, as in the vend wizard.
    for verb, wanted in (("heartbeat", False), ("complete", False), ("fail", False), ("claim_next", True),
                         ("list_todos", True), ("get_todo", True)):
        box = page.get_by_role("checkbox", name=verb, exact=True)
        await tab_to(page, box)
        if await box.is_checked() != wanted:
            await page.keyboard.press("Space")
        assert await box.is_checked() == wanted, verb
    release = page.get_by_role("checkbox", name="release", exact=True)
    assert not await release.is_checked()  # offered, since asked for, but ticked only on purpose
    await tab_to(page, page.get_by_label("Queues"))
    await page.keyboard.type("builds")
    await tab_to(page, page.get_by_role("button", name="Allow SDK Host"))
    await page.keyboard.press("Enter")


async def test_a_person_connects_an_sdk_host_in_the_browser_by_keyboard_and_sees_it_under_connected_agents(
        browser, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    context = await browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.console_errors = []
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    consent = BrowserConsent(page)
    await consent.install()
    person = None
    try:
        async def as_the_person():
            await consent.opened.wait()
            try:
                await approve_by_keyboard(page)
            except BaseException as e:  # fail the client's wait at once, not after its timeout
                if not consent.returned.done():
                    consent.returned.set_exception(e)
                raise

        person = asyncio.create_task(as_the_person())
        storage = MemoryStorage()
        async with sdk_session(live_server.url, sdk_provider(live_server.url, storage, consent)) as client:
            await person
            listed = {t.name for t in (await client.list_tools()).tools}
            assert listed == {"list_todos", "get_todo", "claim_next"}
            assert (await call(client, "claim_next", {"queue": "builds"}))["todo"] is None
        no_csp_errors(page)  # the consent form's post ended at the client's redirect URI
        await page.goto("/endpoints")
        connected = page.get_by_role("table", name="Agents connected with OAuth, newest first")
        row = connected.get_by_role("row", name="SDK Host")
        await expect(row).to_contain_text("list_todos, get_todo, claim_next")
        await expect(row).to_contain_text("builds")
        await expect(row).to_contain_text("unverified")
        await assert_accessible(page, "Connected agents, light")
        await page.emulate_media(color_scheme="dark")
        await assert_accessible(page, "Connected agents, dark")
        grants = [e for e in await store.endpoints_of_user(ada.user_id) if e["kind"] == "oauth"]
        assert [(g["client_name"], g["queues"]) for g in grants] == [("SDK Host", ["builds"])]
    finally:
        if person is not None and not person.done():
            person.cancel()
        await context.close()


async def test_a_desktop_hosts_private_use_redirect_and_its_cleaned_name_are_shown_plainly_on_the_consent_screen(
        page, live_server):
    """A desktop host registers a private-use redirect (RFC 8252 section 7.1) with a name
    holding a right-to-left override: the consent screen names it in its own order and says
    where the person returns."""
    import httpx

    from tests.acceptance.oauth_helpers import authorize, authorize_params, pkce, register

    from e2e.conftest import sign_in

    redirect = "cursor://anysphere.cursor-retrieval/oauth/callback"
    await make_human(live_server.store, "ada")
    async with httpx.AsyncClient(base_url=live_server.url) as c:
        r = await register(c, name="Evil\u202e Host\u200b", redirect_uris=[redirect])
        assert r.status_code == 201, r.text
        r = await authorize(c, authorize_params(r.json()["client_id"], pkce(), redirect_uri=redirect))
        assert r.status_code == 302, r.text
    await sign_in(page, "ada")
    await page.goto(r.headers["location"])
    await expect(page.get_by_role("heading", level=1)).to_have_text("Connect Evil Host to Switchboard?")
    shown = page.get_by_role("definition").filter(has_text="cursor://")
    await expect(shown).to_have_text(redirect)
    await assert_accessible(page, "the consent screen for a desktop host")
    no_csp_errors(page)
