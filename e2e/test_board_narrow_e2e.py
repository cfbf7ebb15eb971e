"""The Board on narrow and wide screens, in Chromium at 320, 390 and 1280 CSS px, light and
dark: the list's caption spans the list; at 320 px the first todo is within two screens, the
overview and the search folded away behind disclosures that work by keyboard; the Agents and
Endpoints tables become cards below 40 rem (their table semantics kept) rather than scrolling
sideways; at 1280 px a title uses the width it has; axe finds nothing in either scheme at each
width. And a todo waiting for a person says so, in the same words, on its list row, in its
drawer and on the Agents page, never "lapsed"."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
from playwright.async_api import Page, expect

from e2e.conftest import ARTIFACTS, assert_accessible, sign_in
from e2e.test_board_e2e import tab_to
# page and signed_in are fixtures; they take this module's board.
from e2e.test_board_everywhere_e2e import NARROW, WIDE, board_of_ada, page, signed_in  # noqa: F401
from e2e.test_board_screen_reader_e2e import screen_reader_script, spoken
from tests.acceptance.mcp_helpers import credential
from tests.conftest import make_agent

WIDTHS = {320: NARROW, 390: {"width": 390, "height": 844}, 1280: WIDE}
SHOTS = ARTIFACTS / "narrow"
LONG_TITLE = "Rebuild the search index for the docs site"
QUESTION = "Deploy build 418 to production now?"
ASKED_MINUTES_BEFORE_SETUP = 3
EXPIRES_IN_MINUTES = 30


def minutes_since_asked(board) -> tuple[int, int]:
    """The minutes the page may say since the question (asked three minutes before the
    module's setup): a slow run reads it minutes later, and a minute may turn mid-check."""
    elapsed = int((datetime.now(timezone.utc) - board.seeded["asked_at"]).total_seconds() // 60)
    return elapsed, elapsed + 1


def waiting(board) -> re.Pattern:
    said = "|".join(f"{m} min ago, expires in {EXPIRES_IN_MINUTES - m}" for m in minutes_since_asked(board))
    return re.compile(rf"waiting for a person, asked ({said}) min")

SIDEWAYS_JS = """() => {
  const doc = document.documentElement;
  const scrolling = [...document.querySelectorAll('body *')]
    .filter((el) => el.scrollWidth > el.clientWidth + 1 && !el.matches('textarea, input, select')
      && ['auto', 'scroll'].includes(getComputedStyle(el).overflowX))
    .map((el) => el.outerHTML.slice(0, 100));
  return {scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth, scrolling};
}"""


@pytest.fixture(scope="module")
async def board(pg_admin_url, template_url):
    """One server for the module: ada's todos (one with every kind of attempt, one with a long
    title, one waiting for her answer while its lease ended long ago), two agents and an
    OAuth grant."""
    async with board_of_ada(pg_admin_url) as (server, ada, seeded):
        store = server.store
        agent = await make_agent(store, user=ada, agent_id="deployer", queues=("builds", "deploys"))
        seeded["agent"] = agent.endpoint_id
        now = datetime.now(timezone.utc)
        for title in ("Update the release notes", LONG_TITLE):
            await store.todo_add(agent, queue="builds", title=title)
        asked = await store.todo_add(agent, queue="deploys", title="Ship build 418", now=now - timedelta(minutes=20))
        await store.todo_claim(agent, asked["id"], claimant="deployer/run-3", lease_seconds=60,
                               now=now - timedelta(minutes=10))
        await store.todo_interrupt(agent, asked["id"], question=QUESTION, choices=["deploy now", "wait"],
                                   expires_in_seconds=EXPIRES_IN_MINUTES * 60,
                                   now=now - timedelta(minutes=ASKED_MINUTES_BEFORE_SETUP))
        seeded["asked"] = asked["id"]
        seeded["asked_at"] = now - timedelta(minutes=ASKED_MINUTES_BEFORE_SETUP)
        await credential(server, "oauth", user_id=ada.user_id, agent_id="chat-host", queues=("builds",),
                         scope=("list_todos", "claim_next"))
        server.seeded = seeded
        yield server


async def at(page: Page, width: int, scheme: str = "light") -> None:
    await page.set_viewport_size(WIDTHS[width])
    await page.emulate_media(color_scheme=scheme)
    await page.evaluate("() => new Promise((drawn) => requestAnimationFrame(() => requestAnimationFrame(drawn)))")


async def no_sideways_scroll(page: Page, what: str) -> None:
    sideways = await page.evaluate(SIDEWAYS_JS)
    assert sideways["scrollWidth"] <= sideways["clientWidth"], f"{what} scrolls sideways: {sideways}"
    assert not sideways["scrolling"], f"{what}: something scrolls sideways inside the page: {sideways}"


async def shoot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.mark.parametrize("width", [390, 320])
async def test_the_list_caption_spans_the_list_on_a_narrow_screen(page: Page, width):
    await page.goto("/")
    await at(page, width)
    await shoot(page, f"board-{width}")
    caption = await page.locator("table.todos caption").bounding_box()
    region = await page.locator("#todo-list").bounding_box()
    assert caption["width"] >= region["width"] - 2, f"the caption is squeezed: {caption} in {region}"
    assert caption["height"] < 100, f"the caption takes {caption['height']} px of height"


async def test_at_320_px_the_first_todo_is_within_two_screens_and_the_folds_work_by_keyboard(page: Page):
    await page.goto("/")
    await at(page, 320)
    await shoot(page, "board-320-folded")
    first = await page.locator("#todo-rows tr").first.bounding_box()
    top = first["y"] + await page.evaluate("scrollY")
    assert top <= 2 * WIDTHS[320]["height"], f"the first todo starts {top} px down, past two screens"
    title = await page.locator("#todo-rows tr").first.get_by_role("link").bounding_box()  # its card leads with it
    assert title and title["width"] > 100 and title["y"] - first["y"] < 40, f"the first card's title: {title}"
    # Folded, the overview's table and the search's fields are out of the tab order; a
    # disclosure opens each by keyboard, and says so.
    folds = (("Queues", page.locator(".overview-table")), ("Search and sort", page.get_by_label("Title contains")))
    for name, inside in folds:
        toggle = page.get_by_role("button", name=name, exact=True)
        await expect(toggle).to_have_attribute("aria-expanded", "false")
        await expect(inside).to_be_hidden()
        await tab_to(page, toggle)
        await page.keyboard.press("Enter")
        await expect(inside).to_be_visible()
        await expect(toggle).to_have_attribute("aria-expanded", "true")
        await page.keyboard.press("Space")
        await expect(inside).to_be_hidden()
        await expect(toggle).to_have_attribute("aria-expanded", "false")
    # The skip link to the search still lands in it.
    await page.keyboard.press("Control+Home")
    await tab_to(page, page.get_by_role("link", name="Skip to search"), key="Tab")
    await page.keyboard.press("Enter")
    await expect(page.get_by_label("Title contains")).to_be_focused()
    # A search made is shown open, so its fields are there to change.
    await page.goto("/?title=release")
    await at(page, 320)
    await expect(page.get_by_label("Title contains")).to_be_visible()
    await expect(page.get_by_label("Title contains")).to_have_value("release")
    await expect(page.get_by_role("button", name="Search and sort")).to_have_attribute("aria-expanded", "true")
    # On a wide screen nothing is folded.
    await page.goto("/")
    await at(page, 1280)
    await expect(page.locator(".overview-table")).to_be_visible()
    await expect(page.get_by_label("Title contains")).to_be_visible()
    await expect(page.locator(".fold-toggle").first).to_be_hidden()


@pytest.mark.parametrize("path, caption", [("/agents", "Your agents"), ("/endpoints", "Endpoints you own")])
@pytest.mark.parametrize("width", [390, 320])
async def test_the_agents_and_endpoints_tables_are_cards_on_a_narrow_screen(page: Page, path, caption, width):
    await page.goto(path)
    await at(page, width)
    await shoot(page, f"{path.strip('/')}-{width}")
    await no_sideways_scroll(page, f"{path} at {width} px")
    table = page.get_by_role("table", name=re.compile(caption))
    # Still a table to a screen reader: rows of cells under column headers.
    await expect(table.get_by_role("columnheader").first).to_be_attached()
    row = table.get_by_role("row").nth(1)
    await expect(row.get_by_role("cell").first).to_be_attached()
    assert await row.evaluate("r => getComputedStyle(r).display") != "table-row"
    # Each figure labelled with its column, as the list's cards are.
    label = await row.locator("td").first.evaluate("td => getComputedStyle(td, '::before').content")
    assert label not in ("none", "normal", ""), label


async def test_at_1280_px_a_title_uses_the_width_it_has(page: Page):
    """A title longer than 13 rem is cut only when the other columns leave it no more room:
    then the table fills its region exactly, and the title has all the rest."""
    await page.goto("/")
    await at(page, 1280)
    await shoot(page, "board-1280")
    cell = page.locator("#todo-rows th[scope=row]", has_text=LONG_TITLE)
    title = await cell.evaluate("c => ({cut: c.scrollWidth > c.clientWidth, width: c.getBoundingClientRect().width,"
                                " wants: c.scrollWidth})")
    table, room = await page.locator("table.todos").evaluate(
        "t => [t.getBoundingClientRect().width, t.parentElement.clientWidth]")
    assert title["width"] > 13 * 16 + 1, f"the title is held to {title['width']} px of the {room} px there is"
    if title["cut"]:
        assert abs(table - room) <= 1, f"the title is cut to {title['width']} px with the table {table} px of {room}"
    # Given the room (the waiting todo's long words gone by a narrower search), it shows whole.
    await page.goto("/?queue=builds")
    await at(page, 1280)
    assert not await cell.evaluate("c => c.scrollWidth > c.clientWidth"), "the title is cut though there is room"


@pytest.mark.parametrize("path", ["/", "/agents", "/endpoints", "/schedules", "drawer"])
async def test_every_width_and_scheme_passes_axe(page: Page, board, path):
    for width in (320, 390, 1280):
        for scheme in ("light", "dark"):
            await page.goto(f"/todos/{board.seeded['drawer']}" if path == "drawer" else path)
            await at(page, width, scheme)
            await no_sideways_scroll(page, f"{path} at {width} px, {scheme}")
            await assert_accessible(page, f"{path} at {width} px, {scheme}")


# -- a todo waiting for a person ----------------------------------------------------------------

async def test_a_todo_waiting_for_an_answer_says_so_on_its_row_its_drawer_and_the_agents_page(page: Page, board):
    """Its lease ended 9 minutes ago, but an unanswered question is never reaped: the holder
    is waiting for the person, not gone."""
    asked = board.seeded["asked"]
    await page.goto("/")
    places = [page.locator(f"#todo-{asked}")]
    await expect(places[0]).to_contain_text(waiting(board))
    await page.goto(f"/todos/{asked}")
    places.append(page.locator("#drawer-details"))
    await expect(places[1]).to_contain_text(waiting(board))
    await page.goto("/agents")
    places.append(page.locator(f"#agent-{board.seeded['agent']}"))
    await expect(places[2]).to_contain_text(waiting(board))
    await expect(places[2]).to_contain_text("1 waiting for a person")
    await expect(places[2]).not_to_contain_text("lapsed")


async def test_a_screen_reader_hears_whom_the_todo_waits_for_in_its_drawer(browser, board):
    """Read line by line, the drawer's current attempt says it waits for a person, asked and
    expiring when, each time in words with its exact time."""
    context = await browser.new_context(base_url=board.url, viewport=WIDTHS[1280], bypass_csp=True)
    await context.add_init_script(screen_reader_script())
    page = await context.new_page()
    try:
        await sign_in(page, "ada")
        await page.goto(f"/todos/{board.seeded['asked']}")
        current = page.locator("#drawer-details .current-attempt")
        await expect(current).to_contain_text(waiting(board))
        await current.evaluate("async (el) => { await window.__vsr.virtual.start({container: el}); }")
        for _ in range(12):
            await page.evaluate("async () => await window.__vsr.virtual.next()")
        heard = " | ".join(await spoken(page))
        assert "lapsed" not in heard, heard
        exact = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
        said = "|".join(f"{m} min ago.*{exact}.*expires.*in {EXPIRES_IN_MINUTES - m} min"
                        for m in minutes_since_asked(board))
        assert re.search(rf"waiting for a person.*asked.*({said}).*{exact}", heard), heard
    finally:
        await context.close()
