"""Deleting ended todos in a real browser, by keyboard alone: one from its drawer and several
through the bulk confirmation, axe (WCAG 2.0, 2.1 and 2.2 A and AA) on each confirmation in
the light and the dark scheme, focus on the confirmation's heading and then on the result, and
another open Board losing the deleted rows live."""

from __future__ import annotations

from playwright.async_api import Page, expect

from e2e.conftest import ARTIFACTS, assert_accessible, live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_e2e import tab_to
from tests.conftest import make_agent


async def finished(store, agent, title: str) -> dict:
    todo = await store.todo_add(agent, queue="builds", title=title)
    await store.todo_claim(agent, todo["id"], claimant="run-1")
    await store.todo_complete(agent, todo["id"], summary="shipped")
    return todo


async def accessible_in_both_schemes(page: Page, what: str, shot: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await assert_accessible(page, f"{what}, {scheme}")
        await page.screenshot(path=str(ARTIFACTS / f"{shot}-{scheme}.png"), full_page=True)
    await page.emulate_media(color_scheme="light")


async def test_keyboard_alone_deletes_a_done_todo_from_its_drawer_and_returns_to_the_view(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    keep = await finished(store, agent, "Keep the changelog")
    gone = await finished(store, agent, "Ship the release notes")
    await sign_in(page, "ada")
    await page.goto("/?state=done")
    await live_on(page)

    await tab_to(page, page.get_by_role("link", name="Ship the release notes"))
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Ship the release notes")
    await expect(dialog).to_be_visible()
    await tab_to(page, dialog.get_by_role("button", name="Delete todo…"))
    await page.keyboard.press("Enter")

    title = page.get_by_role("heading", name="Delete todo Ship the release notes?", level=1)
    await expect(title).to_be_focused()
    await expect(page.get_by_text("with its 1 attempt and their notes, for good")).to_be_visible()
    assert (await store.todo_get(ada, gone["id"]))["state"] == "done"  # asking changed nothing
    await accessible_in_both_schemes(page, "the delete confirmation", "board-delete-confirm")

    await tab_to(page, page.get_by_role("button", name="Delete todo", exact=True))
    await page.keyboard.press("Enter")
    result = page.get_by_role("status").filter(has_text="Deleted “Ship the release notes” and its 1 attempt.")
    await expect(result).to_be_focused()
    await expect(page).to_have_url(f"{live_server.url}/?state=done")
    await expect(page.get_by_role("row", name="Ship the release notes")).to_have_count(0)
    await expect(page.get_by_role("row", name="Keep the changelog")).to_be_visible()
    await assert_accessible(page, "the Board after a delete")
    assert [t["id"] for t in (await store.todo_list(ada))["todos"]] == [keep["id"]]
    no_csp_errors(page)


async def test_keyboard_alone_bulk_deletes_finished_todos_and_another_board_loses_them_live(page: Page, browser,
                                                                                           live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    done = [await finished(store, agent, f"Deploy {name}") for name in ("alpha", "beta")]
    pending = await store.todo_add(agent, queue="builds", title="Deploy gamma")
    watcher_context = await browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    try:
        watcher = await watcher_context.new_page()
        await sign_in(watcher, "ada")
        await live_on(watcher)
        await expect(watcher.get_by_role("row", name="Deploy alpha")).to_be_visible()

        await sign_in(page, "ada")
        await live_on(page)
        for todo in (*done, pending):
            box = page.get_by_role("checkbox", name=f"Select {todo['title']}")
            await tab_to(page, box)
            await page.keyboard.press("Space")
            await expect(box).to_be_checked()
        await tab_to(page, page.get_by_role("button", name="Delete selected…"))  # just after the last box
        await page.keyboard.press("Enter")

        title = page.get_by_role("heading", name="Delete 2 todos?", level=1)
        await expect(title).to_be_focused()
        counts = page.get_by_role("table", name="The 3 todos by state, and what happens to them")
        await expect(counts.get_by_role("row", name="done")).to_contain_text("deleted")
        await expect(counts.get_by_role("row", name="pending")).to_contain_text("skipped")
        await expect(page.get_by_text("Only a done, canceled or dead-letter todo can be deleted")).to_be_visible()
        listed = page.get_by_role("list", name="The todos that will be deleted").get_by_role("listitem")
        await expect(listed).to_have_count(2)
        await accessible_in_both_schemes(page, "the bulk delete confirmation", "board-bulk-delete-confirm")

        await tab_to(page, page.get_by_role("button", name="Delete 2 todos"))
        await page.keyboard.press("Enter")
        await expect(page.get_by_role("status").filter(has_text="Deleted 2 todos.")).to_be_focused()
        await expect(page.get_by_role("row", name="Deploy alpha")).to_have_count(0)
        await expect(page.get_by_role("row", name="Deploy gamma")).to_be_visible()
        # The other Board, never reloaded, drops both rows as the deletes arrive.
        await expect(watcher.get_by_role("row", name="Deploy alpha")).to_have_count(0)
        await expect(watcher.get_by_role("row", name="Deploy beta")).to_have_count(0)
        await expect(watcher.get_by_role("row", name="Deploy gamma")).to_be_visible()
    finally:
        await watcher_context.close()
    assert [t["id"] for t in (await store.todo_list(ada))["todos"]] == [pending["id"]]
    no_csp_errors(page)
