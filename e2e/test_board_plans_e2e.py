"""Plans on the Board in a real browser: the drawer's plan list (what a todo waits for and
what waits for it, each a link) and "Drop this dependency" by keyboard; the list's waiting
filter and the overview's Waiting count; zero axe violations in light and dark; and what a
screen reader says of a waiting todo's row and of the plan list."""

from __future__ import annotations

from playwright.async_api import Page, expect

from e2e.conftest import live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_claim_order_e2e import assert_accessible_both
from e2e.test_board_e2e import tab_to
from e2e.test_board_everywhere_e2e import check_everywhere
from e2e.test_board_screen_reader_e2e import reading, spoken
from tests.acceptance.test_board_plans import a_plan
from tests.conftest import make_agent


async def test_the_drawer_shows_the_plan_and_drops_a_dependency_by_keyboard(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    fetch, build, deploy, announce = await a_plan(store, agent, "Fetch", "Build", "Deploy", "Announce")

    await sign_in(page, "ada")
    await live_on(page)
    builds = page.get_by_role("region", name="Queues").get_by_role("row", name="builds")
    await expect(builds.get_by_role("link", name="2 waiting for other todos in builds")).to_be_visible()
    for width in (1024, 1180, 1280):  # the Waiting column fits: the page never scrolls sideways
        await page.set_viewport_size({"width": width, "height": 900})
        assert await page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth"), width
    await builds.get_by_role("link", name="2 waiting for other todos in builds").click()
    await expect(page).to_have_url(f"{live_server.url}/?queue=builds&start=waiting")
    await expect(page.get_by_label("Start")).to_have_value("waiting")
    await expect(page.locator("#todo-rows > tr > th")).to_have_text(["Announce", "Deploy"])
    await expect(page.get_by_role("row", name="Deploy").locator("td[data-label=State]")).to_contain_text(
        "pending, waiting for 1 todo")
    await assert_accessible_both(page, "the list of waiting todos")

    await page.get_by_role("row", name="Deploy").get_by_role("link", name="Deploy").click()
    dialog = page.get_by_role("dialog", name="Deploy")
    plan = dialog.get_by_role("region", name="Plan")
    waits = plan.get_by_role("list", name="Waits for")
    await expect(waits.get_by_role("listitem")).to_have_count(2)
    await expect(waits.get_by_role("link", name="Fetch")).to_be_visible()
    await expect(waits.get_by_role("listitem").first).to_contain_text("done, last attempt completed")
    await expect(plan.get_by_role("list", name="Waited on by").get_by_role("link", name="Announce")).to_be_visible()
    await check_everywhere(page, "the drawer of a waiting todo")  # 320 and 1280 px, light, dark, forced colours

    # Keyboard alone: to Build's Drop this dependency, Enter, confirmed; the drawer says what happened.
    drop = waits.get_by_role("link", name="Drop this dependency…")
    await expect(drop).to_have_count(1)
    await tab_to(page, drop)
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Drop this dependency?")).to_be_focused()
    await expect(page.locator("main")).to_contain_text("“Deploy” will no longer wait for “Build” (claimed).")
    await check_everywhere(page, "the confirmation of a dependency dropped")
    await tab_to(page, page.get_by_role("button", name="Drop this dependency"))
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Deploy")
    await expect(dialog.get_by_role("status")).to_have_text("“Deploy” no longer waits for “Build”; it can be claimed now.")
    await expect(dialog.get_by_role("link", name="Drop this dependency…")).to_have_count(0)
    assert (await store.todo_get(ada, deploy["id"]))["waiting"] is False

    # A link of the plan opens that todo's drawer in place.
    await dialog.get_by_role("link", name="Announce").click()
    await expect(page.get_by_role("dialog", name="Announce")).to_be_visible()
    no_csp_errors(page)


async def test_a_screen_reader_hears_how_many_todos_a_waiting_todo_waits_for_and_the_plan_as_a_list(browser,
                                                                                                    live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    a = await store.todo_add(agent, queue="builds", title="Fetch")
    b = await store.todo_add(agent, queue="builds", title="Build")
    deploy = await store.todo_add(agent, queue="builds", title="Deploy", after=[a["id"], b["id"]])
    async with reading(browser, live_server) as page:
        await page.evaluate("""async (id) => {
            const cell = document.getElementById('todo-' + id).querySelector('td[data-label=State]');
            await window.__vsr.virtual.start({container: cell});
        }""", deploy["id"])
        heard = await spoken(page)
        assert heard[0] == "cell, pending, waiting for 2 todos priority P2", heard
        await page.evaluate("async () => await window.__vsr.virtual.stop()")

        await page.goto(f"/todos/{deploy['id']}")
        await page.evaluate("""async () => {
            await window.__vsr.virtual.start({container: document.querySelector('#drawer-plan ul.plan-list')});
            for (let i = 0; i < 8; i++) await window.__vsr.virtual.next();
        }""")
        heard = await spoken(page)
        assert heard[0] == "list", heard
        assert "list, Waits for" in heard and "listitem, level 2, position 1, set size 2" in heard, heard
        await page.evaluate("async () => await window.__vsr.virtual.stop()")
