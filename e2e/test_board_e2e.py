"""The Board in a real browser: WCAG 2.0/2.1 A and AA by axe on every page, the drawer with
every kind of attempt, keyboard-only use, a live attempt arriving in an open drawer, inert
markup in summaries, and another human's todo as not-found."""

from __future__ import annotations

import re

import os
import shutil
from datetime import datetime, timedelta, timezone

from playwright.async_api import Page, expect

from e2e.conftest import ARTIFACTS, ROOT, assert_accessible, live_on, make_human, no_csp_errors, sign_in
from tests.conftest import make_agent

XSS = "<script>alert(1)</script>"


async def tab_to(page: Page, locator, limit: int = 60, key: str = "Tab") -> None:
    """Presses Tab (or the key given, e.g. Shift+Tab) until the locator has focus, as a
    keyboard user would."""
    handle = await locator.element_handle()
    for _ in range(limit):
        if await page.evaluate("(el) => document.activeElement === el", handle):
            return
        await page.keyboard.press(key)
    raise AssertionError(f"{key} never reached {locator}")


async def shift_tab_to(page: Page, locator, limit: int = 60) -> None:
    """Presses Shift+Tab until the locator has focus."""
    await tab_to(page, locator, limit, key="Shift+Tab")


async def todo_with_every_outcome(store, human):
    """A todo whose attempts end in every way a todo can go on after: failed (markup summary,
    https artifact), released (truncated summary, mcp:// artifact), lease_expired and reaped
    (both died), revoked, and completed by the owner from the Board."""
    agent = await make_agent(store, user=human, agent_id="fixer", queues=("builds",))
    t0 = datetime.now(timezone.utc) - timedelta(minutes=30)
    at = lambda minutes: t0 + timedelta(minutes=minutes)  # noqa: E731
    todo = await store.todo_add(agent, queue="builds", title="Fix the flaky build", max_attempts=10,
                                payload={"repo": "switchboard", "note": "<img src=x onerror=alert(2)>"},
                                routing={"lane": "ci"}, now=at(-1))
    tid = todo["id"]
    claim = await store.todo_claim(agent, tid, claimant="harness/box/fixer/run-1", require_fence=True, now=at(0))
    await store.todo_fail(agent, tid, summary=XSS, artifact="https://ci.example.com/runs/1",
                          lease_token=claim["lease_token"], now=at(1))
    await store.sweep_retry(now=at(5))
    await store.todo_claim(agent, tid, claimant="run-2", now=at(5))
    await store.todo_release(agent, tid, summary="tried a bisect; " + "log line\n" * 300,
                             artifact="mcp://cairn/run-2-notes", now=at(6))
    await store.todo_claim(agent, tid, claimant="run-3", lease_seconds=60, now=at(7))
    await store.todo_heartbeat(agent, tid, lease_seconds=60, now=at(7.5))
    await store.todo_claim(agent, tid, claimant="run-4", lease_seconds=60, now=at(10))  # takes over run-3
    await store.sweep_reap(now=at(12))  # run-4 dies too
    await store.todo_claim(agent, tid, claimant="run-5", lease_seconds=3600, now=at(13))
    await store.endpoint_revoke(agent.endpoint_id, user_id=human.user_id, now=at(14))
    await store.todo_retry(human, tid, now=at(15))
    await store.todo_claim(human, tid, claimant="board/ada", lease_seconds=3600, now=at(16))
    await store.todo_complete(human, tid, summary="Finished by hand", artifact="https://example.com/report/7",
                              result={"fixed": True}, now=at(17))
    return tid


async def test_every_page_passes_axe_and_the_vend_wizard_shows_the_token_once(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds", "docs"))
    await store.todo_add(agent, queue="builds", title="Pending work")
    dead = await store.todo_add(agent, queue="docs", title="Dead work", max_attempts=1)
    await store.todo_claim(agent, dead["id"])
    await store.todo_fail(agent, dead["id"], summary="no luck")

    await page.goto("/login")
    await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    await assert_accessible(page, "the sign-in page")

    await sign_in(page, "ada")
    await live_on(page)
    await expect(page.get_by_role("row", name="Dead work")).to_contain_text("dead letter")
    await assert_accessible(page, "the Board")
    await page.get_by_role("link", name="Dead letters").click()
    await expect(page.get_by_role("row", name="Pending work")).to_have_count(0)
    await expect(page.get_by_role("row", name="Dead work")).to_be_visible()

    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Endpoints").click()
    await expect(page.get_by_role("heading", name="Vend an endpoint")).to_be_visible()
    await assert_accessible(page, "the vend wizard")
    release = page.get_by_role("group", name="Release").get_by_role("checkbox")
    await expect(release).to_have_count(1)
    await expect(release).not_to_be_checked()
    await page.get_by_label("Agent id").fill("fixer-2")
    await page.get_by_label("Queues").fill("builds")
    await release.check()
    await page.get_by_role("button", name="Create endpoint").click()
    token_heading = page.get_by_role("heading", name="Endpoint fixer-2 created: copy its token now")
    await expect(token_heading).to_be_focused()
    token = await page.locator("#new-token").inner_text()
    await expect(page.locator("#client-snippet")).to_contain_text(f"{live_server.url}/mcp")
    await expect(page.locator("#client-snippet")).to_contain_text(f"Bearer {token}")
    await assert_accessible(page, "the vend wizard showing a new token")
    vended = await store.endpoint_authenticate(token)
    assert vended is not None and "release" in vended.scope
    await page.goto("/endpoints")
    assert token not in await page.content()

    await page.get_by_role("link", name="revoke fixer-2").click()
    await expect(page.get_by_role("heading", name="Revoke endpoint fixer-2?")).to_be_visible()
    await assert_accessible(page, "the revoke confirmation")
    await page.get_by_role("button", name="Revoke endpoint").click()
    await expect(page.get_by_role("status")).to_contain_text("Revoked endpoint fixer-2")
    assert await store.endpoint_authenticate(token) is None

    response = await page.goto("/todos/00000000-0000-4000-8000-000000000000")
    assert response.status == 404
    await expect(page.get_by_role("heading", name="Not found", level=1)).to_be_visible()
    await assert_accessible(page, "the not-found page")
    no_csp_errors(page)
    assert page.dialogs == []


async def save_picture(page: Page, name: str) -> None:
    """A screenshot as a test artifact. The committed copy in docs/ (the README's pictures)
    is refreshed on request only, so a test run leaves the working tree clean:
    SWITCHBOARD_UPDATE_SCREENSHOTS=1 (or a missing file) rewrites it."""
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / name))
    docs_copy = ROOT / "docs" / name
    if os.environ.get("SWITCHBOARD_UPDATE_SCREENSHOTS") == "1" or not docs_copy.exists():
        docs_copy.parent.mkdir(exist_ok=True)
        shutil.copyfile(ARTIFACTS / name, docs_copy)


async def test_the_drawer_shows_every_outcome_accessibly_with_inert_markup(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    tid = await todo_with_every_outcome(store, ada)
    other = await make_agent(store, user=ada, agent_id="other", queues=("builds",))
    canceled = await store.todo_add(other, queue="builds", title="Abandoned")
    await store.todo_claim(other, canceled["id"], claimant="run-x")
    await store.todo_cancel(other, canceled["id"])

    await sign_in(page, "ada")
    await page.goto(f"/todos/{tid}")
    dialog = page.get_by_role("dialog", name="Fix the flaky build")
    await expect(dialog).to_be_visible()
    await expect(dialog.get_by_role("heading", name="Fix the flaky build")).to_be_focused()
    await live_on(page, watching=tid)

    attempts = dialog.locator("#attempts-list > li")
    await expect(attempts).to_have_count(6)
    await expect(dialog.get_by_role("heading", name="Attempts", level=3)).to_be_visible()
    outcomes = [await a.locator("h4").inner_text() for a in await attempts.all()]
    starts = ["Attempt 6, completed after", "Attempt 5, ended when its credential was revoked after",
              "Attempt 4, died (its lease ran out with no report) after",
              "Attempt 3, died (its lease ran out with no report) after", "Attempt 2, was handed back after",
              "Attempt 1, failed after"]
    assert [o[:len(s)] for o, s in zip(outcomes, starts)] == starts, outcomes  # one sentence each, plain words

    first = dialog.locator("#attempt-1")
    await expect(first.locator(".summary")).to_have_text(XSS)  # literal text, not markup
    link = first.get_by_role("link", name="https://ci.example.com/runs/1")
    await expect(link).to_have_attribute("rel", "noopener noreferrer")
    second = dialog.locator("#attempt-2")
    await expect(second).to_contain_text("Truncated: the summary was cut to 2048 bytes")
    await expect(second.get_by_role("link")).to_have_count(0)
    await expect(second.locator("code")).to_have_text("mcp://cairn/run-2-notes")
    for seq in (3, 4):
        died = dialog.locator(f"#attempt-{seq}")
        await expect(died.get_by_role("img", name="died: no report")).to_be_visible()
        await expect(died.locator(".died-marker")).to_contain_text("Died: no report")
    await expect(dialog.locator("#attempt-3")).to_contain_text("Last heartbeat")
    await expect(dialog.locator(".died-marker")).to_have_count(2)
    await expect(dialog.locator("#attempt-6")).to_contain_text("the Board, by the owner")
    await expect(dialog.locator("#attempt-6").get_by_role("link")).to_have_attribute("rel", "noopener noreferrer")
    await expect(dialog.locator("pre").first).to_contain_text('"note": "<img src=x onerror=alert(2)>"')
    content = await page.content()
    assert "claimer_session" not in content and "lease_token" not in content

    await assert_accessible(page, "the drawer with every outcome")
    ARTIFACTS.mkdir(exist_ok=True)
    await page.set_viewport_size({"width": 1280, "height": 1500})
    await dialog.get_by_role("heading", name="Fix the flaky build").focus()
    await save_picture(page, "board-drawer.png")
    # A few more todos, so the list picture shows the states a Board holds.
    await store.todo_add(other, queue="builds", title="Update the release notes")
    held = await store.todo_add(other, queue="builds", title="Migrate the search index")
    await store.todo_claim(other, held["id"], claimant="fixer/run-12", lease_seconds=600)
    dead = await store.todo_add(other, queue="builds", title="Deploy to staging", max_attempts=1)
    await store.todo_claim(other, dead["id"])
    await store.todo_fail(other, dead["id"], summary="staging is down")
    await page.goto("/")
    await expect(page.get_by_role("link", name="Fix the flaky build")).to_be_visible()
    # The overview of the queues comes first on the page: the list picture starts below it.
    await page.set_viewport_size({"width": 1280, "height": 660})
    await page.locator("nav.views").evaluate("el => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - 4)")
    await save_picture(page, "board-list.png")

    await page.goto(f"/todos/{canceled['id']}")
    dialog = page.get_by_role("dialog", name="Abandoned")
    await expect(dialog.locator("#attempt-1 h4")).to_have_text(re.compile(r"^Attempt 1, ended when the todo was canceled after \d+ \w+, by run-x$"))
    await assert_accessible(page, "the drawer of a canceled todo")
    assert page.dialogs == [], "a script in a summary ran"
    no_csp_errors(page)


async def test_keyboard_alone_opens_a_drawer_releases_the_todo_and_closes_it(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="Held by an agent")
    await store.todo_claim(agent, todo["id"], claimant="stuck-worker", lease_seconds=3600)

    await page.goto("/login")
    await tab_to(page, page.get_by_label("Username"))
    await page.keyboard.type("ada")
    await page.keyboard.press("Tab")
    await page.keyboard.type("correct horse battery")
    await page.keyboard.press("Enter")
    link = page.get_by_role("link", name="Held by an agent")
    await expect(link).to_be_visible()
    await live_on(page)

    await tab_to(page, link)
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Held by an agent")
    await expect(dialog).to_be_visible()
    await expect(dialog.get_by_role("heading", name="Held by an agent")).to_be_focused()
    await tab_to(page, dialog.get_by_role("button", name="Release"))
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Held by an agent")
    await expect(dialog.get_by_role("status")).to_have_text("Released. The todo is pending again.")
    await expect(dialog.locator("#attempt-1 h4")).to_have_text(re.compile(r"^Attempt 1, was handed back after \d+ \w+, by stuck-worker$"))
    await expect(dialog.get_by_role("status")).to_be_focused()  # the result is read first
    await page.keyboard.press("Escape")
    await expect(dialog).to_be_hidden()
    await expect(link).to_be_focused()
    assert page.url == f"{live_server.url}/"
    assert (await store.todo_get(ada, todo["id"]))["state"] == "pending"

    # Opened in place this time: Escape returns focus to the link that opened it.
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Held by an agent")
    await expect(dialog).to_be_visible()
    assert page.url.endswith(f"/todos/{todo['id']}")
    await expect(dialog.get_by_role("button", name="Claim")).to_be_visible()
    await page.keyboard.press("Escape")
    await expect(dialog).to_be_hidden()
    await expect(link).to_be_focused()
    await expect(page).to_have_url(f"{live_server.url}/")
    no_csp_errors(page)


async def test_a_claim_made_while_the_drawer_is_open_appears_in_its_live_region(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="Watch this one")

    await sign_in(page, "ada")
    await page.get_by_role("link", name="Watch this one").click()
    dialog = page.get_by_role("dialog", name="Watch this one")
    await expect(dialog).to_be_visible()
    await live_on(page, watching=todo["id"])  # the stream now watches this drawer
    await expect(dialog.locator("#attempts-list > li")).to_have_count(0)
    await page.evaluate("window.__noReload = true")

    await store.todo_claim(agent, todo["id"], claimant="harness/box/fixer/run-7")
    region = dialog.locator("#attempts-list")
    await expect(dialog.locator("[aria-live=polite]")).to_have_text("Attempt 1 opened by harness/box/fixer/run-7")
    await expect(region.locator("li#attempt-1")).to_contain_text("harness/box/fixer/run-7")
    await expect(region.locator("li#attempt-1 h4")).to_have_text(
        re.compile(r"^Attempt 1, open for \d+ \w+, by harness/box/fixer/run-7$"))
    await expect(dialog.locator("#drawer-details")).to_contain_text("agent:w1")
    await expect(dialog.locator(".liveness")).to_have_text("live")
    await expect(page.get_by_role("row", name="Watch this one")).to_contain_text("claimed")

    await store.todo_fail(agent, todo["id"], summary=XSS)
    await expect(region.locator("li#attempt-1 h4")).to_have_text(re.compile(r"^Attempt 1, failed after \d+ \w+, by harness/box/fixer/run-7: <script>"))
    await expect(region.locator("li#attempt-1 .summary")).to_have_text(XSS)
    await store.sweep_retry(now=datetime.now(timezone.utc) + timedelta(hours=2))
    await store.todo_claim(agent, todo["id"], claimant="run-8")
    await expect(region.locator("li")).to_have_count(2)
    await expect(region.locator("li").first).to_contain_text("run-8")
    assert await page.evaluate("window.__noReload === true"), "the page reloaded"
    assert page.dialogs == []
    no_csp_errors(page)


async def test_a_second_human_gets_not_found_for_the_first_humans_drawer(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    await make_human(store, "bob")
    tid = await todo_with_every_outcome(store, ada)

    await sign_in(page, "bob")
    foreign = await page.goto(f"/todos/{tid}")
    assert foreign.status == 404
    await expect(page.get_by_role("heading", name="Not found", level=1)).to_be_visible()
    await expect(page.get_by_role("dialog")).to_have_count(0)
    foreign_html = await page.content()
    random = await page.goto("/todos/3f2b5a10-1111-4222-8333-444455556666")
    assert random.status == 404
    assert await page.content() == foreign_html
    for leaked in ("Fix the flaky build", "harness", "Finished by hand", "attempt", "cairn"):
        assert leaked not in foreign_html
