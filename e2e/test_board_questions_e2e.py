"""An agent's question on the Board in a real browser: the owner answers by keyboard alone,
with a choice and with typed words, and the result message takes focus; a screen reader hears
the question once as the drawer opens and, in another open drawer of the todo, the answer as
one line; axe finds nothing in light and dark at 1280 and 320 px with the question shown (and
an earlier attempt whose question expired). The agent hosts' A2UI surface and MCP App show the
same question and answer, from the one todo detail view."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import pytest
from playwright.async_api import Page, expect

from e2e.conftest import ARTIFACTS, assert_accessible, live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_e2e import tab_to
from e2e.test_board_everywhere_e2e import NARROW, WIDE, check_layout
from e2e.test_agent_hosts_e2e import APP_URI, SCHEMES, host_page, host_site, no_violations  # noqa: F401 (a fixture)
from e2e.test_board_screen_reader_e2e import screen_reader_script, spoken
from tests.acceptance.mcp_helpers import McpApps, connect, vend
from tests.conftest import make_agent


@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(a2ui_enabled=True)

QUESTION = "Deploy build 418 to production now?"


async def asking(store, human, title: str = "Ship build 418", expires_in: int | None = 600) -> tuple:
    """A todo held by an agent that interrupted it with a question and two choices."""
    agent = await make_agent(store, user=human, agent_id="deployer", queues=("deploys",))
    todo = await store.todo_add(agent, queue="deploys", title=title)
    await store.todo_claim(agent, todo["id"], claimant="deployer/run-3", lease_seconds=3600)
    await store.todo_interrupt(agent, todo["id"], question=QUESTION, choices=["deploy now", "wait for the freeze"],
                               expires_in_seconds=expires_in)
    return agent, todo


async def test_the_owner_answers_by_keyboard_alone_with_a_choice_and_with_typed_words(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent, todo = await asking(store, ada)

    await sign_in(page, "ada")
    await live_on(page)
    await tab_to(page, page.get_by_role("link", name="Ship build 418"))
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Ship build 418")
    await expect(dialog.get_by_role("heading", name="Ship build 418", level=2)).to_be_focused()
    # The question is the first section under the title, with its expiry in words and a time.
    section = dialog.get_by_role("region", name="The agent asks")
    await expect(section).to_contain_text(QUESTION)
    await expect(section.locator("#question-when")).to_contain_text("Expires in 10 minutes, at ")
    await expect(section.locator("#question-when time")).to_have_count(2)

    await tab_to(page, section.get_by_role("button", name="deploy now"))
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Ship build 418")
    result = dialog.get_by_role("status").filter(has_text="Answered. The agent has been told.")
    await expect(result).to_be_focused()
    section = dialog.get_by_role("region", name="The agent asks")
    await expect(section.get_by_role("list", name="Answers so far")).to_contain_text("ada answered: deploy now")

    await tab_to(page, section.get_by_role("textbox", name="Your answer"))
    await page.keyboard.type("Also tag the release 418.")
    await page.keyboard.press("Tab")
    await expect(section.get_by_role("button", name="Answer", exact=True)).to_be_focused()
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Ship build 418")
    await expect(dialog.get_by_role("status").filter(has_text="Answered. The agent has been told.")).to_be_focused()
    answers = dialog.get_by_role("region", name="The agent asks").get_by_role("list", name="Answers so far")
    await expect(answers.get_by_role("listitem")).to_have_count(2)
    await expect(answers.get_by_role("listitem").last).to_contain_text("ada answered: Also tag the release 418.")
    # The attempt row says it in plain words too.
    await expect(dialog.locator("#attempt-1 .attempt-question")).to_contain_text(
        "ada answered at ")

    resumed = await store.todo_resume(agent, todo["id"])
    assert [(a["text"], a["choice"], a["who"]) for a in resumed["answers"]] == [
        ("deploy now", "deploy now", "ada"), ("Also tag the release 418.", None, "ada")]
    # The todo no longer waits: the open drawer loses the form live.
    await expect(page.get_by_role("dialog", name="Ship build 418").locator("#drawer-question form")).to_have_count(0)
    no_csp_errors(page)
    assert page.dialogs == []


async def test_the_question_and_an_expired_one_pass_axe_in_light_and_dark_at_1280_and_320_px(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="deployer", queues=("deploys",))
    todo = await store.todo_add(agent, queue="deploys", title="Ship build 418", max_attempts=3)
    await store.todo_claim(agent, todo["id"], claimant="deployer/run-2", lease_seconds=3600)
    await store.todo_note(agent, todo["id"], text="staging is green")
    await store.todo_interrupt(agent, todo["id"], question="Is the freeze over?", expires_in_seconds=60)
    assert await store.sweep_questions(now=datetime.now(timezone.utc) + timedelta(minutes=2)) == 1
    await store.todo_claim(agent, todo["id"], claimant="deployer/run-3", lease_seconds=3600)
    await store.todo_interrupt(agent, todo["id"], question=QUESTION, choices=["deploy now", "wait for the freeze"],
                               expires_in_seconds=600)
    await store.todo_answer(ada, todo["id"], text="deploy now, then tag it", choice="deploy now")

    await sign_in(page, "ada")
    await page.goto(f"/todos/{todo['id']}")
    dialog = page.get_by_role("dialog", name="Ship build 418")
    await expect(dialog.get_by_role("region", name="The agent asks")).to_contain_text(QUESTION)
    await expect(dialog.locator("#attempt-1 .attempt-question")).to_contain_text("Expired unanswered at")
    await expect(dialog.locator("#attempt-1 .notes")).to_contain_text("Switchboard noted the question expired")
    await live_on(page, watching=todo["id"])
    ARTIFACTS.mkdir(exist_ok=True)
    for viewport in (WIDE, NARROW):
        for scheme in ("light", "dark"):
            await page.set_viewport_size(viewport)
            await page.emulate_media(color_scheme=scheme)
            what = f"the drawer with a question at {viewport['width']} px, {scheme}"
            await check_layout(page, what)
            await assert_accessible(page, what)
            await page.screenshot(path=str(ARTIFACTS / f"question-{viewport['width']}-{scheme}.png"))
    no_csp_errors(page)


async def test_an_answer_turns_waiting_for_a_person_into_the_agents_lease_live(page: Page, live_server):
    """The list row and the open drawer say the todo waits for a person, with their times
    kept current, and turn to the agent's lease to resume in once another tab answers."""
    store = live_server.store
    ada = await make_human(store, "ada")
    agent, todo = await asking(store, ada, expires_in=30 * 60)
    await sign_in(page, "ada")
    await page.goto(f"/todos/{todo['id']}")
    await live_on(page, watching=todo["id"])
    row, current = page.locator(f"#todo-{todo['id']}"), page.locator("#drawer-details .current-attempt")
    waiting = re.compile(r"waiting for a person, asked (just now|\d+ s ago), expires in (29|30) min")
    await expect(row).to_contain_text(waiting)
    await expect(current).to_contain_text(waiting)
    await store.todo_answer(ada, todo["id"], text="go")
    await expect(current).to_contain_text("lease ends in")
    await expect(current).not_to_contain_text("waiting for a person")
    await expect(row).to_contain_text("lease ends in")
    await expect(row).not_to_contain_text("waiting for a person")


async def test_a_screen_reader_hears_the_question_once_on_opening_and_the_answer_as_one_line_elsewhere(
        browser, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    _, todo = await asking(store, ada)
    context = await browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900},
                                        bypass_csp=True)  # the injected reader only; the page is unchanged
    await context.add_init_script(screen_reader_script())
    listener, answerer = await context.new_page(), await context.new_page()
    try:
        await sign_in(listener, "ada")
        await live_on(listener)
        await listener.evaluate("async () => { await window.__vsr.virtual.start({container: document.body}); }")
        await listener.get_by_role("link", name="Ship build 418").focus()
        await listener.keyboard.press("Enter")
        dialog = listener.get_by_role("dialog", name="Ship build 418")
        await expect(dialog.get_by_role("heading", name="Ship build 418", level=2)).to_be_focused()
        await live_on(listener, watching=todo["id"])
        await listener.wait_for_timeout(500)  # anything said twice would be said by now
        heard = await spoken(listener)
        opened = next(i for i, p in enumerate(heard) if p.startswith("dialog, Ship build 418"))
        asked = [p for p in heard[opened:] if QUESTION in p]
        assert len(asked) == 1, heard[opened:]  # the question, once, as the drawer opens
        assert heard[opened + 1] == "heading, Ship build 418, level 2", heard[opened:]

        wait = dialog.get_by_role("button", name="wait for the freeze")
        await wait.focus()  # where a keyboard user might be as the answer arrives
        await listener.evaluate("async () => await window.__vsr.virtual.clearSpokenPhraseLog()")
        await listener.evaluate("window.__announced = []")
        # Another drawer of the same todo (another tab) answers; the listener's drawer hears it.
        await answerer.goto(f"/todos/{todo['id']}")
        await answerer.get_by_role("dialog", name="Ship build 418").get_by_role("button", name="deploy now").click()
        await expect(answerer.get_by_role("status").filter(has_text="Answered.")).to_be_visible()
        line = "ada answered: deploy now"
        await listener.wait_for_function("(line) => window.__announced.includes(line)", arg=line)
        await listener.wait_for_timeout(500)  # anything repeated would arrive by now
        assert await listener.evaluate("window.__announced") == [line]  # the page announced it once
        said = [p for p in await spoken(listener) if p.startswith("polite:")]
        assert said == [f"polite: {line}"], said  # and a person hears one line
        await expect(dialog.get_by_role("list", name="Answers so far")).to_contain_text(line)
        await expect(wait).to_be_focused()  # the section was redrawn around it; focus stayed
    finally:
        await context.close()


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_the_a2ui_surface_and_the_mcp_app_show_the_question_and_its_answer(browser, live_server, host_site,
                                                                                scheme):
    store = live_server.store
    ada = await make_human(store, "ada")
    ep = await vend(store, user_id=ada.user_id)
    agent = await store.endpoint_authenticate(ep.token)
    todo = await store.todo_add(agent, queue=agent.queues[0], title="Ship build 418")
    await store.todo_claim(agent, todo["id"], claimant="deployer/run-3", lease_seconds=3600)
    await store.todo_interrupt(agent, todo["id"], question=QUESTION, choices=["deploy now", "wait for the freeze"])
    await store.todo_answer(ada, todo["id"], choice="deploy now")
    async with connect(live_server, ep.token, "legacy", extensions=[McpApps()]) as client:
        messages = json.loads((await client.read_resource(f"switchboard://todos/{todo['id']}/a2ui")).contents[0].text)
        [app] = (await client.read_resource(APP_URI)).contents
        result = await client.call_tool("get_todo", {"id": todo["id"]})
    async with host_page(browser, scheme) as page:
        await page.goto(host_site + "/a2ui.html")
        await page.wait_for_function("typeof window.renderA2ui === 'function'")
        await page.evaluate("messages => window.renderA2ui(messages)", messages)
        await expect(page.get_by_role("heading", name="The agent asks", level=3)).to_be_visible()
        await expect(page.get_by_text("The agent asked at ")).to_have_count(2)  # waiting, and in the attempt
        await expect(page.get_by_text("ada answered: deploy now (at ")).to_have_count(2)
        await expect(page.get_by_text("ada answered, ")).to_have_count(1)  # the answer among the notes
        await no_violations(page, f"the A2UI surface with a question ({scheme})")
    async with host_page(browser, scheme) as page:
        await page.goto(host_site + "/app.html")
        await page.wait_for_function("typeof window.startApp === 'function'")
        await page.evaluate("([html, theme]) => window.startApp(html, theme)", [app.text, scheme])
        await page.evaluate("result => window.sendResult(result)",
                            result.model_dump(by_alias=True, mode="json", exclude_none=True))
        frame = page.frame_locator("iframe")
        waiting = frame.get_by_role("region", name="The agent asks")
        await expect(waiting).to_contain_text(QUESTION)
        await expect(waiting).to_contain_text("Choices offered: deploy now, wait for the freeze.")
        await expect(waiting).to_contain_text("ada answered: deploy now")
        await expect(frame.locator("#attempt-1")).to_contain_text("ada answered, ")
        app_frame = next(f for f in page.frames if f != page.main_frame)
        await no_violations(app_frame, f"the MCP App with a question ({scheme})")
