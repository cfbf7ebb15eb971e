"""The overview of the queues in a real browser: zero axe violations (WCAG 2.2 AA tags too)
with a paused and a live queue, pause and resume by keyboard alone with focus back on the
toggled control, counts that open the filtered list, a count that moves live, and the
picture of the overview for the README."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from playwright.async_api import Page, expect

from e2e.conftest import assert_accessible, live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_e2e import save_picture, tab_to
from tests.conftest import make_agent


# An hour of closed attempts: (minutes ago, queue, how it closed).
CLOSED = [(m, "builds", "complete") for m in (53, 52, 47, 41, 36, 30, 25, 19, 14, 9, 5, 2)] + [
    (33, "builds", "dead"), (12, "builds", "fail"), (20, "deploys", "release"), (16, "deploys", "reap")] + [
    (m, "deploys", "complete") for m in (54, 40, 28, 8)]


async def busy_queues(store, human):
    """Three queues with todos in most states and an hour of closed attempts; docs is paused.
    builds ends with 3 pending, 1 interrupted, 1 retrying, 1 dead letter, 12 done."""
    agent = await make_agent(store, user=human, agent_id="fixer", queues=("builds", "docs", "deploys"))
    now = datetime.now(timezone.utc)
    for minutes, queue, how in CLOSED:
        at = now - timedelta(minutes=minutes)
        todo = await store.todo_add(agent, queue=queue, title=f"{how} {minutes}", now=at - timedelta(seconds=30),
                                    max_attempts=1 if how in ("dead", "reap") else 5)
        await store.todo_claim(agent, todo["id"], lease_seconds=10, now=at - timedelta(seconds=20))
        if how == "complete":
            await store.todo_complete(agent, todo["id"], now=at)
        elif how in ("fail", "dead"):
            await store.todo_fail(agent, todo["id"], summary="tests red", now=at)
        elif how == "release":
            await store.todo_release(agent, todo["id"], summary="not mine", now=at)
        else:
            await store.sweep_reap(now=at)
    for i in range(3):
        await store.todo_add(agent, queue="builds", title=f"Queued build {i}")
    await store.todo_add(agent, queue="docs", title="Proofread the guide")
    asked = await store.todo_add(agent, queue="builds", title="Needs a decision")
    await store.todo_claim(agent, asked["id"], lease_seconds=3600)
    await store.todo_interrupt(agent, asked["id"])
    held = await store.todo_add(agent, queue="deploys", title="Deploy to staging")
    await store.todo_claim(agent, held["id"], claimant="fixer/run-9", lease_seconds=3600)
    await store.queue_pause(human, "docs")
    return agent


async def test_the_overview_with_a_paused_and_a_live_queue_passes_axe_and_pauses_by_keyboard(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await busy_queues(store, ada)

    await sign_in(page, "ada")
    await live_on(page)
    overview = page.get_by_role("region", name="Queues")
    await expect(overview.get_by_role("row", name="docs")).to_contain_text(re.compile(r"Paused\s+Resume docs\s+since 20"))
    await expect(overview.get_by_role("row", name="builds")).to_contain_text("Active")
    await expect(overview.get_by_role("button", name="Resume docs")).to_be_visible()
    await assert_accessible(page, "the overview with a paused and a live queue")
    await page.set_viewport_size({"width": 1280, "height": 760})
    await save_picture(page, "board-overview.png")

    # Keyboard alone: pause builds, then resume it; focus comes back to the toggled control.
    pause = overview.get_by_role("button", name="Pause builds")
    await tab_to(page, pause)
    await page.keyboard.press("Enter")
    resume = page.get_by_role("region", name="Queues").get_by_role("button", name="Resume builds")
    await expect(resume).to_be_focused()
    await expect(page.get_by_role("status").filter(has_text="Paused queue builds")).to_be_visible()
    await expect(page.get_by_role("region", name="Queues").get_by_role("row", name="builds")).to_contain_text("Paused")
    assert (await store.todo_claim_next(agent, queue="builds"))["todo"] is None
    await live_on(page)  # the live snapshot patched the overview: the focused control stayed
    await expect(resume).to_be_focused()
    await assert_accessible(page, "the overview after a pause")
    await page.keyboard.press("Enter")
    pause = page.get_by_role("region", name="Queues").get_by_role("button", name="Pause builds")
    await expect(pause).to_be_focused()
    await expect(page.get_by_role("status").filter(has_text="Resumed queue builds")).to_be_visible()
    assert (await store.todo_claim_next(agent, queue="builds"))["todo"] is not None
    no_csp_errors(page)
    assert page.dialogs == []


async def test_a_count_opens_the_filtered_list_and_counts_move_live(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await busy_queues(store, ada)
    bob = await make_human(store, "bob")
    bob_agent = await make_agent(store, user=bob, agent_id="bob", queues=("builds",))
    await store.todo_add(bob_agent, queue="builds", title="Bob's build")

    await sign_in(page, "ada")
    await live_on(page)
    builds = page.get_by_role("region", name="Queues").get_by_role("row", name="builds")
    await expect(builds.get_by_role("link", name="3 ready in builds")).to_be_visible()  # not Bob's
    await expect(builds.get_by_role("link", name="1 dead letter in builds")).to_be_visible()
    await expect(builds.get_by_role("cell").last).to_contain_text("12 completed, 0 released, 2 failed, 0 died")

    await store.todo_add(agent, queue="builds", title="Added while watching")
    await expect(builds.get_by_role("link", name="4 ready in builds")).to_be_visible()

    await builds.get_by_role("link", name="4 ready in builds").click()
    await expect(page).to_have_url(f"{live_server.url}/?queue=builds&start=ready")
    table = page.locator("table.todos")
    await expect(table.get_by_role("row", name="Added while watching")).to_be_visible()
    await expect(table.get_by_role("row", name="Proofread the guide")).to_have_count(0)
    await expect(table.get_by_role("row", name="Bob's build")).to_have_count(0)
    await expect(table.locator("tbody tr")).to_have_count(4)
    no_csp_errors(page)


async def test_the_chart_window_is_chosen_by_keyboard_and_its_figures_are_said_in_text(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await busy_queues(store, ada)
    # Closed two days ago: in the week's chart, not the day's or the hour's.
    old = await store.todo_add(agent, queue="builds", title="Last week's build",
                               now=datetime.now(timezone.utc) - timedelta(days=2, minutes=1))
    await store.todo_claim(agent, old["id"], now=datetime.now(timezone.utc) - timedelta(days=2, seconds=30))
    await store.todo_complete(agent, old["id"], now=datetime.now(timezone.utc) - timedelta(days=2))

    await sign_in(page, "ada")
    await live_on(page)
    overview = page.get_by_role("region", name="Queues")
    builds = overview.get_by_role("row", name="builds")
    await expect(overview.get_by_role("columnheader", name="Last hour")).to_be_visible()
    await expect(builds.get_by_role("cell").last).to_contain_text("12 completed, 0 released, 2 failed, 0 died")
    choice = overview.get_by_role("group", name="Attempts closed in the")
    await expect(choice.get_by_role("button", name="last hour")).to_have_attribute("aria-pressed", "true")

    week = choice.get_by_role("button", name="last week")
    await tab_to(page, week)
    await page.keyboard.press("Enter")
    week = page.get_by_role("region", name="Queues").get_by_role("button", name="last week")
    await expect(week).to_be_focused()
    await expect(week).to_have_attribute("aria-pressed", "true")
    overview = page.get_by_role("region", name="Queues")
    await expect(overview.get_by_role("columnheader", name="Last week")).to_be_visible()
    builds = overview.get_by_role("row", name="builds")
    await expect(builds.get_by_role("cell").last).to_contain_text("13 completed, 0 released, 2 failed, 0 died")
    await expect(page.locator("#overview-help")).to_contain_text("each 6 hours of the last week")

    await live_on(page)  # the live stream reads the same window: its refresh keeps the week's figures
    await store.todo_complete(agent, (await store.todo_claim_next(agent, queue="builds"))["todo"]["id"])
    await expect(builds.get_by_role("cell").last).to_contain_text("14 completed", timeout=15_000)
    await expect(week).to_be_focused()
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await assert_accessible(page, f"the overview's week chart ({scheme})")
    no_csp_errors(page)
