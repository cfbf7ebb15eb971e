"""The Board in a team's space in a real browser: the space switcher and the Members page by
keyboard, zero axe violations in light and dark and at 320 px, and a viewer who sees the
team's work with no action control."""

from __future__ import annotations

import re

from playwright.async_api import Page, expect

from board.store import vocabulary
from e2e.conftest import make_human, no_csp_errors, sign_in
from e2e.test_board_claim_order_e2e import assert_accessible_both
from e2e.test_board_e2e import tab_to


async def make_team(store) -> str:
    for name in ("ada", "ola", "vic"):
        await make_human(store, name)
    await store.team_create("platform", owner="ada")
    space = await store.team_space("platform")
    await store.team_member_set(space, "vic", "viewer")
    _, token = await store.endpoint_vend(space, name="w", agent_id="w", queues=["deploys"],
                                         scope=list(vocabulary.VERBS))
    agent = await store.endpoint_authenticate(token)
    return (await store.todo_add(agent, queue="deploys", title="Deploy the API"))["id"]


async def switch_by_keyboard(page: Page, to: str) -> None:
    space = page.get_by_label("Space")
    await tab_to(page, space)
    await page.keyboard.press("ArrowDown")  # the next space: the team
    await expect(space).to_have_value(re.compile(r"\d+"))
    await tab_to(page, page.get_by_role("button", name="Switch"))
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("status").filter(has_text=f"Showing {to}")).to_be_visible()


async def test_the_switcher_and_the_members_page_by_keyboard_axe_clean_in_both_schemes_and_at_320_px(
        page: Page, live_server):
    await make_team(live_server.store)
    await sign_in(page, "ada")
    await expect(page).to_have_title("Board · Switchboard")
    await switch_by_keyboard(page, "platform, as an admin")
    await expect(page).to_have_title("Board · platform · Switchboard")
    await expect(page.get_by_role("row").filter(has_text="Deploy the API")).to_be_visible()
    await assert_accessible_both(page, "the Board in a team's space")

    await tab_to(page, page.get_by_role("navigation", name="Main").get_by_role("link", name="Members"))
    await page.keyboard.press("Enter")
    await expect(page).to_have_title("Members · platform · Switchboard")
    table = page.get_by_role("table", name="The members of platform and their roles, admins first")
    await expect(table.get_by_role("row")).to_have_count(3)  # the heading row, ada and vic
    await assert_accessible_both(page, "the Members page")

    await tab_to(page, page.get_by_label("Username"))
    await page.keyboard.type("ola")
    await tab_to(page, page.get_by_label("Role", exact=True))
    await page.keyboard.press("ArrowDown")  # viewer -> operator
    await tab_to(page, page.get_by_role("button", name="Add member"))
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("status")).to_have_text("Added ola to platform as an operator.")
    await expect(table.get_by_role("row").filter(has_text="ola")).to_contain_text("operator")

    await tab_to(page, page.locator('a[href="/members/vic/remove"]'))
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Remove vic from platform?")).to_be_visible()
    await assert_accessible_both(page, "the remove confirmation")
    await tab_to(page, page.get_by_role("button", name="Remove vic"))
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("status")).to_have_text("Removed vic from platform.")
    await expect(table.get_by_role("row").filter(has_text="vic")).to_have_count(0)

    await page.set_viewport_size({"width": 320, "height": 640})
    await assert_accessible_both(page, "the Members page at 320 px")
    await page.goto("/")
    await expect(page.get_by_label("Space")).to_be_visible()
    await assert_accessible_both(page, "the team's Board at 320 px")
    no_csp_errors(page)


async def test_a_viewer_sees_the_team_s_work_and_no_action_control(page: Page, live_server):
    todo_id = await make_team(live_server.store)
    await sign_in(page, "vic")
    await switch_by_keyboard(page, "platform, as a viewer")
    await expect(page.get_by_role("row").filter(has_text="Deploy the API")).to_be_visible()
    main = page.locator("main")
    await expect(main.get_by_role("link", name="Add a todo")).to_have_count(0)
    await expect(main.get_by_role("checkbox", name=re.compile("^Select"))).to_have_count(0)
    await expect(main.get_by_role("button", name=re.compile(r"^(Pause|Resume) deploys|^Set|selected"))).to_have_count(0)
    await page.goto(f"/todos/{todo_id}")
    drawer = page.locator("#drawer-actions")
    await expect(drawer).to_contain_text("You are a viewer of platform: you can see this todo, not act on it.")
    await expect(drawer.get_by_role("button")).to_have_count(0)
    await expect(page.locator("#drawer-note form")).to_have_count(0)
    await assert_accessible_both(page, "a viewer's drawer")
    await page.goto("/endpoints")
    await expect(main.get_by_role("heading", name="Vend an endpoint")).to_have_count(0)
    await expect(main.get_by_role("row").filter(has_text="w")).not_to_have_count(0)
    await assert_accessible_both(page, "a viewer's Endpoints page")
