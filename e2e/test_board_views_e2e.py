"""The list's peer-console views in a real browser, by keyboard: a column heading sorts
(aria-sort moves, a second press turns the order round), the page size select, going to a
todo by typing its id in the search, a new todo in a sorted view counted and shown on
request; axe finds nothing on a sorted view in light and dark."""

from __future__ import annotations

from playwright.async_api import Page, expect

from e2e.conftest import live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_e2e import tab_to
from e2e.test_board_search_e2e import assert_accessible
from tests.conftest import make_agent


async def test_a_heading_sorts_by_keyboard_and_a_new_todo_in_a_sorted_view_waits_for_the_button(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w", queues=("builds",))
    for title in ("Charlie", "alpha", "Bravo", "delta"):
        await store.todo_add(agent, queue="builds", title=title)

    await sign_in(page, "ada")
    await live_on(page)
    table = page.locator("table.todos")
    title = table.get_by_role("columnheader", name="Title")
    await expect(title).not_to_have_attribute("aria-sort", "ascending")
    link = title.get_by_role("link", name="Title", exact=True)
    await tab_to(page, link)
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(f"{live_server.url}/?sort=title")
    await expect(table.get_by_role("columnheader", name="Title")).to_have_attribute("aria-sort", "ascending")
    await expect(table.locator("tbody th")).to_have_text(["alpha", "Bravo", "Charlie", "delta"])
    await expect(page).to_have_title("Board · Switchboard")

    await table.get_by_role("link", name="Title", exact=True).press("Enter")
    await expect(page).to_have_url(f"{live_server.url}/?sort=title_desc")
    await expect(table.get_by_role("columnheader", name="Title")).to_have_attribute("aria-sort", "descending")
    await expect(table.locator("tbody th")).to_have_text(["delta", "Charlie", "Bravo", "alpha"])
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await assert_accessible(page, f"a list sorted by title ({scheme})")

    # A new todo in a sorted view is counted, not slotted in; the button shows the view anew.
    await live_on(page)
    await store.todo_add(agent, queue="builds", title="echo")
    await expect(page.locator("#new-todos")).to_have_text("1 new todo", timeout=15_000)
    await expect(table.locator("tbody th")).to_have_text(["delta", "Charlie", "Bravo", "alpha"])
    await page.get_by_role("button", name="Show the new todos").press("Enter")
    await expect(table.locator("tbody th")).to_have_text(["echo", "delta", "Charlie", "Bravo", "alpha"])
    no_csp_errors(page)


async def test_the_page_size_and_going_to_a_todo_by_its_id_from_the_search(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w", queues=("builds",))
    todos = [await store.todo_add(agent, queue="builds", title=f"Todo {i:02d}") for i in range(30)]

    await sign_in(page, "ada")
    await live_on(page)
    size = page.get_by_label("Rows per page")
    await size.select_option("25")
    await page.get_by_role("button", name="Search").press("Enter")
    await expect(page).to_have_url(f"{live_server.url}/?page_size=25")
    await expect(page.locator("table.todos tbody tr")).to_have_count(25)
    await page.get_by_role("link", name="Older todos").press("Enter")
    await expect(page.locator("table.todos tbody tr")).to_have_count(5)
    await expect(page.get_by_label("Rows per page")).to_have_value("25")

    await page.goto(live_server.url + "/")
    search = page.get_by_label("Title contains")
    await search.fill(todos[7]["id"])
    await search.press("Enter")
    await expect(page).to_have_url(f"{live_server.url}/todos/{todos[7]['id']}")
    await expect(page.get_by_role("dialog")).to_contain_text("Todo 07")

    await page.goto(live_server.url + "/")
    await page.get_by_label("Title contains").fill("0b7e6a52-3d1c-4b8e-9f5a-6c2d1e0f9a8b")
    await page.get_by_label("Title contains").press("Enter")
    await expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    await expect(page.locator("main")).to_contain_text("No todo of yours has the id 0b7e6a52-3d1c-4b8e-9f5a-6c2d1e0f9a8b")
    no_csp_errors(page)


async def test_the_agents_page_from_the_navigation_passes_axe_in_both_schemes(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="builder", queues=("builds",))
    held = await store.todo_add(agent, queue="builds", title="Fresh build")
    await store.todo_claim(agent, held["id"], claimant="box/run-1", lease_seconds=600)
    await make_agent(store, user=ada, agent_id="idle", queues=("docs",))

    await sign_in(page, "ada")
    nav = page.get_by_role("navigation", name="Main")
    await tab_to(page, nav.get_by_role("link", name="Agents"))
    await page.keyboard.press("Enter")
    await expect(page).to_have_title("Agents · Switchboard")
    await expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Agents")).to_have_attribute(
        "aria-current", "page")
    row = page.get_by_role("row", name="builder agent:builder")
    await expect(row).to_contain_text("1 todo: Fresh build (claimed, attempt 1, box/run-1): live")
    await expect(row).to_contain_text("1 live")
    await row.get_by_role("link", name="Fresh build").press("Enter")
    await expect(page.get_by_role("dialog")).to_contain_text("Fresh build")
    await page.go_back()
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await assert_accessible(page, f"the Agents page ({scheme})")
    no_csp_errors(page)
