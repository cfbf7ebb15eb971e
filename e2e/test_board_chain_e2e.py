"""A continuation chain and usage in the drawer, in a real browser: the chain reads as one
thread of links, root first, walked by keyboard alone; usage per attempt and the todo's
totals are shown; axe finds nothing."""

from __future__ import annotations

from playwright.async_api import Page, expect

from e2e.conftest import assert_accessible, live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_e2e import tab_to
from tests.conftest import make_agent


async def test_the_chain_is_walked_by_keyboard_in_the_drawer_with_usage_shown(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="reviewer", queues=("reviews",))
    root = await store.todo_add(agent, queue="reviews", title="Write the parser")
    await store.todo_claim(agent, root["id"], claimant="run-1")
    await store.todo_complete(agent, root["id"], summary="first draft, review asked for tests",
                              usage={"input_tokens": 1200, "output_tokens": 80, "cost_usd": 0.0123, "model": "model-a"})
    fix = await store.todo_add(agent, queue="reviews", title="Add the tests review asked for", continues=root["id"])
    await store.todo_claim(agent, fix["id"], claimant="run-2")
    await store.todo_complete(agent, fix["id"], summary="tests added", usage={"input_tokens": 300})
    last = await store.todo_add(agent, queue="reviews", title="Rename per the second review", continues=fix["id"])

    await sign_in(page, "ada")
    await live_on(page)
    row_link = page.get_by_role("link", name="Add the tests review asked for")
    await tab_to(page, row_link)
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Add the tests review asked for")
    await expect(dialog).to_be_visible()
    chain = dialog.get_by_role("navigation", name="Continuation chain")
    links = chain.get_by_role("link")
    await expect(links).to_have_text(["Write the parser", "Add the tests review asked for",
                                      "Rename per the second review"])
    await expect(chain.locator("[aria-current=page]")).to_have_text("Add the tests review asked for")
    await expect(dialog.locator("#attempt-1")).to_contain_text("300 input tokens")
    await expect(dialog.locator("#drawer-details")).to_contain_text("Usage in all")
    await assert_accessible(page, "the drawer of a todo in a chain")

    # Back to the root by keyboard: its drawer takes this one's place, its link now current.
    await tab_to(page, chain.get_by_role("link", name="Write the parser"))
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Write the parser")
    await expect(dialog.get_by_role("heading", name="Write the parser")).to_be_focused()
    chain = dialog.get_by_role("navigation", name="Continuation chain")
    await expect(chain.locator("[aria-current=page]")).to_have_text("Write the parser")
    await expect(dialog.locator("#attempt-1")).to_contain_text(
        "1,200 input tokens, 80 output tokens, $0.0123, model model-a")
    await expect(dialog.locator("#drawer-details")).to_contain_text("1,200 input tokens")
    assert page.url.endswith(f"/todos/{root['id']}")

    # On to the newest link, then Escape: the list again, focus where the first drawer opened.
    await tab_to(page, chain.get_by_role("link", name="Rename per the second review"))
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Rename per the second review")
    await expect(dialog.get_by_role("heading", name="Rename per the second review")).to_be_focused()
    assert page.url.endswith(f"/todos/{last['id']}")
    await assert_accessible(page, "the drawer of a chain's newest todo")
    await page.keyboard.press("Escape")
    await expect(dialog).to_be_hidden()
    await expect(page).to_have_url(f"{live_server.url}/")
    await expect(row_link).to_be_focused()
    no_csp_errors(page)
