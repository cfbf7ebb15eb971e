"""The Board's search and live list in a real browser: WCAG 2.0-2.2 A and AA by axe on a
search result and its drawer, searching by keyboard alone with focus where a keyboard user
expects it, new todos that never move the focused row (announced, shown on request), the
pause control, and an attempt closing in an open drawer announced as one short line."""

from __future__ import annotations

import re

from datetime import datetime, timedelta, timezone

from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Page, expect

from e2e.conftest import ARTIFACTS, live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_e2e import shift_tab_to, tab_to
from tests.conftest import make_agent

AXE_22 = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]},
          "resultTypes": ["violations"]}


# Keeps every EventSource the page opens in window.__streams, to see whether one is open.
RECORD_STREAMS = """(() => {
  const Original = window.EventSource;
  window.__streams = [];
  window.EventSource = function (url, options) {
    const stream = new Original(url, options);
    window.__streams.push(stream);
    return stream;
  };
  window.EventSource.prototype = Original.prototype;
  Object.assign(window.EventSource, {CONNECTING: 0, OPEN: 1, CLOSED: 2});
})();"""


async def assert_accessible(page: Page, what: str) -> None:
    results = await Axe().run(page, options=AXE_22)
    assert results.violations_count == 0, f"axe found violations on {what}:\n{results.generate_report()}"


async def builds_with_history(store, human):
    """A Board worth searching: deploys that died and one held, docs work, and noise."""
    agent = await make_agent(store, user=human, agent_id="fixer", queues=("builds", "docs"))
    t0 = datetime.now(timezone.utc) - timedelta(hours=2)
    for i, (title, summary) in enumerate([
            ("Deploy the API to staging", "tests red: 3 of 214 failed in test_billing (<timeout>)"),
            ("Deploy the web app to staging", "the staging database refused connections " * 4),
            ("Deploy the worker to production", "canary error rate 4.1% over 2% for 10 minutes; rolled back")]):
        todo = await store.todo_add(agent, queue="builds", title=title, max_attempts=1,
                                    payload={"env": "staging" if "staging" in title else "prod"},
                                    now=t0 + timedelta(minutes=i))
        await store.todo_claim(agent, todo["id"], claimant=f"harness/box/deployer/run-{i + 1}",
                               now=t0 + timedelta(minutes=i))
        await store.todo_fail(agent, todo["id"], summary=summary, now=t0 + timedelta(minutes=i + 5))
    held = await store.todo_add(agent, queue="builds", title="Deploy the search index", payload={"env": "staging"},
                                now=t0 + timedelta(minutes=20))
    await store.todo_claim(agent, held["id"], claimant="harness/box/deployer/run-9", lease_seconds=3600)
    for i in range(4):
        await store.todo_add(agent, queue="docs", title=f"Write chapter {i + 1}", now=t0 + timedelta(minutes=30 + i))
    return agent, held


async def test_a_search_result_and_its_drawer_pass_axe(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    await builds_with_history(store, ada)
    bob = await make_human(store, "bob")
    bobs = await make_agent(store, user=bob, agent_id="bobs", queues=("builds",))
    await store.todo_add(bobs, queue="builds", title="Deploy bob's thing")

    await sign_in(page, "ada")
    await page.goto("/?title=deploy&payload_key=env&payload_value=staging&sort=updated")
    await live_on(page)
    rows = page.locator("#todo-rows > tr")
    await expect(rows).to_have_count(3)
    await expect(page.get_by_role("heading", name="Search results")).to_be_focused()
    await expect(page.get_by_role("row", name="Deploy bob's thing")).to_have_count(0)
    row = page.get_by_role("row", name="Deploy the API to staging")
    await expect(row.locator(".last-attempt")).to_have_text("failed: tests red: 3 of 214 failed in test_billing (<timeout>)")
    await expect(page.get_by_role("row", name="Deploy the search index")).to_contain_text("harness/box/deployer/run-9")
    created = row.locator("time").nth(0)
    await expect(created).to_have_text("2 h ago")
    assert (await created.get_attribute("title")).endswith("UTC")
    await assert_accessible(page, "a search result")
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / "board-search.png"), full_page=True)

    await page.goto("/?dead_letter=1&claimant=deployer")
    await expect(page.locator("#todo-rows > tr")).to_have_count(3)
    await expect(page.locator("table.todos thead th:not(.select) a")).to_have_text(["Title", "Queue", "State", "Attempt",
                                                                        "Last attempt", "Created ▼", "Updated"])
    await assert_accessible(page, "the dead letters of one claimant")

    await page.get_by_role("link", name="Deploy the web app to staging").click()
    dialog = page.get_by_role("dialog", name="Deploy the web app to staging")
    await expect(dialog).to_be_visible()
    await assert_accessible(page, "the drawer opened from a search")
    no_csp_errors(page)
    assert page.dialogs == []


async def test_keyboard_alone_searches_and_lands_on_the_results(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    await builds_with_history(store, ada)
    await sign_in(page, "ada")
    await live_on(page)

    await tab_to(page, page.get_by_label("Title contains"))
    await page.keyboard.type("deploy")
    await tab_to(page, page.get_by_label("Claimant contains"))
    await page.keyboard.type("run-2")
    await tab_to(page, page.get_by_label("State"))
    await page.keyboard.type("failed")  # a focused select picks the option typed
    await expect(page.get_by_label("State")).to_have_value("failed")
    await tab_to(page, page.get_by_role("button", name="Search"))
    await page.keyboard.press("Enter")

    await expect(page).to_have_url(f"{live_server.url}/?title=deploy&claimant=run-2&state=failed")  # bookmarkable
    heading = page.get_by_role("heading", name="Search results")
    await expect(heading).to_be_focused()  # the results, not the top of the page
    await expect(page.locator("#todo-rows > tr")).to_have_count(1)
    await expect(page.get_by_label("Title contains")).to_have_value("deploy")
    await live_on(page)
    link = page.get_by_role("link", name="Deploy the web app to staging")
    await tab_to(page, link, limit=20)  # onward from the results heading: the sort links, then the first result
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Deploy the web app to staging")
    await expect(dialog.get_by_role("heading", name="Deploy the web app to staging")).to_be_focused()
    await page.keyboard.press("Escape")
    await expect(link).to_be_focused()
    assert "claimant=run-2" in page.url  # the search survives the drawer
    no_csp_errors(page)


async def row_top(page: Page, title: str) -> float:
    return (await page.get_by_role("row", name=title).bounding_box())["y"]


async def test_a_new_todo_never_moves_the_focused_row_and_is_announced(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent, _ = await builds_with_history(store, ada)
    await sign_in(page, "ada")
    await live_on(page)
    link = page.get_by_role("link", name="Deploy the worker to production")
    await tab_to(page, link, limit=90)  # past the queues' controls and the search
    top = await row_top(page, "Deploy the worker to production")
    notice = page.locator("#new-todos[aria-live=polite]")
    await expect(notice).to_have_text("")

    await store.todo_add(agent, queue="builds", title="Added while ada reads")
    await expect(notice).to_have_text("1 new todo")
    await store.todo_add(agent, queue="docs", title="And another")
    await expect(notice).to_have_text("2 new todos")  # once the notice's few seconds have passed
    await expect(link).to_be_focused()
    assert await row_top(page, "Deploy the worker to production") == top  # not moved
    await expect(page.get_by_role("row", name="Added while ada reads")).to_have_count(0)

    show = page.get_by_role("button", name="Show the new todos")
    await shift_tab_to(page, show, 30)  # out of the table, onto the button: still held until asked for
    await page.keyboard.press("Enter")
    newest = page.get_by_role("link", name="And another")
    await expect(newest).to_be_focused()  # on the first of the rows asked for
    await expect(page.locator("#todo-rows > tr").nth(1)).to_contain_text("Added while ada reads")
    await expect(show).to_be_hidden()
    await expect(notice).to_have_text("")

    # With focus outside the table the list stays put too: the new todo waits to be asked for.
    await page.get_by_role("heading", name="Board", level=1).focus()
    first = await page.locator("#todo-rows > tr").first.inner_text()
    await store.todo_add(agent, queue="builds", title="Would arrive at the top")
    await expect(notice).to_have_text("1 new todo")
    assert await page.locator("#todo-rows > tr").first.inner_text() == first
    await expect(page.get_by_role("row", name="Would arrive at the top")).to_have_count(0)
    no_csp_errors(page)


async def test_the_pause_control_stops_live_updates_until_resumed(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("q",))
    await store.todo_add(agent, queue="q", title="Already here")
    await page.add_init_script(RECORD_STREAMS)
    await sign_in(page, "ada")
    await live_on(page)
    pause = page.locator("#live-pause")
    await expect(pause).to_have_accessible_name("Pause live updates")
    await tab_to(page, pause)
    await page.keyboard.press("Enter")
    await expect(pause).to_have_accessible_name("Resume live updates")  # it says what pressing it does next
    await expect(page.get_by_role("status").filter(has_text="Live updates")).to_have_text("Live updates: paused")
    # The page's stream is closed: nothing reaches the page until it is resumed.
    assert await page.evaluate("window.__streams.length > 0 && window.__streams.every((s) => s.readyState === 2)")
    await store.todo_add(agent, queue="q", title="Added while paused")

    await page.keyboard.press("Space")
    await expect(pause).to_have_accessible_name("Pause live updates")
    await expect(page.locator("#live-status")).to_have_text("Live updates: on")
    await expect(page.locator("#new-todos")).to_have_text("1 new todo")  # from the fresh snapshot, held
    await expect(page.get_by_role("row", name="Added while paused")).to_have_count(0)
    await expect(pause).to_be_focused()
    no_csp_errors(page)


async def test_an_attempt_closing_in_an_open_drawer_is_one_short_line_in_its_live_region(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent, held = await builds_with_history(store, ada)
    await sign_in(page, "ada")
    await page.get_by_role("link", name="Deploy the search index").click()
    dialog = page.get_by_role("dialog", name="Deploy the search index")
    await expect(dialog).to_be_visible()
    await live_on(page, watching=held["id"])
    region = dialog.locator("[aria-live=polite]")
    await expect(region).to_have_count(1)
    assert await dialog.locator("#attempts-list").evaluate("(el) => el.closest('[aria-live]')") is None
    before = await region.inner_text()

    await store.todo_fail(agent, held["id"], summary="tests red\n\n" + "stack trace line\n" * 200)
    await expect(dialog.locator("#attempt-1 h4")).to_have_text(re.compile(r"^Attempt 1, failed after \d+ \w+, by harness/box/deployer/run-9: tests red"))
    await expect(region).not_to_have_text(before)
    after = await region.inner_text()
    added = after.removeprefix(before).strip()
    assert after.startswith(before) and "\n" not in added, (before, after)
    assert added.startswith("Attempt 1 failed: tests red stack trace line") and len(added) < 110, added
    no_csp_errors(page)
