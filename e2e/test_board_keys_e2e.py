"""Short keyboard paths on the Board, by keyboard alone in Chromium: the skip links come first
and land on the search field and the list; ticking a row brings the bulk buttons right after
it (one Tab) and says the count once per change; Back from the bulk confirmation returns to
the same view with the same boxes ticked; after adding a todo, focus is on a link that opens
it. axe finds nothing in light and dark with the new elements showing. Without JavaScript the
bulk form still posts, Back still ticks the boxes, and the new todo's link still gets focus."""

from __future__ import annotations

from playwright.async_api import Page, expect

from e2e.conftest import ARTIFACTS, assert_accessible, live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_e2e import tab_to
from tests.conftest import make_agent

# Every text the bulk count's live region takes, in order, recorded in the page.
RECORD_SAID = """
window.__said = [];
document.addEventListener("DOMContentLoaded", () => {
  const n = document.getElementById("bulk-selected");
  if (n) new MutationObserver(() => window.__said.push(n.textContent))
    .observe(n, {childList: true, characterData: true, subtree: true});
});
"""

FOCUSED = "() => { const a = document.activeElement; return a.id || a.textContent.trim(); }"
# Whether the focused element is drawn inside the window and not under the bulk bar.
FOCUS_UNCOVERED = """() => {
  const r = document.activeElement.getBoundingClientRect(), bar = document.getElementById('bulk-bar');
  const inside = r.top >= 0 && r.bottom <= innerHeight;
  if (!bar || bar.hidden || bar.contains(document.activeElement)) return inside;
  return inside && r.bottom <= bar.getBoundingClientRect().top;
}"""


async def both_schemes_accessible(page: Page, what: str, shot: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await assert_accessible(page, f"{what}, {scheme}")
        await page.screenshot(path=str(ARTIFACTS / f"{shot}-{scheme}.png"))
    await page.emulate_media(color_scheme="light")


async def held_todos(store, titles: list[str], queue: str = "builds"):
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds", "docs"))
    todos = []
    for title in titles:
        t = await store.todo_add(agent, queue=queue, title=title)
        await store.todo_claim(agent, t["id"], claimant="run-1", lease_seconds=1800)
        todos.append(t)
    return ada, agent, todos


async def test_the_skip_links_are_the_first_two_tabs_and_land_on_the_search_field_and_the_list(page: Page,
                                                                                                live_server):
    ada, agent, todos = await held_todos(live_server.store, ["Older build", "Newest build"])
    await sign_in(page, "ada")
    await live_on(page)

    await page.keyboard.press("Tab")
    to_search = page.get_by_role("link", name="Skip to search")
    await expect(to_search).to_be_focused()
    box = await to_search.bounding_box()
    assert box and box["y"] >= 0 and box["height"] > 0, box  # shown when focused
    await both_schemes_accessible(page, "the Board with its first skip link focused", "board-skip-link")
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("link", name="Skip to the list")).to_be_focused()
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("link", name="Skip to main content")).to_be_focused()

    # Skip to search: focus on the title search, typing searches.
    await page.keyboard.press("Shift+Tab")
    await page.keyboard.press("Shift+Tab")
    await page.keyboard.press("Enter")
    await expect(page.get_by_label("Title contains")).to_be_focused()
    await page.keyboard.type("Older")
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Search results")).to_be_focused()
    await expect(page.locator("#todo-rows > tr")).to_have_count(1)

    # Skip to the list: focus on the list's region; the next Tabs are its headings, boxes and rows.
    await page.goto("/")
    await live_on(page)
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("region", name="Todos")).to_be_focused()
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("checkbox", name="Select all on this page")).to_be_focused()
    await page.keyboard.press("Tab")  # the column headings' sort links, then the rows
    await expect(page.locator("table.todos thead").get_by_role("link", name="Title", exact=True)).to_be_focused()
    await tab_to(page, page.get_by_role("checkbox", name="Select Newest build"), limit=12)
    no_csp_errors(page)


async def test_on_a_phone_the_skip_links_reach_the_search_and_the_cards_in_one_step(page: Page, live_server):
    await held_todos(live_server.store, ["A card"])
    await page.set_viewport_size({"width": 375, "height": 700})
    await sign_in(page, "ada")
    await live_on(page)
    await page.keyboard.press("Tab")
    await page.keyboard.press("Enter")
    search = page.get_by_label("Title contains")
    await expect(search).to_be_focused()
    assert await page.evaluate(FOCUS_UNCOVERED), "the search field is not in view"
    await page.goto("/")
    await live_on(page)
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("region", name="Todos")).to_be_focused()
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")  # the headings' sort links: their row shows while one has focus
    title = page.locator("table.todos thead").get_by_role("link", name="Title", exact=True)
    await expect(title).to_be_focused()
    await expect(title).to_be_visible()
    assert await page.evaluate(FOCUS_UNCOVERED), "the focused sort link is not in view"
    await tab_to(page, page.get_by_role("checkbox", name="Select A card"), limit=12)
    assert await page.evaluate(FOCUS_UNCOVERED), "the card's box is not in view"


async def test_ticking_rows_brings_the_bulk_buttons_one_tab_away_says_the_count_once_and_back_keeps_the_ticks(
        page: Page, live_server):
    titles = [f"Build {n}" for n in ("one", "two", "three", "four", "five")]
    ada, agent, todos = await held_todos(live_server.store, titles)
    await page.add_init_script(RECORD_SAID)
    await sign_in(page, "ada")
    await page.goto("/?queue=builds&sort=updated")  # a view of its own, kept all the way
    await live_on(page)
    bar = page.get_by_role("group", name="2 selected")

    three = page.get_by_role("checkbox", name="Select Build three")
    await tab_to(page, three)
    await page.keyboard.press("Space")
    await expect(page.locator("#bulk-selected")).to_have_text("1 selected")
    await page.keyboard.press("Tab")  # one Tab: the bar's first button
    await expect(page.get_by_role("button", name="Retry selected…")).to_be_focused()
    await expect(page.get_by_role("group", name="1 selected")).to_be_visible()

    two = page.get_by_role("checkbox", name="Select Build two")
    await tab_to(page, two)
    await page.keyboard.press("Space")
    await expect(page.locator("#bulk-selected")).to_have_text("2 selected")
    await expect(bar).to_be_visible()
    await page.keyboard.press("Tab")
    await expect(bar.get_by_role("button", name="Retry selected…")).to_be_focused()
    assert await page.evaluate(FOCUS_UNCOVERED)
    await both_schemes_accessible(page, "the Board with the bulk bar", "board-bulk-bar")

    # A live redraw of the row the bar follows keeps the bar after it, and focus on its button.
    await page.keyboard.press("Tab")
    await expect(bar.get_by_role("button", name="Release selected…")).to_be_focused()
    await live_on(page)
    await live_server.store.todo_heartbeat(agent, todos[1]["id"], lease_seconds=3600)
    await expect(page.get_by_role("row", name="Build two")).to_contain_text("lease ends in 60 min")  # was "in 30 min"
    await expect(bar.get_by_role("button", name="Release selected…")).to_be_focused()
    await expect(two).to_be_checked()

    # Unticking says so once; ticking again says the new count.
    await tab_to(page, two, key="Shift+Tab")
    await page.keyboard.press("Space")
    await expect(page.locator("#bulk-selected")).to_have_text("1 selected")
    await expect(page.locator("#todo-rows > tr", has=three).locator("#bulk-bar")).to_be_visible()  # the box left
    await page.keyboard.press("Space")
    await expect(page.locator("#bulk-selected")).to_have_text("2 selected")
    said = await page.evaluate("window.__said")
    assert said == ["1 selected", "2 selected", "1 selected", "2 selected"], said

    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    await expect(bar.get_by_role("button", name="Release selected…")).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Release 2 todos?", level=1)).to_be_focused()
    await tab_to(page, page.get_by_role("link", name="Back to the Board, changing nothing"))
    await page.keyboard.press("Enter")

    # Back: the same view, the same two boxes ticked, focus on the last of them, the bar after it.
    await expect(page.get_by_role("heading", name="Search results")).to_be_visible()
    assert "queue=builds" in page.url and "sort=updated" in page.url, page.url
    await expect(two).to_be_focused()
    await expect(two).to_be_checked()
    await expect(three).to_be_checked()
    for title in ("Build one", "Build four", "Build five"):
        await expect(page.get_by_role("checkbox", name=f"Select {title}")).not_to_be_checked()
    await expect(page.get_by_label("Sort")).to_have_value("updated")
    await page.keyboard.press("Tab")
    await expect(bar.get_by_role("button", name="Retry selected…")).to_be_focused()
    for t in todos:
        assert (await live_server.store.todo_get(ada, t["id"]))["state"] == "claimed"  # Back changed nothing
    no_csp_errors(page)


async def test_select_all_on_the_page_and_all_in_the_view_put_the_bar_in_its_own_place_one_key_away(
        page: Page, live_server):
    await held_todos(live_server.store, ["Build one", "Build two", "Build three"])
    await page.add_init_script(RECORD_SAID)
    await sign_in(page, "ada")
    await live_on(page)
    every_on_page = page.get_by_role("checkbox", name="Select all on this page")
    await tab_to(page, every_on_page)
    await page.keyboard.press("Space")
    await expect(page.locator("#bulk-selected")).to_have_text("3 selected")
    await page.keyboard.press("Shift+Tab")  # the bar sits just above the list
    await expect(page.get_by_role("group", name="3 selected").get_by_role("button", name="Delete selected…")) \
        .to_be_focused()
    await tab_to(page, every_on_page)
    await page.keyboard.press("Space")
    await expect(page.locator("#bulk-selected")).to_have_text("None selected")
    await expect(page.locator("#bulk-bar")).to_be_hidden()

    in_view = page.get_by_role("checkbox", name="All 3 todos in this view")
    await tab_to(page, in_view, key="Shift+Tab")
    await page.keyboard.press("Space")
    await expect(page.locator("#bulk-selected")).to_have_text("Selected: all 3 todos in this view")
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("button", name="Retry selected…")).to_be_focused()
    said = await page.evaluate("window.__said")
    assert said == ["3 selected", "None selected", "Selected: all 3 todos in this view"], said
    await page.keyboard.press("Tab")
    await page.keyboard.press("Enter")  # Release
    await expect(page.get_by_role("heading", name="Release 3 todos?", level=1)).to_be_focused()
    await page.get_by_role("link", name="Back to the Board, changing nothing").focus()
    await page.keyboard.press("Enter")
    await expect(in_view).to_be_focused()
    await expect(in_view).to_be_checked()
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("group", name="Selected: all 3 todos in this view")
                 .get_by_role("button", name="Retry selected…")).to_be_focused()


async def test_after_adding_a_todo_focus_is_on_a_link_that_opens_it_and_closing_returns_there(page: Page,
                                                                                              live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    await sign_in(page, "ada")
    await page.goto("/todos/new")
    await tab_to(page, page.get_by_label("Queue"))
    await page.keyboard.press("ArrowDown")
    await page.keyboard.press("Tab")
    await page.keyboard.type("Publish the docs")
    await page.keyboard.press("Enter")

    link = page.get_by_role("link", name="Open “Publish the docs”")
    await expect(link).to_be_focused()
    await expect(link).to_have_accessible_description("Added “Publish the docs” to queue builds. It is pending.")
    await live_on(page)
    await both_schemes_accessible(page, "the Board after adding a todo", "board-added-link")
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Publish the docs")
    await expect(dialog.get_by_role("heading", name="Publish the docs")).to_be_focused()
    [todo] = (await store.todo_list(ada))["todos"]
    assert page.url.endswith(f"/todos/{todo['id']}")
    await page.keyboard.press("Escape")
    await expect(dialog).to_be_hidden()
    await expect(link).to_be_focused()
    no_csp_errors(page)


async def test_without_javascript_the_bulk_form_posts_back_keeps_the_ticks_and_the_added_link_is_focused(
        browser, live_server):
    ada, agent, todos = await held_todos(live_server.store, ["Build one", "Build two", "Build three"])
    context = await browser.new_context(base_url=live_server.url, java_script_enabled=False,
                                        viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    try:
        await sign_in(page, "ada")
        await page.goto("/?queue=builds")
        await page.get_by_role("checkbox", name="Select Build one").check()
        await page.get_by_role("checkbox", name="Select Build three").check()
        await page.get_by_role("button", name="Release selected…").click()
        await expect(page.get_by_role("heading", name="Release 2 todos?", level=1)).to_be_visible()
        await page.get_by_role("link", name="Back to the Board, changing nothing").click()
        await expect(page.get_by_role("checkbox", name="Select Build one")).to_be_checked()
        await expect(page.get_by_role("checkbox", name="Select Build three")).to_be_checked()
        await expect(page.get_by_role("checkbox", name="Select Build two")).not_to_be_checked()
        assert "queue=builds" in page.url
        await page.get_by_role("button", name="Release selected…").click()  # the ticks post again
        await page.get_by_role("button", name="Release 2 todos").click()
        await expect(page.get_by_role("status").filter(has_text="Released 2 todos.")).to_be_visible()

        await page.goto("/todos/new")
        await page.get_by_label("Queue").select_option(label="builds")
        await page.get_by_label("Title").fill("Written without scripts")
        await page.get_by_role("button", name="Add todo").click()
        await expect(page.get_by_role("link", name="Open “Written without scripts”")).to_be_focused()  # autofocus
    finally:
        await context.close()
