"""The colour scheme toggle over HTTP: a CSRF-checked post that sets a long-lived cookie and
returns to the page (a local one only), and every page drawn in the chosen scheme from its
first byte (<html data-scheme>, <meta name="color-scheme">), signed in or not."""

from __future__ import annotations

import re

from board.web.context import SCHEME_COOKIE
from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in


def drawn_in(html: str) -> tuple[str | None, str]:
    """The page's chosen scheme (None: the system's) and its color-scheme meta."""
    chosen = re.search(r'<html lang="en"(?: data-scheme="(\w+)")?>', html)
    meta = re.search(r'<meta name="color-scheme" content="([^"]+)">', html)
    assert chosen and meta, "the page says nothing of its scheme"
    return chosen.group(1), meta.group(1)


async def test_choosing_dark_sets_a_lasting_cookie_and_every_page_is_drawn_dark(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        board = (await c.get("/")).text
        assert drawn_in(board) == (None, "light dark")  # the system's, by default
        assert 'aria-pressed="true">System</button>' in board
        r = await c.post("/scheme", data={"csrf_token": token, "scheme": "dark", "next": "/endpoints?x=1#top"})
        assert r.status_code == 303 and r.headers["location"] == "/endpoints?x=1#scheme-dark"
        cookie = r.headers["set-cookie"]
        assert cookie.startswith(f"{SCHEME_COOKIE}=dark;") and "HttpOnly" in cookie and "Path=/" in cookie
        assert int(re.search(r"Max-Age=(\d+)", cookie).group(1)) > 300 * 24 * 3600
        for path in ("/", "/endpoints", "/todos/new", "/todos/00000000-0000-4000-8000-000000000000", "/?sort=bad"):
            page = (await c.get(path)).text
            assert drawn_in(page) == ("dark", "dark"), path
            assert 'aria-pressed="true">Dark</button>' in page, path
        await c.post("/scheme", data={"csrf_token": token, "scheme": "system", "next": "/"})
        assert drawn_in((await c.get("/")).text) == (None, "light dark")


async def test_the_sign_in_page_has_the_toggle_and_it_returns_there(live_server):
    async with client_for(live_server) as c:
        page = (await c.get("/login?next=/endpoints")).text
        assert 'name="next" value="/login?next=/endpoints"' in page
        r = await c.post("/scheme", data={"csrf_token": csrf_of(page), "scheme": "light",
                                          "next": "/login?next=/endpoints"})
        assert r.status_code == 303 and r.headers["location"] == "/login?next=/endpoints#scheme-light"
        assert drawn_in((await c.get("/login")).text) == ("light", "light")


async def test_the_toggle_returns_to_a_local_page_only_and_refuses_an_unknown_scheme(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        for target in ("https://evil.example/", "//evil.example/", "javascript:alert(1)", ""):
            r = await c.post("/scheme", data={"csrf_token": token, "scheme": "dark", "next": target})
            assert r.status_code == 303 and r.headers["location"] == "/#scheme-dark", target
        r = await c.post("/scheme", data={"csrf_token": token, "scheme": "sepia", "next": "/"})
        assert r.status_code == 400 and "light, dark or system" in r.text
        c.cookies.set(SCHEME_COOKIE, "<sepia>")  # a cookie the server never set: the system's scheme
        assert drawn_in((await c.get("/")).text) == (None, "light dark")
