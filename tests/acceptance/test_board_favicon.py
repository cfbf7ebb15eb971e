"""The Board's icon: every page links one SVG file under /static, served as image/svg+xml with
the Board's security headers (its CSP allows images from 'self'), and /favicon.ico, which
some browsers and tools ask for without reading the page, leads to it."""

from __future__ import annotations

import re

from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.acceptance.test_board_headers import assert_strict_headers

ICON = "/static/favicon.svg"


def icon_links(html: str) -> list[str]:
    return re.findall(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', html)


async def test_board_pages_link_the_svg_icon_served_as_svg(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        assert icon_links((await c.get("/login")).text) == [ICON]
        await sign_in(c, "ada")
        assert icon_links((await c.get("/")).text) == [ICON]
        icon = await c.get(ICON)
        assert icon.status_code == 200
        assert icon.headers["content-type"].split(";")[0] == "image/svg+xml"
        assert icon.text.startswith("<svg ") and "<script" not in icon.text
        assert_strict_headers(icon, ICON)


async def test_favicon_ico_redirects_to_the_svg_icon(live_server):
    async with client_for(live_server) as c:
        r = await c.get("/favicon.ico")
        assert r.status_code == 301 and r.headers["location"] == ICON
        assert_strict_headers(r, "/favicon.ico")
        followed = await c.get("/favicon.ico", follow_redirects=True)
        assert followed.status_code == 200 and followed.headers["content-type"].startswith("image/svg+xml")
