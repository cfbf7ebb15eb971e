"""The claim's order on the Board in a real browser: the overview's ready, scheduled and
limit figures (a limit set from the keyboard, and moved live), the list sorted by priority,
the drawer's priority change and "Start now", the add form's priority, start time (in the
browser's own time zone) and key, a bulk Set priority; zero axe violations in light and dark
on each of those pages; and what a screen reader says of a scheduled todo."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from playwright.async_api import Page, expect

from e2e.conftest import assert_accessible, live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_e2e import tab_to
from e2e.test_board_screen_reader_e2e import screen_reader_script, spoken
from tests.conftest import make_agent


async def assert_accessible_both(page: Page, what: str) -> None:
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await assert_accessible(page, f"{what} ({scheme})")
    await page.emulate_media(color_scheme="light")


async def test_the_overview_counts_ready_and_scheduled_apart_and_a_limit_is_set_by_keyboard(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds", "docs"))
    held = await store.todo_add(agent, queue="builds", title="Held build")
    await store.todo_add(agent, queue="builds", title="Ready build")
    await store.todo_add(agent, queue="builds", title="Nightly build", delay_seconds=3 * 3600)
    await store.todo_claim(agent, held["id"], lease_seconds=3600)
    await store.queue_limit_set(ada.user_id, "builds", 1)
    await store.queue_pause(ada, "docs")

    await sign_in(page, "ada")
    await live_on(page)
    builds = page.get_by_role("region", name="Queues").get_by_role("row", name="builds")
    await expect(builds.get_by_role("link", name="1 ready in builds")).to_be_visible()
    await expect(builds.get_by_role("link", name="1 scheduled in builds")).to_be_visible()
    await expect(builds.locator("#queue-builds-limit")).to_contain_text(re.compile(r"1 of 1 running\s+At its limit"))
    docs = page.get_by_role("region", name="Queues").get_by_role("row", name="docs")
    await expect(docs.locator("td[data-label=Status]")).to_contain_text("Paused")
    await expect(docs.locator("#queue-docs-limit")).to_contain_text("No limit")
    await assert_accessible_both(page, "the overview with a limited and a paused queue")

    # Keyboard alone: to the limit's field, a new number, Enter; focus comes back to the field.
    field = builds.get_by_role("textbox", name="Limit on the todos held at once in builds (0 for none)")
    await tab_to(page, field)
    await page.keyboard.press("Control+A")
    await page.keyboard.type("3")
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("status").filter(has_text="Queue builds: at most 3")).to_be_visible()
    field = page.get_by_role("textbox", name="Limit on the todos held at once in builds (0 for none)")
    await expect(field).to_be_focused()
    await expect(field).to_have_value("3")
    builds = page.get_by_role("region", name="Queues").get_by_role("row", name="builds")
    await expect(builds.locator("#queue-builds-limit")).to_have_text(re.compile(r"^\s*Limit: 1 of 3 running\s*$"))

    # Set elsewhere (the command line): the open overview follows at once.
    await live_on(page)
    await store.queue_limit_set(ada.user_id, "builds", 1)
    await expect(builds.locator("#queue-builds-limit")).to_contain_text("1 of 1 running")
    await store.todo_add(agent, queue="builds", title="Another nightly", delay_seconds=600)
    await expect(builds.get_by_role("link", name="2 scheduled in builds")).to_be_visible()

    await builds.get_by_role("link", name="2 scheduled in builds").click()
    await expect(page).to_have_url(f"{live_server.url}/?queue=builds&start=scheduled")
    rows = page.locator("#todo-rows > tr")
    await expect(rows).to_have_count(2)
    await expect(page.get_by_label("Start")).to_have_value("scheduled")
    no_csp_errors(page)


async def test_the_list_sorts_by_priority_and_the_drawer_reprioritizes_and_starts_now(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    for title, priority in (("Low", 4), ("Urgent", 0), ("Normal", 2)):
        await store.todo_add(agent, queue="builds", title=title, priority=priority)
    later = await store.todo_add(agent, queue="builds", title="Later", priority=1, delay_seconds=3 * 3600,
                                 key="nightly-42")

    await sign_in(page, "ada")
    await live_on(page)
    # The search's Sort choice, by keyboard (the priority shows beside each row's state).
    sort = page.get_by_label("Sort", exact=True)
    await tab_to(page, sort)
    await sort.select_option("priority")
    await page.get_by_role("button", name="Search", exact=True).press("Enter")
    await expect(page).to_have_url(f"{live_server.url}/?sort=priority")
    titles = page.locator("#todo-rows > tr > th")
    await expect(titles).to_have_text(["Urgent", "Later", "Normal", "Low"])
    await expect(page.locator("#todo-rows .priority")).to_have_text(["priority P0", "priority P1", "priority P2",
                                                                     "priority P4"])
    await expect(page.locator("table.todos caption")).to_contain_text("Sorted by Priority, P0 first.")
    later_row = page.get_by_role("row", name="Later")
    await expect(later_row.locator("td[data-label=State]")).to_contain_text("pending priority P1, scheduled, starts in 3 h")
    starts = later["run_at"].astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    await expect(later_row.locator("time[data-starts]")).to_have_attribute("title", starts)
    await assert_accessible_both(page, "the list sorted by priority, with a scheduled todo")

    await later_row.get_by_role("link", name="Later").click()
    dialog = page.get_by_role("dialog", name="Later")
    await expect(dialog.locator("#drawer-starts")).to_contain_text(f"starts in 3 h (at {starts})")
    await expect(dialog.get_by_text("nightly-42")).to_be_visible()
    await expect(dialog.get_by_role("button", name="Claim")).to_have_count(0)
    await assert_accessible_both(page, "the drawer of a scheduled todo")
    # Keyboard alone: the priority's choice, then its button.
    choice = dialog.get_by_role("combobox", name="Priority")
    await expect(choice).to_have_value("1")
    await tab_to(page, choice)
    await choice.select_option("0")
    await page.keyboard.press("Tab")
    await expect(dialog.get_by_role("button", name="Set priority")).to_be_focused()
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Later")
    await expect(dialog.get_by_role("status")).to_have_text("Priority set to P0.")
    assert (await store.todo_get(ada, later["id"]))["priority"] == 0
    await expect(page).to_have_url(re.compile(r"/todos/[^?]+\?sort=priority$"))  # the list's view kept

    start = dialog.get_by_role("button", name="Start now")
    await tab_to(page, start)
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Later")
    await expect(dialog.get_by_role("status")).to_contain_text("Started.")
    await expect(dialog.locator("#drawer-starts")).to_have_count(0)
    await expect(dialog.get_by_role("button", name="Claim")).to_be_visible()
    await store.todo_claim(agent, later["id"])  # claimable now (while scheduled, a claim is a Conflict)
    no_csp_errors(page)


async def test_the_add_form_takes_a_priority_a_start_time_in_the_browsers_zone_and_a_key(browser, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    berlin = ZoneInfo("Europe/Berlin")
    local = (datetime.now(berlin) + timedelta(days=1)).replace(hour=10, minute=30, second=0, microsecond=0)
    context = await browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900},
                                        timezone_id="Europe/Berlin")
    page = await context.new_page()
    try:
        await sign_in(page, "ada")
        await page.goto("/todos/new")
        await expect(page.locator("#add-start_at-help")).to_contain_text("your browser's time zone (Europe/Berlin)")
        await expect(page.get_by_label("Priority")).to_have_value("2")
        await assert_accessible_both(page, "the add form")
        await page.get_by_label("Queue").select_option(label="builds")
        await page.get_by_label("Title").fill("Nightly report")
        await page.get_by_label("Priority").select_option("1")
        await page.get_by_label("Start at (optional)").fill(local.strftime("%Y-%m-%dT%H:%M"))
        key = page.get_by_label("Key (optional)")
        await tab_to(page, key)  # the new fields are in the tab order after the title
        await page.keyboard.type("report-2026")
        await page.keyboard.press("Enter")
        await expect(page.get_by_role("heading", name="Board", level=1)).to_be_visible()
        await expect(page.locator(".flash")).to_contain_text(re.compile(
            r"Added “Nightly report” to queue builds\. It is scheduled to start in .+ Its priority is P1\."))
        [todo] = (await store.todo_list(ada))["todos"]
        assert (todo["priority"], todo["run_at"], todo["key"]) == (1, local.astimezone(timezone.utc), "report-2026")

        # Bad values: each said beside its field, what was typed kept, nothing added.
        await page.goto("/todos/new")
        await page.get_by_label("Queue").select_option(label="builds")
        await page.get_by_label("Title").fill("Too long a key")
        await page.get_by_label("Key (optional)").fill("k" * 201)
        await page.get_by_role("button", name="Add todo").click()
        summary = page.get_by_role("alert")
        await expect(summary).to_contain_text("The key must be a string of 1 to 200 bytes.")
        await expect(page.get_by_label("Key (optional)")).to_have_attribute("aria-invalid", "true")
        await assert_accessible_both(page, "the add form with an error")
        assert len((await store.todo_list(ada))["todos"]) == 1
    finally:
        await context.close()


async def test_a_bulk_set_priority_confirms_then_changes_the_pending_todos(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    a = await store.todo_add(agent, queue="builds", title="First")
    b = await store.todo_add(agent, queue="builds", title="Second")
    await sign_in(page, "ada")
    await live_on(page)
    for todo in (b, a):  # by keyboard, as the list shows them (newest first)
        await page.get_by_label(f"Select {todo['title']}").focus()
        await page.keyboard.press("Space")
    await page.get_by_label("Priority", exact=True).select_option("0")
    await page.get_by_role("button", name="Set priority of selected…").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Set the priority of 2 todos to P0?")
    await assert_accessible_both(page, "the bulk Set priority confirmation")
    await page.get_by_role("button", name="Set the priority of 2 todos to P0").click()
    await expect(page.locator(".flash")).to_contain_text("Set 2 todos to P0.")
    assert [(await store.todo_get(ada, t["id"]))["priority"] for t in (a, b)] == [0, 0]


async def test_a_screen_reader_hears_when_a_scheduled_todo_starts(browser, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    todo = await store.todo_add(agent, queue="builds", title="Nightly build", delay_seconds=3 * 3600)
    starts = todo["run_at"].astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    context = await browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900},
                                        bypass_csp=True)  # the injected reader only; the page is unchanged
    await context.add_init_script(screen_reader_script())
    page = await context.new_page()
    try:
        await sign_in(page, "ada")
        await live_on(page)
        # The row's State cell, read by the reader's own cursor, item by item.
        await page.evaluate("""async () => {
            const cell = document.querySelector('#todo-rows td[data-label=State]');
            await window.__vsr.virtual.start({container: cell});
            for (let i = 0; i < 12; i++) await window.__vsr.virtual.next();
        }""")
        heard = await spoken(page)
        # The cell as a whole, then its parts: the words, and the exact time (the reader gives
        # the time's tooltip as its name; the page says it again in words for readers that do not).
        assert heard[0] == f"cell, pending priority P2, scheduled, starts in 3 h (at {starts})", heard
        assert heard[1:10] == ["pending", "priority", "P2", ",", "scheduled, starts", f"time, {starts}", "in 3 h",
                               f"end of time, {starts}", f"(at {starts})"], heard
        await page.evaluate("async () => await window.__vsr.virtual.stop()")
    finally:
        await context.close()
