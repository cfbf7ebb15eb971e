"""The Board everywhere: every page at 320 CSS px (1280 px at 400% zoom) and at 1280 px, in
the light and dark schemes, in forced colours and with reduced motion. Each page must not
scroll sideways but inside a labelled table region, pass axe (WCAG 2.0, 2.1 and 2.2 A/AA
tags) in light and dark, and give every link and control 24 by 24 CSS px or the spacing
WCAG 2.5.8 allows; a focused element is never hidden under the drawer's sticky head. The
scheme toggle works by keyboard, with or without JavaScript, and a reload keeps it.

One server and one seeded Board serve the whole module; each page is one test."""

from __future__ import annotations

import re
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from playwright.async_api import Page, expect

from board.config import Settings
from e2e.conftest import ARTIFACTS, assert_accessible, live_on, make_human, no_csp_errors, sign_in
from e2e.test_board_e2e import save_picture, tab_to, todo_with_every_outcome
from tests.acceptance.mcp_helpers import credential
from tests.acceptance.oauth_helpers import authorize_params, pkce, public_client
from tests.conftest import create_database, drop_database, make_agent, run_server

NARROW = {"width": 320, "height": 640}
WIDE = {"width": 1280, "height": 900}
SHOTS = ARTIFACTS / "everywhere"

# Run in the page: every link and control a pointer can hit, and those failing WCAG 2.5.8
# (24 by 24 CSS px). An undersized one passes when a 24 px circle on its centre meets no
# other target and no other undersized one's circle (the spacing exception), or when it is
# a link inside a sentence (the inline exception: text, not a target we size).
TARGETS_JS = """() => {
  const modal = document.querySelector('dialog:modal');
  const sel = 'a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]:not([tabindex="-1"])';
  const inSentence = (el) => {
    if (el.tagName !== 'A' || getComputedStyle(el).display !== 'inline') return false;
    let block = el.parentElement;
    while (block && getComputedStyle(block).display.startsWith('inline')) block = block.parentElement;
    let text = block.innerText;
    block.querySelectorAll('a, button').forEach((t) => { text = text.replace(t.innerText, ''); });
    return /[A-Za-z]{2}/.test(text);
  };
  const targets = [...document.querySelectorAll(sel)].filter((el) => {
    if (modal && !modal.contains(el)) return false;  // inert behind the open drawer
    const r = el.getBoundingClientRect(), cs = getComputedStyle(el);
    if (cs.visibility === 'hidden' || r.width === 0 || r.height === 0) return false;
    if (r.bottom + window.scrollY <= 0) return false;  // the skip link, off-screen until focused
    return !el.closest('.visually-hidden');
  }).map((el) => ({el, r: el.getBoundingClientRect()}));
  const name = (el) => `${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''} `
    + `"${(el.innerText || el.value || el.getAttribute('aria-label') || '').trim().slice(0, 40)}"`;
  const small = (t) => t.r.width < 24 || t.r.height < 24;
  const centre = (r) => [r.left + r.width / 2, r.top + r.height / 2];
  const bad = [];
  for (const t of targets) {
    if (!small(t) || inSentence(t.el)) continue;
    const [x, y] = centre(t.r);
    const clash = targets.find((o) => {
      if (o === t || o.el.contains(t.el) || t.el.contains(o.el)) return false;
      const dx = Math.max(o.r.left - x, 0, x - o.r.right), dy = Math.max(o.r.top - y, 0, y - o.r.bottom);
      if (Math.hypot(dx, dy) < 12) return true;  // the circle meets the other target
      const [ox, oy] = centre(o.r);
      return small(o) && !inSentence(o.el) && Math.hypot(x - ox, y - oy) < 24;  // or its circle
    });
    const size = `${t.r.width.toFixed(1)}x${t.r.height.toFixed(1)}`;
    if (clash) bad.push(`${name(t.el)} is ${size} and too near ${name(clash.el)}`);
  }
  return {count: targets.length, bad};
}"""

# Run in the page: whether the document scrolls sideways, and every element that does which
# is not a labelled, focusable region holding a table.
SIDEWAYS_JS = """() => {
  const doc = document.documentElement;
  const strays = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.scrollWidth <= el.clientWidth + 1 || el.matches('textarea, input, select')) continue;
    const ox = getComputedStyle(el).overflowX;
    if (ox !== 'auto' && ox !== 'scroll') continue;
    const label = el.getAttribute('aria-labelledby');
    const ok = el.getAttribute('role') === 'region' && el.tabIndex === 0 && el.querySelector('table')
      && (el.getAttribute('aria-label') || (label && document.getElementById(label)));
    if (!ok) strays.push(el.outerHTML.slice(0, 120));
  }
  // For the message: the outermost elements reaching past the right edge.
  const wide = [...document.querySelectorAll('body *')]
    .filter((el) => el.getBoundingClientRect().right > doc.clientWidth + 1
      && !el.closest('.table-scroll td, .table-scroll th'))
    .slice(0, 12).map((el) => `${el.outerHTML.slice(0, 100)} (right ${Math.round(el.getBoundingClientRect().right)})`);
  return {scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth, strays, wide};
}"""

BACKGROUND_JS = "() => getComputedStyle(document.body).backgroundColor"

# Run in the page: resolves once the page has drawn a frame since the call. The page answers
# a new viewport or media in its rendering step, before that frame is painted: board.js's
# ResizeObserver makes a table's region a tab stop exactly while it scrolls. Read before that
# frame, a region that has just begun to scroll is not yet one, though no user ever sees it so.
# The second callback runs in the next frame, after the first frame's observers.
DRAWN_JS = "() => new Promise((drawn) => requestAnimationFrame(() => requestAnimationFrame(() => drawn())))"


def luminance(css_rgb: str) -> float:
    r, g, b = (int(float(v)) for v in css_rgb[css_rgb.index("(") + 1:css_rgb.index(")")].split(",")[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


@asynccontextmanager
async def board_of_ada(pg_admin_url):
    """A server for a module, on a database of its own with its sweeps off, and ada's todo
    with every kind of attempt (seeded["drawer"]); yields the server, ada and seeded."""
    name, url = create_database(pg_admin_url)
    settings = Settings(database_url=url, secret_key="e2e-secret-key-0123456789", reaper_interval_seconds=0,
                        retry_interval_seconds=0, retention_interval_seconds=0, doorbell_heartbeat_seconds=0)
    async with run_server(settings) as server:
        ada = await make_human(server.store, "ada")
        yield server, ada, {"drawer": await todo_with_every_outcome(server.store, ada)}
    drop_database(pg_admin_url, name)


@pytest.fixture(scope="module")
async def board(pg_admin_url, template_url):
    """One server and one Board for the module: ada's todos in every state (one with every
    kind of attempt, a dead letter, a held and an interrupted one), a paused queue."""
    async with board_of_ada(pg_admin_url) as (server, ada, seeded):
        store = server.store
        agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds", "docs", "deploys"))
        seeded["endpoint"] = agent.endpoint_id
        now = datetime.now(timezone.utc)
        seeded["pending"] = (await store.todo_add(agent, queue="builds", title="Update the release notes",
                                                  now=now - timedelta(minutes=3)))["id"]
        held = await store.todo_add(agent, queue="deploys", title="Deploy to staging")
        await store.todo_claim(agent, held["id"], claimant="harness/box/deployer/run-12", lease_seconds=3600)
        asked = await store.todo_add(agent, queue="builds", title="Needs a decision on the cache key")
        await store.todo_claim(agent, asked["id"], lease_seconds=3600)
        await store.todo_interrupt(agent, asked["id"])
        dead = await store.todo_add(agent, queue="docs", title="Proofread the guide", max_attempts=1)
        await store.todo_claim(agent, dead["id"])
        await store.todo_fail(agent, dead["id"], summary="the spell checker crashed on page 3")
        gone = await store.todo_add(agent, queue="docs", title="Old migration notes")
        await store.todo_cancel(agent, gone["id"])
        await store.queue_pause(ada, "docs")
        seeded["grant"] = (await credential(server, "oauth", user_id=ada.user_id, agent_id="chat-host",
                                            queues=("builds",), scope=("list_todos", "claim_next"))).endpoint_id
        server.seeded = seeded
        yield server


@pytest.fixture(scope="module")
async def signed_in(browser, board):
    """A browser context signed in as ada, shared by the module's pages (scheme: the system's)."""
    context = await browser.new_context(base_url=board.url, viewport=WIDE)
    page = await context.new_page()
    await sign_in(page, "ada")
    await page.close()
    yield context
    await context.close()


@pytest.fixture
async def page(signed_in):
    page = await signed_in.new_page()
    page.console_errors = []
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    yield page
    await page.close()


async def check_layout(page: Page, what: str, *, javascript: bool = True) -> None:
    """The page as drawn at its current viewport and media (the caller has just set them).
    Without JavaScript no script answers a resize, and no frame callback would ever run."""
    if javascript:
        await page.evaluate(DRAWN_JS)
    sideways = await page.evaluate(SIDEWAYS_JS)
    assert sideways["scrollWidth"] <= sideways["clientWidth"], f"{what} scrolls sideways: {sideways}"
    assert not sideways["strays"], f"{what}: something other than a table region scrolls sideways: {sideways}"
    targets = await page.evaluate(TARGETS_JS)
    assert targets["count"] > 0
    assert not targets["bad"], f"{what}: targets under 24x24 CSS px without the spacing:\n" + "\n".join(targets["bad"])


async def check_everywhere(page: Page, what: str, shot: str | None = None) -> None:
    """The page at 320 and 1280 px, light and dark (the system's scheme), then in forced
    colours and with reduced motion."""
    # axe in light at 320 px and in dark at 1280 px (the other e2e tests run it at 1280 px
    # light); the layout and target checks in all four.
    for viewport, scheme, axe in ((NARROW, "light", True), (NARROW, "dark", False), (WIDE, "light", False),
                                  (WIDE, "dark", True)):
        await page.set_viewport_size(viewport)
        await page.emulate_media(color_scheme=scheme)
        label = f"{what} at {viewport['width']} px, {scheme}"
        background = luminance(await page.evaluate(BACKGROUND_JS))
        assert (background < 0.2) if scheme == "dark" else (background > 0.9), f"{label}: background {background}"
        await check_layout(page, label)
        if axe:
            await assert_accessible(page, label)
        if shot and (viewport is NARROW) != (scheme == "dark"):  # 320 px light, 1280 px dark
            SHOTS.mkdir(parents=True, exist_ok=True)
            # The whole page; the drawer as the viewport shows it (it is fixed there).
            await page.screenshot(path=str(SHOTS / f"{shot}-{viewport['width']}-{scheme}.png"),
                                  full_page=shot != "drawer")
    await page.emulate_media(color_scheme="light", forced_colors="active")
    await check_layout(page, f"{what} in forced colours")
    await check_focus_drawn_in_forced_colours(page, what)
    await page.emulate_media(forced_colors="none", reduced_motion="reduce")
    await check_no_motion(page, what)
    await page.emulate_media(reduced_motion="no-preference")
    no_csp_errors(page)


async def check_focus_drawn_in_forced_colours(page: Page, what: str) -> None:
    """The first control of the page (or of the open drawer), focused by keyboard, is drawn
    with a solid outline of at least 2 px."""
    first = page.locator("dialog:modal a[href], dialog:modal button").first
    if not await first.count():
        first = page.locator("main a[href], main button, main input:not([type=hidden])").first
    await first.focus()
    await page.keyboard.press("Shift+Tab")
    await page.keyboard.press("Tab")
    outline = await page.evaluate("""() => { const s = getComputedStyle(document.activeElement);
        return [s.outlineStyle, parseFloat(s.outlineWidth), document.activeElement.matches(':focus-visible')]; }""")
    assert outline[0] == "solid" and outline[1] >= 2 and outline[2], f"{what}: focus in forced colours: {outline}"


async def check_no_motion(page: Page, what: str) -> None:
    """Under reduced motion nothing moves, even what a later change might add: an animation,
    a transition and smooth scrolling set on the page (through the CSSOM, which the CSP
    allows) are all overridden. Without the preference the same ones would run."""
    motion = await page.evaluate("""async () => {
      const el = document.querySelector('main a[href], main button') || document.body;
      document.documentElement.style.scrollBehavior = 'smooth';
      el.style.transition = 'opacity 3s';
      el.style.animation = 'none-such 3s infinite';
      const s = getComputedStyle(el);
      const out = {transition: s.transitionDuration, animation: s.animationName,
                   running: document.getAnimations().length,
                   scroll: getComputedStyle(document.documentElement).scrollBehavior};
      document.documentElement.style.scrollBehavior = ''; el.style.transition = ''; el.style.animation = '';
      return out; }""")
    assert motion == {"transition": "0s", "animation": "none", "running": 0, "scroll": "auto"}, f"{what}: {motion}"


# -- every page -------------------------------------------------------------------------------

async def test_the_sign_in_page_reflows_and_passes_axe_in_every_mode(browser, board):
    context = await browser.new_context(base_url=board.url, viewport=WIDE)
    page = await context.new_page()
    page.console_errors = []
    await page.goto("/login")
    await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    await check_everywhere(page, "the sign-in page")
    await context.close()


async def test_the_board_with_its_overview_reflows_and_passes_axe_in_every_mode(page: Page, board):
    await page.goto("/")
    await expect(page.get_by_role("row", name="Proofread the guide")).to_contain_text("dead letter")
    await expect(page.locator("#live-status")).to_have_attribute("data-state", "on")
    await check_everywhere(page, "the Board", shot="board")
    for width in (640, 1024):  # 1280 px at 200%, and a small laptop
        await page.set_viewport_size({"width": width, "height": 800})
        await check_layout(page, f"the Board at {width} px")
    # The list's region is a tab stop only while it scrolls: not at 1280 px, where it fits.
    todos = page.get_by_role("region", name="Todos")
    await page.set_viewport_size(WIDE)
    await expect(todos).not_to_have_attribute("tabindex", "0")
    # At 320 px the filters and the overview fold away; opened, each is one column, and each
    # todo is a card: nothing scrolls sideways, the list's region is no tab stop, and every
    # figure is labelled.
    await page.set_viewport_size(NARROW)
    for fold in ("Queues", "Search and sort"):
        await page.get_by_role("button", name=fold, exact=True).click()
    lefts = await page.locator("form.filters > *").evaluate_all(
        "els => els.map(e => Math.round(e.getBoundingClientRect().left))")
    assert len(set(lefts)) == 1, f"the filters are not one column: {lefts}"
    cards = page.get_by_role("region", name="Queues").get_by_role("row")
    widths = await cards.evaluate_all(
        "rows => rows.filter(r => r.closest('tbody')).map(r => r.getBoundingClientRect().right)")
    assert widths and max(widths) <= NARROW["width"], widths
    ready = page.get_by_role("region", name="Queues").locator("td[data-label=Ready]").first
    assert await ready.evaluate("td => getComputedStyle(td, '::before').content") == '"Ready" / ""'  # its label
    await expect(todos).not_to_have_attribute("tabindex", "0")
    rights = await page.locator("#todo-rows > tr").evaluate_all("rows => rows.map(r => r.getBoundingClientRect().right)")
    assert rights and max(rights) <= NARROW["width"], rights
    state = page.locator("#todo-rows td[data-label=State]").first
    assert await state.evaluate("td => getComputedStyle(td, '::before').content") == '"State: " / ""'


async def test_at_1280_by_900_at_least_18_rows_of_the_list_fit_one_screen(page: Page, board):
    await page.set_viewport_size({"width": 1280, "height": 900})
    await page.goto("/")
    heights = await page.locator("#todo-rows > tr").evaluate_all("rows => rows.map(r => r.getBoundingClientRect().height)")
    assert heights and 900 / (sum(heights) / len(heights)) >= 18, heights


async def test_a_search_result_reflows_and_passes_axe_in_every_mode(page: Page, board):
    await page.goto("/?title=the&state=pending")
    await expect(page.get_by_role("heading", name="Search results")).to_be_focused()
    await expect(page.locator("table.todos tbody tr")).to_have_count(1)
    await check_everywhere(page, "a search result")


async def test_the_drawer_reflows_and_passes_axe_in_every_mode(page: Page, board):
    await page.goto(f"/todos/{board.seeded['drawer']}")
    dialog = page.get_by_role("dialog", name="Fix the flaky build")
    await expect(dialog.get_by_role("heading", name="Fix the flaky build")).to_be_focused()
    await check_everywhere(page, "the drawer", shot="drawer")
    await page.set_viewport_size(NARROW)
    box = await dialog.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= NARROW["width"], box
    # Nothing in the drawer is cut or scrolls sideways: not the dialog, not its Close link.
    fit = await dialog.evaluate("""d => [d.scrollWidth - d.clientWidth,
        ...[...d.querySelectorAll('.close-link, h2, h4, pre, dd')].map(e => e.scrollWidth - e.clientWidth)]""")
    assert max(fit) <= 0, fit
    close = dialog.get_by_role("link", name="Close the todo details")
    close_box = await close.bounding_box()
    assert close_box["x"] + close_box["width"] <= box["x"] + box["width"], (close_box, box)
    terms = await dialog.locator("#drawer-details dl > div").first.evaluate(
        "d => [d.children[0].getBoundingClientRect().left, d.children[1].getBoundingClientRect().left]")
    assert terms[0] == terms[1], f"a field's name and value side by side at 320 px: {terms}"


async def test_the_vend_wizard_and_the_revoke_page_reflow_and_pass_axe_in_every_mode(page: Page, board):
    await page.goto("/endpoints")
    await expect(page.get_by_role("heading", name="Vend an endpoint")).to_be_visible()
    await check_everywhere(page, "the vend wizard")
    await page.goto(f"/endpoints/{board.seeded['endpoint']}/revoke")
    await expect(page.get_by_role("heading", name="Revoke endpoint w1?")).to_be_visible()
    await check_everywhere(page, "the revoke confirmation")


async def test_the_bulk_confirmation_reflows_and_passes_axe_in_every_mode(page: Page, board):
    await page.goto("/?dead_letter=1")
    await page.get_by_label("Select Proofread the guide").check()
    await page.get_by_role("button", name="Retry selected…").click()
    await expect(page.get_by_role("heading", name="Retry 1 todo?")).to_be_focused()
    await check_everywhere(page, "the bulk confirmation")


async def test_the_add_form_and_the_cancel_confirmation_reflow_and_pass_axe_in_every_mode(page: Page, board):
    await page.goto("/todos/new")
    await expect(page.get_by_role("heading", name="Add a todo")).to_be_visible()
    await page.get_by_role("button", name="Add todo").click()  # empty: every error shown
    await expect(page.get_by_role("alert")).to_contain_text("The todo was not added")
    border = await page.get_by_label("Title", exact=True).evaluate(
        "e => [getComputedStyle(e).borderTopWidth, getComputedStyle(e).borderTopColor, e.getAttribute('aria-invalid')]")
    error_ink = await page.locator("#add-title-error").evaluate("e => getComputedStyle(e).color")
    assert border == ["2px", error_ink, "true"], (border, error_ink)  # marked in the error colour, not only by text
    await check_everywhere(page, "the add form with its errors")
    await page.goto(f"/todos/{board.seeded['pending']}/confirm-cancel")
    await expect(page.get_by_role("heading", name="Cancel todo Update the release notes?")).to_be_visible()
    await check_everywhere(page, "the cancel confirmation")


async def test_the_not_found_and_error_pages_reflow_and_pass_axe_in_every_mode(page: Page, board):
    response = await page.goto("/todos/00000000-0000-4000-8000-000000000000")
    assert response.status == 404
    await check_everywhere(page, "the not-found page")
    response = await page.goto("/?sort=sideways")
    assert response.status == 400
    await expect(page.get_by_role("heading", name="That did not work")).to_be_visible()
    await check_everywhere(page, "the error page")


# -- forced colours ------------------------------------------------------------------------

async def test_in_forced_colours_states_dead_letters_died_attempts_and_selection_keep_a_drawn_cue(page: Page, board):
    await page.emulate_media(forced_colors="active")
    await page.goto("/")
    await live_on(page)  # the live snapshot has patched the rows: the cell measured stays in the page
    dead = page.get_by_role("row", name="Proofread the guide")
    await expect(dead).to_contain_text("dead letter")
    cell = dead.locator("> *").first
    style = await cell.evaluate("""c => { const s = getComputedStyle(c), r = getComputedStyle(c.parentElement);
        return {edge: parseFloat(s.borderLeftWidth), style: s.borderLeftStyle, tint: r.backgroundColor,
                canvas: getComputedStyle(document.body).backgroundColor}; }""")
    assert style["edge"] >= 4 and style["style"] != "none", style  # the dead letter's edge is drawn
    assert style["tint"] in ("rgba(0, 0, 0, 0)", style["canvas"]), style  # forced colours dropped the tint
    for state in await page.locator("table.todos .state, table.todos .badge").all():
        width = await state.evaluate("b => parseFloat(getComputedStyle(b).borderTopWidth)")
        assert width >= 1, await state.inner_text()
    plain = page.get_by_role("row", name="Update the release notes")
    await plain.get_by_role("checkbox").check()
    edge = await plain.locator("> *").nth(1).evaluate(
        "c => [parseFloat(getComputedStyle(c).borderTopWidth), getComputedStyle(c).borderTopStyle]")
    assert edge[0] >= 2 and edge[1] == "solid", f"a selected row is not drawn: {edge}"
    await page.set_viewport_size(NARROW)
    await page.screenshot(path=str(SHOTS / "board-320-forced-colours.png"), full_page=True)

    await page.goto(f"/todos/{board.seeded['drawer']}")
    dialog = page.get_by_role("dialog", name="Fix the flaky build")
    await expect(dialog.locator(".died-marker")).to_have_count(2)
    for died in await dialog.locator(".attempt-died").all():
        assert await died.evaluate("a => parseFloat(getComputedStyle(a).borderLeftWidth)") >= 6
        marker = died.locator(".died-marker")
        await expect(marker).to_contain_text("Died: no report")
        assert await marker.evaluate("m => parseFloat(getComputedStyle(m).borderTopWidth)") >= 2
    plain = dialog.locator(".attempt:not(.attempt-died)").first
    assert await plain.evaluate("a => parseFloat(getComputedStyle(a).borderLeftWidth)") < 6


# -- focus not obscured --------------------------------------------------------------------

FOCUS_SEEN_JS = """() => {
  const el = document.activeElement, r = el.getBoundingClientRect();
  const x = Math.min(Math.max(r.left + r.width / 2, 0), innerWidth - 1);
  const y = Math.min(Math.max(r.top + Math.min(r.height / 2, 12), 0), innerHeight - 1);
  const top = document.elementFromPoint(x, y);  // what a pointer there would hit: the element, or what covers it
  const seen = !!top && (el === top || el.contains(top) || (top.contains(el) && top.tagName === 'LABEL'));
  return {name: `${el.tagName} ${(el.innerText || el.id).slice(0, 40)}`, seen};
}"""


UNDER_THE_HEAD_JS = """(el) => {
  const d = el.closest('dialog'), head = d.querySelector('#drawer-head');
  d.scrollTop = 0;
  const r = el.getBoundingClientRect(), bottom = head.getBoundingClientRect().bottom;
  d.scrollTop += r.bottom - bottom + 2;  // its bottom edge 2 px above the head's
  el.focus();
  return (""" + FOCUS_SEEN_JS + """)();
}"""


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 520}, {"width": 320, "height": 225}],
                         ids=["1280x520", "1280-at-400-percent"])
async def test_tabbing_through_the_drawer_never_hides_the_focus_under_its_sticky_head(page: Page, board, viewport):
    await page.set_viewport_size(viewport)
    await page.goto("/")
    await page.get_by_role("link", name="Fix the flaky build").click()
    dialog = page.get_by_role("dialog", name="Fix the flaky build")
    await expect(dialog.get_by_role("heading", name="Fix the flaky build")).to_be_focused()
    padding, head = await dialog.evaluate("""d => [parseFloat(d.style.getPropertyValue('--drawer-head')),
                                                   d.querySelector('#drawer-head').getBoundingClientRect().height]""")
    assert padding == head, "board.js did not measure the drawer's head"
    seen = []
    for _ in range(12):  # once round the dialog: the close link, then the attempts' links
        await page.keyboard.press("Tab")
        where = await page.evaluate(FOCUS_SEEN_JS)
        seen.append(where["name"])
        assert where["seen"], f"focus on {where['name']} is hidden at {viewport}"
    for _ in range(12):  # and back up, towards the sticky head
        await page.keyboard.press("Shift+Tab")
        where = await page.evaluate(FOCUS_SEEN_JS)
        assert where["seen"], f"focus on {where['name']} is hidden going back at {viewport}"
    assert {"A https://example.com/report/7", "A https://ci.example.com/runs/1"} <= set(seen), seen
    # The hard case: a link scrolled to lie under the head when it gets focus. The browser
    # scrolls only what it thinks out of view; the scroll padding tells it the head's band is.
    for link in await dialog.locator("#attempts-list a[href]").all():
        where = await link.evaluate(UNDER_THE_HEAD_JS)
        assert where["seen"], f"focus on {where['name']} stayed under the drawer's head at {viewport}"


# -- the scheme toggle ---------------------------------------------------------------------

async def test_the_scheme_toggle_works_by_keyboard_and_a_reload_keeps_it(browser, board):
    context = await browser.new_context(base_url=board.url, viewport=WIDE, color_scheme="light")
    page = await context.new_page()
    await sign_in(page, "ada")
    group = page.get_by_role("group", name="Colours")
    await expect(group.get_by_role("button", name="System")).to_have_attribute("aria-pressed", "true")
    await page.get_by_label("Title contains").fill("kept while switching")
    dark = group.get_by_role("button", name="Dark")
    await tab_to(page, dark)
    await page.keyboard.press("Enter")
    await expect(page.locator("html")).to_have_attribute("data-scheme", "dark")
    await expect(dark).to_have_attribute("aria-pressed", "true")
    await expect(dark).to_be_focused()
    await expect(page.get_by_label("Title contains")).to_have_value("kept while switching")  # no reload
    assert luminance(await page.evaluate(BACKGROUND_JS)) < 0.2

    await page.reload()
    await expect(page.locator("html")).to_have_attribute("data-scheme", "dark")
    assert 'data-scheme="dark"' in await (await page.request.get("/")).text()  # drawn dark from the first byte
    assert await page.evaluate("getComputedStyle(document.documentElement).colorScheme") == "dark"
    await assert_accessible(page, "the Board chosen dark in a light system")
    await page.goto("/")  # the README's picture: the overview and the list, nothing typed or focused
    await page.set_viewport_size({"width": 1280, "height": 1400})
    await expect(page.locator("#live-status")).to_have_attribute("data-state", "on")
    await save_picture(page, "board-dark.png")
    await page.get_by_role("group", name="Colours").get_by_role("button", name="System").press("Enter")
    await expect(page.locator("html")).not_to_have_attribute("data-scheme", "dark")
    assert luminance(await page.evaluate(BACKGROUND_JS)) > 0.9  # the system's light again
    await page.get_by_role("group", name="Colours").get_by_role("button", name="Light").press("Enter")
    await expect(page.locator("html")).to_have_attribute("data-scheme", "light")
    await page.emulate_media(color_scheme="dark")
    assert luminance(await page.evaluate(BACKGROUND_JS)) > 0.9  # chosen light beats a dark system
    await context.close()


async def test_the_scheme_toggle_works_without_javascript_and_returns_to_the_page(browser, board):
    context = await browser.new_context(base_url=board.url, viewport=NARROW, java_script_enabled=False,
                                        color_scheme="light")
    page = await context.new_page()
    await page.goto("/login?next=/endpoints")
    dark = page.get_by_role("group", name="Colours").get_by_role("button", name="Dark")
    await tab_to(page, dark)
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(re.compile(r"/login\?next=(/|%2F)endpoints#scheme-dark$"))
    await expect(page.locator("html")).to_have_attribute("data-scheme", "dark")
    await expect(page.get_by_role("group", name="Colours").get_by_role("button", name="Dark")).to_have_attribute(
        "aria-pressed", "true")
    assert luminance(await page.evaluate(BACKGROUND_JS)) < 0.2
    await page.get_by_label("Username").fill("ada")
    await page.get_by_label("Password").fill("correct horse battery")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Endpoints", level=1)).to_be_visible()
    await expect(page.locator("html")).to_have_attribute("data-scheme", "dark")  # the cookie outlives the sign-in
    # Without JavaScript the drawer page draws the drawer first, in the page's flow: over the
    # list it would hide whatever a Tab moved to there.
    await page.goto(f"/todos/{board.seeded['drawer']}")
    dialog, board_heading = page.locator("dialog#drawer"), page.get_by_role("heading", name="Board", level=1)
    assert await dialog.evaluate("d => d.open && getComputedStyle(d).position") == "static"
    assert (await dialog.bounding_box())["y"] < (await board_heading.bounding_box())["y"]
    await check_layout(page, "the drawer page without JavaScript at 320 px", javascript=False)
    await context.close()


async def test_the_consent_screen_connected_agents_and_disconnect_reflow_and_pass_axe_in_every_mode(
        page: Page, board):
    async with httpx.AsyncClient(base_url=board.url) as c:
        client_id = await public_client(c, name="Chat Host")
        consent = (await c.get("/oauth/authorize", params=authorize_params(client_id, pkce()))).headers["location"]
    await page.goto(consent)
    await expect(page.get_by_role("heading", name="Connect Chat Host to Switchboard?")).to_be_visible()
    await check_everywhere(page, "the consent screen")
    await page.get_by_label("Agent id").fill("")
    await page.locator("form[action='/consent']").evaluate("f => { f.noValidate = true; }")  # past the browser's own check
    await page.get_by_role("button", name="Allow Chat Host").click()  # no queue, no agent id: both errors
    await expect(page.get_by_role("alert")).to_contain_text("Fix these 2 problems")
    await check_everywhere(page, "the consent screen with its errors")
    await page.goto("/endpoints")
    await expect(page.get_by_role("heading", name="Connected agents")).to_be_visible()
    await check_everywhere(page, "connected agents")
    await page.goto(f"/endpoints/{board.seeded['grant']}/revoke")
    await expect(page.get_by_role("heading", name="Disconnect Test Host?")).to_be_visible()
    await check_everywhere(page, "the disconnect confirmation")
