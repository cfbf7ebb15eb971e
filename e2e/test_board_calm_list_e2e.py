"""The live list stays put: an idle tab whose agents keep adding and changing todos keeps its
row count and every row's position; new todos are counted in one polite notice whose text
changes only when the count does, at most once every few seconds; a changed row is updated
where it is, and in the updated sort counted as changed until asked for."""

from __future__ import annotations

import asyncio
import time

from playwright.async_api import Page, expect

from e2e.conftest import live_on, make_human, no_csp_errors, sign_in
from tests.conftest import make_agent

# Every change of the notice's text, with its time, recorded in the page.
RECORD_NOTICE = """
window.__notices = [];
document.addEventListener("DOMContentLoaded", () => {
  const n = document.getElementById("new-todos");
  if (n) new MutationObserver(() => window.__notices.push([performance.now(), n.textContent]))
    .observe(n, {childList: true, characterData: true, subtree: true});
});
"""


async def positions(page: Page) -> list[tuple[str, int]]:
    return await page.locator("#todo-rows > tr").evaluate_all(
        "rows => rows.map(r => [r.id, Math.round(r.getBoundingClientRect().top + window.scrollY)])")


async def test_an_idle_tab_keeps_its_rows_and_their_places_while_agents_add_and_change_todos(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w", queues=("q",))
    for i in range(40):
        await store.todo_add(agent, queue="q", title=f"Seeded {i:02d}")
    await page.add_init_script(RECORD_NOTICE)
    await sign_in(page, "ada")
    await live_on(page)
    await page.mouse.wheel(0, 300)  # a reader scrolled into the list with the mouse; focus is elsewhere
    before = await positions(page)
    notice = page.locator("#new-todos")

    started = time.monotonic()
    added = 0
    while time.monotonic() - started < 10:
        await store.todo_add(agent, queue="q", title=f"Added {added:03d}")
        added += 1
        await asyncio.sleep(0.4)
    await expect(notice).to_have_text(f"{added} new todos")
    assert await positions(page) == before  # same rows, same places
    notices = await page.evaluate("window.__notices")
    texts = [t for _, t in notices if t]
    assert len(texts) == len(set(texts)), texts  # a text is never said twice in a row
    gaps = [b[0] - a[0] for a, b in zip(notices, notices[1:]) if a[1] and b[1]]
    assert all(gap >= 2900 for gap in gaps), gaps  # at most once every few seconds

    await page.get_by_role("button", name="Show the new todos").click()
    await expect(page.locator("#todo-rows > tr")).to_have_count(50)  # the page's size (40 + the new), not more
    await expect(notice).to_have_text("")
    no_csp_errors(page)


async def test_a_changed_row_is_updated_in_place_and_counted_in_the_updated_sort(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w", queues=("q",))
    todos = [await store.todo_add(agent, queue="q", title=f"Todo {i}") for i in range(5)]
    await sign_in(page, "ada")
    await page.goto("/?sort=updated")
    await live_on(page)
    before = await positions(page)
    oldest = todos[0]
    await store.todo_claim(agent, oldest["id"], claimant="run-1")
    row = page.locator(f"#todo-{oldest['id']}")
    await expect(row).to_contain_text("claimed")  # updated where it is
    assert await positions(page) == before
    await expect(page.locator("#new-todos")).to_have_text("1 changed")
    await page.get_by_role("button", name="Put the changed rows in order").click()
    await expect(page.locator("#todo-rows > tr").first).to_have_id(f"todo-{oldest['id']}")


async def test_rows_a_full_page_pushes_out_are_on_the_older_todos_page(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w", queues=("q",))
    for i in range(24):
        await store.todo_add(agent, queue="q", title=f"Seeded {i:02d}")
    await sign_in(page, "ada")
    await page.goto("/?page_size=25")
    await live_on(page)
    older = page.get_by_role("link", name="Older todos")
    await expect(older).to_be_hidden()  # one page holds them all, with room for one more
    for i in range(3):
        await store.todo_add(agent, queue="q", title=f"Added {i}")
    await expect(page.locator("#new-todos")).to_have_text("3 new todos", timeout=15_000)
    await page.get_by_role("button", name="Show the new todos").click()
    rows = page.locator("#todo-rows > tr th")
    await expect(rows).to_have_count(25)
    await expect(rows.first).to_have_text("Added 2")
    await expect(rows.last).to_have_text("Seeded 02")
    await older.click()  # the next page starts right after the last row kept: the two pushed out
    await expect(page.locator("#todo-rows > tr th")).to_have_text(["Seeded 01", "Seeded 00"])
    no_csp_errors(page)
