"""OAuth for MCP hosts in Chromium: the MCP Python SDK's OAuth client sends the person to the
consent screen, where they sign in and approve a narrowed set of verbs by keyboard alone; the
client then works with exactly those, and the person sees it under Connected agents; when the
client signs in again, the screen says it updates that connection, which stays one row."""

from __future__ import annotations

import asyncio
import re

from playwright.async_api import expect

from e2e.conftest import PASSWORD, assert_accessible, make_human, no_csp_errors
from e2e.test_board_e2e import tab_to
from board.store.vocabulary import WORKER_SCOPE
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

    def again(self) -> None:
        """Ready for the client's next sign-in."""
        self.opened = asyncio.Event()
        self.returned = asyncio.get_event_loop().create_future()

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
    # The client asked for what /mcp's 401 named, a worker's verbs: those are ticked at first.
    for verb in WORKER_SCOPE:
        await expect(page.get_by_role("checkbox", name=verb, exact=True)).to_be_checked()
    add = page.get_by_role("checkbox", name="add_todo", exact=True)
    await expect(add).not_to_be_checked()  # offered, not asked for: ticked only on purpose
    await expect(add).to_have_accessible_description(re.compile("not asked for by SDK Host"))
    for verb, wanted in (("heartbeat", False), ("note", False), ("complete", False), ("fail", False),
                         ("release", False), ("claim_next", True), ("list_todos", True), ("get_todo", True)):
        box = page.get_by_role("checkbox", name=verb, exact=True)
        await tab_to(page, box)
        if await box.is_checked() != wanted:
            await page.keyboard.press("Space")
        assert await box.is_checked() == wanted, verb
    await tab_to(page, page.get_by_label("Queue names"))
    await page.keyboard.type("builds")
    await tab_to(page, page.get_by_role("button", name="Allow SDK Host"))
    await page.keyboard.press("Enter")


async def reconsent_by_keyboard(page) -> None:
    """Signed in already: the consent screen says the connection is updated; keep queue
    builds ticked, name docs too, and allow, by keyboard."""
    await expect(page.get_by_role("heading", name="Connect SDK Host to Switchboard?")).to_be_visible()
    await expect(page.get_by_text("SDK Host is connected already")).to_be_visible()
    await expect(page.get_by_text("Allowing updates that connection")).to_be_visible()
    builds = page.get_by_role("checkbox", name="builds", exact=True)
    await expect(builds).to_be_checked()
    await expect(page.get_by_role("group", name="Queues")).to_be_visible()
    await assert_accessible(page, "the consent screen updating a connection, light")
    await page.emulate_media(color_scheme="dark")
    await assert_accessible(page, "the consent screen updating a connection, dark")
    await tab_to(page, builds)
    await page.keyboard.press("Space")
    await page.keyboard.press("Space")  # off and on again by keyboard
    await expect(builds).to_be_checked()
    await tab_to(page, page.get_by_label("Other queues"))
    await page.keyboard.type("docs")
    await tab_to(page, page.get_by_role("button", name="Allow SDK Host"))
    await page.keyboard.press("Enter")


async def test_a_person_connects_an_sdk_host_in_the_browser_by_keyboard_and_signing_in_again_keeps_one_connection(
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
        async def as_the_person(act=approve_by_keyboard):
            await consent.opened.wait()
            try:
                await act(page)
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

        # The host signs in again with its registration: the screen says it updates the
        # connection, with its queue ticked; adding a queue by keyboard, the person allows.
        await page.emulate_media(color_scheme="light")
        storage.tokens = None
        consent.again()
        person = asyncio.create_task(as_the_person(reconsent_by_keyboard))
        async with sdk_session(live_server.url, sdk_provider(live_server.url, storage, consent)) as client:
            await person
            assert (await call(client, "claim_next", {"queue": "docs"}))["todo"] is None
        grants = [e for e in await store.endpoints_of_user(ada.user_id) if e["kind"] == "oauth"]
        assert [(g["client_name"], g["queues"], g["revoked_at"]) for g in grants] == [
            ("SDK Host", ["builds", "docs"], None)]
        await page.goto("/endpoints")
        await expect(connected.get_by_role("row", name="SDK Host")).to_have_count(1)
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


async def test_an_admin_of_a_team_chooses_the_team_on_the_consent_screen_by_keyboard(page, live_server):
    """A person who is an admin of a team is asked where the application works: their own
    space (chosen at first) or the team; choosing the team by keyboard, the code is the
    team's. The screen is accessible in both schemes."""
    import httpx

    from e2e.conftest import sign_in
    from tests.acceptance.oauth_helpers import authorize, authorize_params, pkce, register
    from tests.conftest import sql_rows

    await make_human(live_server.store, "ada")
    team = (await live_server.store.team_create("ops", owner="ada"))["id"]
    async with httpx.AsyncClient(base_url=live_server.url) as c:
        r = await register(c, name="Team Host")
        r = await authorize(c, authorize_params(r.json()["client_id"], pkce()))
        assert r.status_code == 302, r.text
    returned: asyncio.Future = asyncio.get_event_loop().create_future()

    async def back(route):
        if not returned.done():
            returned.set_result(route.request.url)
        await route.fulfill(status=200, content_type="text/html", body="<!doctype html><title>Connected</title>")
    await page.context.route(REDIRECT + "*", back)
    await sign_in(page, "ada")
    await page.goto(r.headers["location"])
    where = page.get_by_role("group", name="Where it works")
    own, ops = where.get_by_role("radio", name="Your own space"), where.get_by_role("radio", name="The team ops")
    await expect(own).to_be_checked()
    await expect(ops).not_to_be_checked()
    await assert_accessible(page, "the consent screen with a team to choose, light")
    await page.emulate_media(color_scheme="dark")
    await assert_accessible(page, "the consent screen with a team to choose, dark")
    await tab_to(page, own)
    await page.keyboard.press("ArrowDown")
    await expect(ops).to_be_checked()
    await tab_to(page, page.get_by_label("Queue names"))
    await page.keyboard.type("builds")
    await tab_to(page, page.get_by_role("button", name="Allow Team Host"))
    await page.keyboard.press("Enter")
    assert "code=" in await asyncio.wait_for(returned, timeout=30)
    rows = await sql_rows(live_server.settings.database_url, "SELECT user_id, queues FROM oauth_codes")
    assert rows == [{"user_id": team, "queues": ["builds"]}]
    no_csp_errors(page)
