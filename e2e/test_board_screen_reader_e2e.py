"""What a screen-reader user hears, asserted with a virtual screen reader running in Chromium
(@guidepup/virtual-screen-reader, pinned in tests/clients): opening a todo's drawer says the
dialog's name, then its title; an attempt opening, a note and the attempt closing are each one
phrase, spoken once; the attempt opens with one plain sentence; closing the drawer lands back
on the link that opened it; the page's title names the open todo."""

from __future__ import annotations

import re
from contextlib import asynccontextmanager

from playwright.async_api import Page, expect

from e2e.conftest import live_on, make_human, sign_in
from tests.acceptance.third_party import CLIENTS
from tests.conftest import make_agent

BUNDLE = CLIENTS / "node_modules" / "@guidepup" / "virtual-screen-reader" / "lib" / "esm" / "index.browser.js"
# The library's browser build is an ES module; as a classic init script it hands its exports
# to the page instead. The news log's own additions are recorded beside it, so a phrase the
# simulator reads from an attribute change is told apart from a line the page announced.
RECORD = """
window.__announced = [];
new MutationObserver((records) => {
  for (const r of records) for (const n of r.addedNodes) {
    const log = n.parentElement && n.parentElement.closest && n.parentElement.closest("#attempts-news");
    if (log && n.textContent) window.__announced.push(n.textContent);
  }
}).observe(document, {childList: true, subtree: true});
"""


def screen_reader_script() -> str:
    text = BUNDLE.read_text(encoding="utf-8")
    patched, n = re.subn(r"export\{(\w+) as Virtual,([\w$]+) as virtual\}", r"window.__vsr={Virtual:\1,virtual:\2};",
                         text)
    assert n == 1, "the virtual screen reader's bundle changed shape"
    return patched + RECORD


@asynccontextmanager
async def reading(browser, live_server, user: str = "ada"):
    """A page with the virtual screen reader injected, signed in and live."""
    context = await browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900},
                                        bypass_csp=True)  # the injected reader only; the page is unchanged
    await context.add_init_script(screen_reader_script())
    try:
        page = await context.new_page()
        await sign_in(page, user)
        await live_on(page)
        yield page
    finally:
        await context.close()


async def spoken(page: Page) -> list[str]:
    return await page.evaluate("async () => await window.__vsr.virtual.spokenPhraseLog()")


async def test_a_screen_reader_hears_the_drawer_open_each_attempt_event_once_and_the_way_back(browser, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    todo = await store.todo_add(agent, queue="builds", title="Fix the flaky build")
    context = await browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900},
                                        bypass_csp=True)  # the injected reader only; the page is unchanged
    await context.add_init_script(screen_reader_script())
    page = await context.new_page()
    try:
        await sign_in(page, "ada")
        await live_on(page)
        await page.evaluate("async () => { await window.__vsr.virtual.start({container: document.body}); }")
        link = page.get_by_role("link", name="Fix the flaky build")
        await link.focus()
        await page.keyboard.press("Enter")
        dialog = page.get_by_role("dialog", name="Fix the flaky build")
        await expect(dialog.get_by_role("heading", name="Fix the flaky build", level=2)).to_be_focused()
        await live_on(page, watching=todo["id"])
        heard = await spoken(page)
        opened = heard.index("dialog, Fix the flaky build")
        assert heard[opened + 1] == "heading, Fix the flaky build, level 2", heard[opened:]
        assert await page.title() == "Fix the flaky build · Board · Switchboard"

        await page.evaluate("async () => await window.__vsr.virtual.clearSpokenPhraseLog()")
        await page.evaluate("window.__announced = []")
        lines = ["Attempt 1 opened by fixer/run-7", "Note on attempt 1: the cache key ignores the lockfile",
                 "Attempt 1 completed: Keyed the cache on the lockfile; suite green."]
        changes = [lambda: store.todo_claim(agent, todo["id"], claimant="fixer/run-7"),
                   lambda: store.todo_note(agent, todo["id"], text="the cache key ignores the lockfile"),
                   lambda: store.todo_complete(agent, todo["id"], summary="Keyed the cache on the lockfile; suite green.")]
        for change, line in zip(changes, lines):  # one at a time, as a person hears them
            await change()
            await page.wait_for_function("(line) => window.__announced.includes(line)", arg=line)
        await page.wait_for_timeout(500)  # anything repeated would arrive by now
        said = [p for p in await spoken(page) if p.startswith("polite: Attempt") or p.startswith("polite: Note")]
        assert said == [f"polite: {line}" for line in lines], said  # each once, in order
        assert await page.evaluate("window.__announced") == lines  # and the page announced each once
        sentence = dialog.locator("#attempt-1 h4")
        await expect(sentence).to_have_text(re.compile(
            r"^Attempt 1, completed after \d+ \w+, by fixer/run-7: Keyed the cache on the lockfile; suite green\.$"))
        # The news log comes after the attempts, so reading them does not replay it first.
        order = await page.evaluate("""() => {
            const news = document.getElementById('attempts-news'), list = document.getElementById('attempts-list');
            return !!(list.compareDocumentPosition(news) & Node.DOCUMENT_POSITION_FOLLOWING)
                   && !news.closest('section.attempts'); }""")
        assert order

        await page.evaluate("async () => await window.__vsr.virtual.clearSpokenPhraseLog()")
        await page.keyboard.press("Escape")
        await expect(link).to_be_focused()
        heard = await spoken(page)
        assert "link, Fix the flaky build" in heard, heard
        assert await page.title() == "Board · Switchboard"
    finally:
        await context.close()


async def test_a_screen_reader_hears_sign_in_a_row_and_each_new_todo_count_once(browser, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    await store.todo_add(agent, queue="builds", title="Already here")
    context = await browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900},
                                        bypass_csp=True)
    await context.add_init_script(screen_reader_script())
    page = await context.new_page()
    try:
        await page.goto("/login")
        await page.evaluate("async () => { await window.__vsr.virtual.start({container: document.body}); }")
        await page.get_by_label("Username").focus()
        await page.get_by_label("Password").focus()
        heard = await spoken(page)
        assert any(p.startswith("textbox, Username") for p in heard), heard
        assert any(p.startswith("Password") for p in heard), heard  # a password field has no ARIA role
        await page.get_by_label("Username").fill("ada")
        await page.get_by_label("Password").fill("correct horse battery")
        await page.get_by_role("button", name="Sign in").click()
        await live_on(page)
        await page.evaluate("async () => { await window.__vsr.virtual.start({container: document.body}); }")
        await page.get_by_role("link", name="Already here").focus()
        assert "link, Already here" in await spoken(page)

        # A busy queue: the count is spoken once per change, never repeated.
        for i in range(6):
            await store.todo_add(agent, queue="builds", title=f"New {i}")
            await page.wait_for_timeout(700)
        await expect(page.locator("#new-todos")).to_have_text("6 new todos", timeout=15_000)
        counts = [p for p in await spoken(page) if re.fullmatch(r"polite: \d+ new todos?", p)]
        assert counts and counts[-1] == "polite: 6 new todos", counts
        assert len(counts) == len(set(counts)), counts  # each count once
        assert len(counts) <= 3, counts  # a burst of six is a few short announcements, not six
    finally:
        await context.close()
