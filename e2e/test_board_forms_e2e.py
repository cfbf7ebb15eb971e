"""The Board's bulk actions, add form, cancel confirmation and token copy in a real browser:
axe (WCAG 2.0, 2.1 and 2.2 A and AA) on each page, and keyboard-only flows with focus where a
keyboard user expects it after each step."""

from __future__ import annotations

from playwright.async_api import Page, expect

from e2e.conftest import ARTIFACTS, assert_accessible, live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_e2e import tab_to
from tests.conftest import make_agent


async def dead_letter(store, agent, title: str) -> dict:
    todo = await store.todo_add(agent, queue="builds", title=title, max_attempts=1)
    await store.todo_claim(agent, todo["id"], claimant="run-1")
    await store.todo_fail(agent, todo["id"], summary="tests red")
    return todo


async def test_keyboard_alone_selects_three_dead_letters_and_retries_them_through_a_confirmation(page: Page,
                                                                                                 live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    dead = [await dead_letter(store, agent, f"Deploy {name}") for name in ("alpha", "beta", "gamma", "delta")]
    await sign_in(page, "ada")
    await page.goto("/?dead_letter=1")
    await live_on(page)

    for todo in dead[:3]:
        box = page.get_by_role("checkbox", name=f"Select {todo['title']}")
        await tab_to(page, box)
        await page.keyboard.press("Space")
        await expect(box).to_be_checked()
    await expect(page.get_by_role("checkbox", name="Select all on this page")).to_have_js_property(
        "indeterminate", True)
    await page.keyboard.press("Tab")  # the bulk buttons follow the box last ticked
    await expect(page.get_by_role("button", name="Retry selected")).to_be_focused()
    await page.keyboard.press("Enter")

    title = page.get_by_role("heading", name="Retry 3 todos?", level=1)
    await expect(title).to_be_focused()
    counts = page.get_by_role("table", name="The 3 todos by state, and what happens to them")
    await expect(counts.get_by_role("row", name="dead letter")).to_contain_text("retried")
    await expect(page.get_by_role("list", name="The todos that will be retried").get_by_role("listitem")).to_have_count(3)
    await assert_accessible(page, "the bulk confirmation")
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / "board-bulk-confirm.png"), full_page=True)

    await tab_to(page, page.get_by_role("button", name="Retry 3 todos"))
    await page.keyboard.press("Enter")
    result = page.get_by_role("status").filter(has_text="Retried 3 todos.")
    await expect(result).to_be_focused()
    await expect(page).to_have_url(f"{live_server.url}/?dead_letter=1")
    await expect(page.get_by_role("row", name="Deploy delta")).to_be_visible()
    await expect(page.get_by_role("row", name="Deploy alpha")).to_have_count(0)
    await assert_accessible(page, "the Board after a bulk retry")
    await page.screenshot(path=str(ARTIFACTS / "board-bulk-result.png"))
    for todo in dead[:3]:
        got = await store.todo_get(ada, todo["id"])
        assert got["state"] == "pending" and got["attempts"][0]["outcome"] == "failed"
    assert (await store.todo_get(ada, dead[3]["id"]))["dead_letter"]
    no_csp_errors(page)


async def test_select_all_on_this_page_keeps_its_selection_through_live_updates(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    held = []
    for name in ("one", "two"):
        t = await store.todo_add(agent, queue="builds", title=f"Held {name}")
        await store.todo_claim(agent, t["id"], claimant="run", lease_seconds=600)
        held.append(t)
    await sign_in(page, "ada")
    await live_on(page)
    every = page.get_by_role("checkbox", name="Select all on this page")
    await every.check()
    await expect(page.get_by_role("checkbox", name="Select Held one")).to_be_checked()
    await store.todo_heartbeat(agent, held[0]["id"], lease_seconds=900)  # the row is redrawn live
    await expect(page.get_by_role("row", name="Held one")).to_contain_text("lease ends in 15 min")  # was "in 10 min"
    await expect(page.get_by_role("checkbox", name="Select Held one")).to_be_checked()
    await page.get_by_role("button", name="Release selected").click()
    await expect(page.get_by_role("heading", name="Release 2 todos?")).to_be_focused()
    await page.get_by_role("button", name="Release 2 todos").click()
    await expect(page.get_by_role("status").filter(has_text="Released 2 todos.")).to_be_focused()
    for t in held:
        assert (await store.todo_get(ada, t["id"]))["attempts"][0]["outcome"] == "released"


async def test_the_add_form_shows_its_errors_accessibly_and_a_keyboard_user_adds_a_todo(page: Page, live_server,
                                                                                           browser):
    store = live_server.store
    ada = await make_human(store, "ada")
    await make_agent(store, user=ada, agent_id="fixer", queues=("builds", "docs"))
    watcher = await (await browser.new_context(base_url=live_server.url)).new_page()  # a second Board, live
    await sign_in(watcher, "ada")
    await live_on(watcher)

    await sign_in(page, "ada")
    await tab_to(page, page.get_by_role("link", name="Add a todo"))
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Add a todo", level=1)).to_be_visible()
    await tab_to(page, page.get_by_label("Queue"))
    await page.keyboard.press("ArrowDown")  # the first queue
    await expect(page.get_by_label("Queue")).to_have_value(await page.locator("#add-target option").nth(1)
                                                           .get_attribute("value"))
    await page.keyboard.press("Tab")
    await page.keyboard.type("Publish the docs")
    await tab_to(page, page.get_by_label("Payload (JSON)"))
    await page.keyboard.type('{"branch": main}')
    await tab_to(page, page.get_by_label("Max attempts"))
    await page.keyboard.press("Control+A")
    await page.keyboard.type("zero")
    await tab_to(page, page.get_by_role("button", name="Add todo"))
    await page.keyboard.press("Enter")

    summary = page.get_by_role("alert")
    await expect(summary).to_be_focused()
    await expect(summary).to_contain_text("Fix these 2 problems")
    payload = page.get_by_label("Payload (JSON)")
    await expect(payload).to_have_attribute("aria-invalid", "true")
    await expect(payload).to_have_value('{"branch": main}')
    await expect(page.locator("#add-payload-error")).to_contain_text("Payload is not valid JSON")
    await expect(page.get_by_label("Title")).to_have_value("Publish the docs")
    await expect(page.get_by_label("Title")).not_to_have_attribute("aria-invalid", "true")
    await assert_accessible(page, "the add form with errors")
    await page.screenshot(path=str(ARTIFACTS / "board-add-errors.png"), full_page=True)

    await tab_to(page, summary.get_by_role("link", name="Payload is not valid JSON", exact=False))
    await page.keyboard.press("Enter")
    await expect(payload).to_be_focused()  # the summary's link leads to the field
    await page.keyboard.press("Control+A")
    await page.keyboard.type('{"branch": "main"}')
    await tab_to(page, page.get_by_label("Max attempts"))
    await page.keyboard.press("Control+A")
    await page.keyboard.type("3")
    await page.keyboard.press("Enter")  # submits the form

    added = page.get_by_role("status").filter(has_text="Added “Publish the docs” to queue builds.")
    await expect(added.get_by_role("link", name="Open “Publish the docs”")).to_be_focused()
    await expect(page.get_by_role("link", name="Publish the docs", exact=True)).to_be_visible()
    await expect(watcher.get_by_role("row", name="Publish the docs")).to_contain_text("pending")
    [todo] = (await store.todo_list(ada))["todos"]
    assert (todo["payload"], todo["max_attempts"], todo["queue"]) == ({"branch": "main"}, 3, "builds")
    await watcher.context.close()
    no_csp_errors(page)


async def test_cancel_asks_on_a_page_of_its_own_before_anything_changes(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    todo = await store.todo_add(agent, queue="builds", title="Rebuild the index")
    await sign_in(page, "ada")
    await page.get_by_role("link", name="Rebuild the index").click()
    dialog = page.get_by_role("dialog", name="Rebuild the index")
    await dialog.get_by_role("link", name="Cancel todo").click()
    await expect(page.get_by_role("heading", name="Cancel todo Rebuild the index?")).to_be_focused()
    await assert_accessible(page, "the cancel confirmation")
    assert (await store.todo_get(ada, todo["id"]))["state"] == "pending"
    await page.get_by_role("button", name="Cancel todo").click()
    dialog = page.get_by_role("dialog", name="Rebuild the index")
    await expect(dialog.get_by_role("status")).to_have_text("Canceled.")
    assert (await store.todo_get(ada, todo["id"]))["state"] == "canceled"


async def test_the_token_copy_button_copies_it_or_selects_it_and_says_so(page: Page, live_server):
    await make_human(live_server.store, "ada")
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    await sign_in(page, "ada")
    await page.goto("/endpoints")
    await page.get_by_label("Agent id").fill("copier")
    await page.get_by_label("Queues").fill("builds")
    await page.get_by_role("button", name="Create endpoint").click()
    token = await page.locator("#new-token").inner_text()
    copy = page.get_by_role("button", name="Copy token")
    await tab_to(page, copy)
    await page.keyboard.press("Enter")
    status = page.locator("#copy-status")
    await expect(status).to_have_text("Token copied to the clipboard.")
    await expect(status).to_have_attribute("role", "status")
    assert await page.evaluate("navigator.clipboard.readText()") == token
    await assert_accessible(page, "the vend result with its copy button")
    # Where the clipboard is not available, the token is selected for Ctrl+C instead.
    await page.evaluate("Object.defineProperty(navigator, 'clipboard', {value: undefined})")
    await copy.click()
    await expect(status).to_contain_text("press Ctrl+C")
    assert await page.evaluate("window.getSelection().toString().trim()") == token
    no_csp_errors(page)


WORKER_VERBS = {"list_todos", "get_todo", "claim_next", "heartbeat", "note", "complete", "fail", "release"}


async def ticked_verbs(page: Page) -> set[str]:
    return set(await page.locator("input[name=verbs]:checked").evaluate_all("boxes => boxes.map(b => b.value)"))


async def test_the_worker_preset_ticks_its_verbs_by_keyboard_and_the_new_endpoint_shows_its_work_command(
        page: Page, live_server):
    store = live_server.store
    await make_human(store, "ada")
    await sign_in(page, "ada")
    await page.goto("/endpoints")
    await page.get_by_label("Agent id").fill("builder")
    await page.get_by_label("Queues").fill("builds")
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await assert_accessible(page, f"the vend wizard with its presets, {scheme}")
    await tab_to(page, page.get_by_role("link", name="Worker"))
    await page.keyboard.press("Enter")
    await expect(page.locator("#preset-status")).to_have_text("Worker preset: its 8 verbs are ticked.")
    assert await ticked_verbs(page) == WORKER_VERBS
    await expect(page.get_by_label("Agent id")).to_have_value("builder")  # ticked in place: nothing typed is lost
    await tab_to(page, page.get_by_role("button", name="Create endpoint"))
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Endpoint builder created: copy its token now")).to_be_focused()
    token = await page.locator("#new-token").inner_text()
    assert set((await store.endpoint_authenticate(token)).scope) == WORKER_VERBS
    await expect(page.locator("#worker-command")).to_have_text(
        f"SWITCHBOARD_TOKEN={token} switchboard work --url {live_server.url}/mcp --queue builds -- ./run.sh")
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await assert_accessible(page, f"the new endpoint with its work command, {scheme}")
    no_csp_errors(page)


async def test_a_preset_works_without_javascript(browser, live_server):
    await make_human(live_server.store, "ada")
    context = await browser.new_context(base_url=live_server.url, java_script_enabled=False)
    try:
        page = await context.new_page()
        await sign_in(page, "ada")
        await page.goto("/endpoints")
        await page.get_by_role("link", name="Read-only").click()
        await expect(page.locator("#preset-status")).to_have_text("Read-only preset: its 2 verbs are ticked.")
        assert await ticked_verbs(page) == {"list_todos", "get_todo"}
        await page.get_by_role("link", name="Worker").click()
        assert await ticked_verbs(page) == WORKER_VERBS
        await page.get_by_label("Agent id").fill("builder")
        await page.get_by_label("Queues").fill("builds docs")
        await page.get_by_role("button", name="Create endpoint").click()
        token = await page.locator("#new-token").inner_text()
        # Two queues: the command drains any it may, so it names none.
        await expect(page.locator("#worker-command")).to_have_text(
            f"SWITCHBOARD_TOKEN={token} switchboard work --url {live_server.url}/mcp -- ./run.sh")
    finally:
        await context.close()
