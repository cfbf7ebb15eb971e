"""Notes in a real browser: a note an agent writes over MCP arrives in the open drawer and the
live region gains exactly one short line; the owner adds a note by keyboard alone (and a
refused one shows its message beside the field, focused); axe finds nothing with notes shown."""

from __future__ import annotations

from playwright.async_api import Page, expect

from e2e.conftest import assert_accessible, live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_e2e import tab_to
from tests.acceptance.mcp_helpers import call, connect
from tests.conftest import make_agent


async def test_a_note_written_over_mcp_arrives_live_as_one_line_in_the_drawer(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    _, token = await store.endpoint_vend(ada.user_id, name="w1", agent_id="w1", queues=["q"],
                                         scope=["add_todo", "claim", "heartbeat"])
    async with connect(live_server, token) as agent:
        todo = await call(agent, "add_todo", {"queue": "q", "title": "Watch the notes"})
        claim = await call(agent, "claim", {"id": todo["id"], "claimant": "run-1", "require_fence": True,
                                            "lease_seconds": 3600})

        await sign_in(page, "ada")
        await page.get_by_role("link", name="Watch the notes").click()
        dialog = page.get_by_role("dialog", name="Watch the notes")
        await expect(dialog).to_be_visible()
        await live_on(page, watching=todo["id"])
        await page.evaluate("window.__noReload = true")
        news = dialog.locator("#attempts-news")
        await expect(news.locator("p")).to_have_count(0)

        args = {"id": todo["id"], "lease_token": claim["lease_token"]}
        await call(agent, "note", {**args, "text": "Bisecting the last 40 commits; the parser is fine."})
        await expect(news.locator("p")).to_have_count(1)
        await expect(news).to_have_text("Note on attempt 1: Bisecting the last 40 commits; the parser is fine.")
        note = dialog.locator("#note-1-1")
        await expect(note).to_contain_text("agent")
        await expect(note.locator(".note-text")).to_have_text("Bisecting the last 40 commits; the parser is fine.")

        await call(agent, "note", {**args, "text": "<b>Found it</b>: commit a1b2c3 " + "and more " * 20})
        await expect(news.locator("p")).to_have_count(2)
        line = await news.locator("p").last.inner_text()
        assert line.startswith("Note on attempt 1: <b>Found it</b>: commit a1b2c3") and line.endswith("\u2026")
        assert len(line) < 120, line  # one short line, however long the note
        await expect(dialog.locator("#note-1-2 b")).to_have_count(0)  # the text is escaped, never markup
        await expect(dialog.locator(".liveness")).to_have_text("live")
    assert await page.evaluate("window.__noReload === true"), "the page reloaded"
    await assert_accessible(page, "the drawer with notes")
    no_csp_errors(page)


async def test_the_owner_adds_a_note_by_keyboard_and_a_refused_one_is_explained_beside_the_field(
        page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="Held by an agent")
    await store.todo_claim(agent, todo["id"], claimant="stuck-worker", lease_seconds=3600)
    await store.todo_note(agent, todo["id"], text="waiting on the staging box")

    await sign_in(page, "ada")
    link = page.get_by_role("link", name="Held by an agent")
    await live_on(page)
    await tab_to(page, link)
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Held by an agent")
    await expect(dialog).to_be_visible()
    field = dialog.get_by_label("Your note for the next worker")
    await tab_to(page, field)
    await page.keyboard.type("   ")  # nothing but spaces: refused
    await page.keyboard.press("Tab")
    await expect(dialog.get_by_role("button", name="Add note")).to_be_focused()
    await page.keyboard.press("Enter")

    dialog = page.get_by_role("dialog", name="Held by an agent")
    field = dialog.get_by_label("Your note for the next worker")
    await expect(field).to_be_focused()
    await expect(field).to_have_attribute("aria-invalid", "true")
    await expect(dialog.locator("#note-text-error")).to_have_text("Error: The note must not be empty "
                                                                  "(after control characters are removed).")
    await assert_accessible(page, "the drawer with a refused note")

    await page.keyboard.type("The staging box is back; retry the deploy step.")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Held by an agent")
    await expect(dialog.get_by_role("status")).to_have_text("Note added to attempt 1.")
    newest = dialog.locator("#note-1-2")
    await expect(newest.locator(".note-author")).to_have_text("owner")
    await expect(newest.locator(".note-text")).to_have_text("The staging box is back; retry the deploy step.")
    await expect(dialog.locator("#note-1-1 .note-author")).to_have_text("agent")
    await expect(dialog.locator("#note-text-error")).to_have_count(0)
    await assert_accessible(page, "the drawer after the owner's note")
    assert [n["author_kind"] for n in (await store.todo_get(ada, todo["id"]))["attempts"][0]["notes"]] == [
        "owner", "endpoint"]
    no_csp_errors(page)
