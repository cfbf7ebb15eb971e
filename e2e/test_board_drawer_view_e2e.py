"""Acting in a todo's drawer keeps the list's view: from a filtered list, open a todo, Claim,
read the result (focused), close with Escape, and land on the same filtered list."""

from __future__ import annotations

import re

from playwright.async_api import Page, expect

from e2e.conftest import live_on, make_human, sign_in
from tests.conftest import make_agent


async def test_an_action_in_the_drawer_keeps_the_filtered_view_and_focuses_its_result(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w", queues=("a11y", "builds"))
    await store.todo_add(agent, queue="a11y", title="Label the search field")
    await store.todo_add(agent, queue="builds", title="Not in this view")
    await sign_in(page, "ada")
    await page.goto("/?queue=a11y")
    await live_on(page)
    link = page.get_by_role("link", name="Label the search field")
    await link.click()
    dialog = page.get_by_role("dialog", name="Label the search field")
    await expect(dialog.get_by_role("heading", name="Label the search field", level=2)).to_be_focused()
    await dialog.get_by_role("button", name="Claim").click()
    result = page.get_by_role("dialog", name="Label the search field").get_by_role("status")
    await expect(result).to_have_text("Claimed. The attempt is yours; complete, release or fail it here.")
    await expect(result).to_be_focused()  # read first, not hunted for
    assert re.search(r"/todos/[^?]+\?queue=a11y$", page.url), page.url
    await page.keyboard.press("Escape")
    await expect(page).to_have_url(re.compile(r"/\?queue=a11y$"))
    await expect(link).to_be_focused()
    await expect(page.get_by_role("row", name="Not in this view")).to_have_count(0)
    await expect(page.get_by_role("row", name="Label the search field")).to_contain_text("claimed")
