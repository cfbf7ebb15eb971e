"""Two members of one team signed in at once, in two browser contexts: what one does on the
Board reaches the other's Board live, and the other's virtual screen reader hears it once,
naming who did it ("Bob canceled todo Deploy the API"), whether their drawer of that todo is
open or not (the drawer's own attempt line for the same change is not said as well); the
Activity page lists it and is used by keyboard alone; axe finds nothing in either scheme."""

from __future__ import annotations

from contextlib import asynccontextmanager

from playwright.async_api import Page, expect

from e2e.conftest import live_on, no_csp_errors, sign_in
from e2e.test_board_deletes_e2e import accessible_in_both_schemes
from e2e.test_board_e2e import tab_to
from e2e.test_board_screen_reader_e2e import screen_reader_script, spoken
from tests.acceptance.test_board_activity import person, team_of

# What the page itself put into its two logs of news, beside what the simulator says.
RECORD_ACTIVITY = """
window.__news = [];
new MutationObserver((records) => {
  for (const r of records) for (const n of r.addedNodes) {
    const log = n.parentElement && n.parentElement.closest && n.parentElement.closest("#activity-news, #attempts-news");
    if (log && n.textContent) window.__news.push(n.textContent);
  }
}).observe(document, {childList: true, subtree: true});
"""



async def switch_to(page, team: dict) -> None:
    """The Board switched to the team's space with the header's Space control."""
    await page.goto("/")
    await page.get_by_label("Space").select_option(str(team["id"]))
    await page.get_by_role("button", name="Switch").click()
    await page.wait_for_load_state()

@asynccontextmanager
async def member(browser, live_server, name: str, team: dict, *, reader: bool = False):
    """A person signed in with the team's space as their Board's, in a context of their own."""
    context = await browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900},
                                        bypass_csp=reader)  # the injected reader only; the page is unchanged
    if reader:
        await context.add_init_script(screen_reader_script() + RECORD_ACTIVITY)
    try:
        page = await context.new_page()
        page.console_errors = []
        page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
        await sign_in(page, name)
        await switch_to(page, team)
        yield page
    finally:
        await context.close()


async def cancel(page: Page, todo: dict) -> None:
    await page.goto(f"/todos/{todo['id']}/confirm-cancel")
    await page.get_by_role("button", name="Cancel todo", exact=True).click()
    await expect(page.get_by_role("status").filter(has_text="Canceled.")).to_be_visible()


async def said(page: Page, text: str) -> list[str]:
    """Once the page has put text in a news log: what the reader said of it, and what the page put."""
    await page.wait_for_function("(line) => window.__news.includes(line)", arg=text)
    await page.wait_for_timeout(500)  # anything said again, or a second line of the same change, arrives by now
    return [p for p in await spoken(page) if p.startswith("polite: ")]


async def test_a_members_cancel_reaches_another_members_board_live_and_is_heard_once_naming_them(browser,
                                                                                                 live_server):
    store = live_server.store
    team, agent = await team_of(store, bob="operator")
    api = await store.todo_add(agent, queue="deploys", title="Deploy the API")
    web = await store.todo_add(agent, queue="deploys", title="Deploy the web app")
    await store.todo_claim(agent, web["id"], claimant="deployer/run-1")

    async with member(browser, live_server, "ada", team, reader=True) as ada, \
            member(browser, live_server, "bob", team) as bob:
        await live_on(ada)
        await ada.evaluate("async () => { await window.__vsr.virtual.start({container: document.body}); }")
        await ada.evaluate("async () => await window.__vsr.virtual.clearSpokenPhraseLog()")

        # The list: Bob cancels, Ada's row changes and she hears who did it, once.
        await cancel(bob, api)
        row = ada.get_by_role("row", name="Deploy the API")
        await expect(row.locator(".state")).to_have_text("canceled")
        heard = await said(ada, "Bob canceled todo Deploy the API")
        assert heard == ["polite: Bob canceled todo Deploy the API"], heard
        assert await ada.evaluate("window.__news") == ["Bob canceled todo Deploy the API"]

        # The drawer open on a held todo: Bob's cancel closes its attempt, and Ada hears who
        # canceled it, not that and the attempt's line besides.
        await ada.get_by_role("link", name="Deploy the web app").click()
        dialog = ada.get_by_role("dialog", name="Deploy the web app")
        await expect(dialog).to_be_visible()
        await live_on(ada, watching=web["id"])
        await ada.evaluate("async () => await window.__vsr.virtual.clearSpokenPhraseLog()")
        await ada.evaluate("window.__news = []")
        await cancel(bob, web)
        await expect(dialog.locator("#attempt-1")).not_to_have_class("attempt attempt-open")
        await expect(dialog.get_by_text("Canceled by bob,")).to_be_visible()  # the record, under the attempts
        heard = await said(ada, "Bob canceled todo Deploy the web app")
        assert heard == ["polite: Bob canceled todo Deploy the web app"], heard
        assert await ada.evaluate("window.__news") == ["Bob canceled todo Deploy the web app"]
        await ada.keyboard.press("Escape")
        no_csp_errors(bob)


async def test_the_activity_page_filters_by_keyboard_alone_and_is_accessible_in_both_schemes(page: Page, live_server):
    store = live_server.store
    team, agent = await team_of(store, ("deploys", "builds"), bob="operator")
    api = await store.todo_add(agent, queue="deploys", title="Deploy the API")
    build = await store.todo_add(agent, queue="builds", title="Build")
    bob = await store.human_in(await person(store, "bob"), team["id"])
    await store.todo_cancel(bob, api["id"])
    await store.todos_set_priority(bob, [build["id"]], 0)
    await sign_in(page, "ada")
    await switch_to(page, team)

    await tab_to(page, page.get_by_role("link", name="Activity"))
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Activity", level=1)).to_be_visible()
    table = page.get_by_role("table", name="What people did in ops, newest first")
    await expect(table.get_by_role("row")).to_have_count(5)  # the heading's, and four records
    await accessible_in_both_schemes(page, "the Activity page", "board-activity")

    await tab_to(page, page.get_by_label("Action"))
    await page.keyboard.press("ArrowDown")  # a select steps through its options by keyboard
    while await page.get_by_label("Action").input_value() != "cancel":
        await page.keyboard.press("ArrowDown")
    await tab_to(page, page.get_by_role("button", name="Filter"))
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(f"{live_server.url}/activity?action=cancel")
    await expect(table.get_by_role("row")).to_have_count(2)
    link = table.get_by_role("link", name=f"todo {api['id'][:8]}")
    await tab_to(page, link)
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Deploy the API", level=2)).to_be_visible()

    await page.goto("/activity?since=yesterday")
    alert = page.get_by_role("alert")
    await expect(alert).to_contain_text("The since filter must be a date or a date and time")
    await expect(page.get_by_label("Since")).to_have_attribute("aria-invalid", "true")
    await accessible_in_both_schemes(page, "the Activity page with a bad filter", "board-activity-error")
    no_csp_errors(page)
