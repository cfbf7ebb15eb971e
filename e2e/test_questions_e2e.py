"""An agent asks, a person answers in Chromium, the agent hears it: an agent's MCP session
(the Python SDK, 2026-07-28, listening on the todo's URI) interrupts with a question and
choices; the owner signs in, opens the todo's drawer and answers by keyboard alone; the
agent's session is rung (the latency from the key press is measured and printed) and resume
returns the answer. axe finds nothing on the drawer with the question, light and dark."""

from __future__ import annotations

import time

from playwright.async_api import Page, expect

from e2e.conftest import assert_accessible, live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_e2e import tab_to
from tests.acceptance.mcp_helpers import call, vend
from tests.acceptance.test_mcp_questions import RING_BOUND, held_todo, uri, waiting_session

TITLE = "Deploy build 412"
QUESTION = "Deploy build 412 to production now?"


async def test_the_owner_answers_by_keyboard_in_the_drawer_and_the_agent_is_rung_and_resumes_with_it(
        page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    ep = await vend(store, user_id=ada.user_id)
    todo_id = await held_todo(live_server, ep, TITLE)
    async with waiting_session(live_server, ep, "modern", uri(todo_id)) as (agent, bell):
        await call(agent, "interrupt", {"id": todo_id, "question": QUESTION, "choices": ["yes", "not yet"]})

        await sign_in(page, "ada")
        await live_on(page)
        await tab_to(page, page.get_by_role("link", name=TITLE))
        await page.keyboard.press("Enter")
        dialog = page.get_by_role("dialog", name=TITLE)
        await expect(dialog).to_be_visible()
        await live_on(page, watching=todo_id)
        await expect(dialog.get_by_role("heading", name="The agent asks")).to_be_visible()
        await expect(dialog.locator("#question-text")).to_have_text(QUESTION)
        for scheme in ("light", "dark"):
            await page.emulate_media(color_scheme=scheme)
            await assert_accessible(page, f"the drawer with the agent's question ({scheme})")
        await page.emulate_media(color_scheme="light")

        choice = dialog.get_by_role("button", name="not yet", exact=True)
        await tab_to(page, choice)
        seen = bell.count(uri(todo_id))
        began = time.monotonic()
        await page.keyboard.press("Enter")
        rung = await bell.next_ring(uri(todo_id), seen, timeout=RING_BOUND + 5)
        print(f"\n[chromium -> modern session] Enter on the choice -> ring heard: {rung - began:.3f} s "
              "(the browser's post and redirect included)")
        assert rung - began < RING_BOUND

        dialog = page.get_by_role("dialog", name=TITLE)
        await expect(dialog).to_contain_text("Answered. The agent has been told.")
        await expect(dialog).to_contain_text("ada answered: not yet")
        resumed = await call(agent, "resume", {"id": todo_id})
    assert [(a["text"], a["choice"], a["who"]) for a in resumed["answers"]] == [("not yet", "not yet", "ada")]
    no_csp_errors(page)
    assert page.dialogs == []


async def test_the_owner_types_an_answer_and_activates_answer_by_keyboard(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    ep = await vend(store, user_id=ada.user_id)
    todo_id = await held_todo(live_server, ep, TITLE)
    async with waiting_session(live_server, ep, "legacy", uri(todo_id)) as (agent, bell):
        await call(agent, "interrupt", {"id": todo_id, "state": "auth_required", "question": "Paste the one-time code"})
        await sign_in(page, "ada")
        await page.goto(f"/todos/{todo_id}")
        dialog = page.get_by_role("dialog", name=TITLE)
        await expect(dialog).to_be_visible()
        await tab_to(page, dialog.get_by_label("Your answer"))
        await page.keyboard.type("493 112")
        await page.keyboard.press("Tab")
        await expect(dialog.get_by_role("button", name="Answer", exact=True)).to_be_focused()
        seen = bell.count(uri(todo_id))
        began = time.monotonic()
        await page.keyboard.press("Enter")
        rung = await bell.next_ring(uri(todo_id), seen, timeout=RING_BOUND + 5)
        print(f"\n[chromium -> legacy session] Enter on Answer -> ring heard: {rung - began:.3f} s")
        await expect(page.get_by_role("dialog", name=TITLE)).to_contain_text("ada answered: 493 112")
        resumed = await call(agent, "resume", {"id": todo_id})
    assert [(a["text"], a["choice"], a["who"]) for a in resumed["answers"]] == [("493 112", None, "ada")]
    no_csp_errors(page)
