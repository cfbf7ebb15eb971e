"""Every Board response, page or fragment, carries the strict CSP and its companions, and no
page has inline script or style (SPEC-0012; SPEC-0034 "Security Headers")."""

from __future__ import annotations

import re

from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.acceptance.test_board_live import open_stream
from tests.conftest import make_agent


def assert_strict_headers(r, what: str) -> None:
    csp = r.headers.get("content-security-policy", "")
    directives = {d.strip().split(" ")[0]: d.strip() for d in csp.split(";") if d.strip()}
    assert directives.get("default-src") == "default-src 'self'", what
    assert directives.get("frame-ancestors") == "frame-ancestors 'none'", what
    assert directives.get("script-src") == "script-src 'self'", what
    assert directives.get("style-src") == "style-src 'self'", what
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, what
    assert r.headers.get("x-content-type-options") == "nosniff", what
    assert r.headers.get("referrer-policy"), what


def assert_no_inline_code(html: str, what: str) -> None:
    assert not re.search(r"<script(?![^>]*\ssrc=)[^>]*>", html, re.I), f"inline script in {what}"
    assert not re.search(r"<style[\s>]", html, re.I), f"style element in {what}"
    assert not re.search(r"\sstyle=", html, re.I), f"style attribute in {what}"
    assert not re.search(r"\son[a-z]+\s*=", html, re.I), f"event handler attribute in {what}"
    assert not re.search(r"(src|href)=\"(https?:)?//", html, re.I), f"third-party resource in {what}"


async def test_every_board_route_carries_the_security_headers(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="t")
    async with client_for(live_server) as c:
        anonymous = {
            "GET /login": await c.get("/login"),
            "GET / (signed out)": await c.get("/"),
            "GET /events (signed out)": await c.get("/events"),
            "GET /static/board.js": await c.get("/static/board.js"),
            "GET /static/board.css": await c.get("/static/board.css"),
            "POST /login (no token)": await c.post("/login", data={}),
            "GET /metrics": await c.get("/metrics"),
        }
        token = await sign_in(c, "ada")
        signed_in = {
            "GET /": await c.get("/"),
            "GET /?dead_letter=1": await c.get("/?dead_letter=1&state=failed&queue=q"),
            "GET /todos/{id}": await c.get(f"/todos/{todo['id']}"),
            "GET /todos/{id}/drawer": await c.get(f"/todos/{todo['id']}/drawer"),
            "GET /todos/{random}": await c.get("/todos/00000000-0000-0000-0000-000000000000"),
            "GET /endpoints": await c.get("/endpoints"),
            "GET /endpoints/{id}/revoke": await c.get(f"/endpoints/{agent.endpoint_id}/revoke"),
            "GET /no/such/page": await c.get("/no/such/page"),
            "POST /todos/{id}/claim": await c.post(f"/todos/{todo['id']}/claim", data={"csrf_token": token}),
            "POST /todos/{id}/claim (no token)": await c.post(f"/todos/{todo['id']}/claim", data={}),
            "POST /endpoints (invalid)": await c.post("/endpoints", data={"csrf_token": token, "agent_id": "bad id!"}),
            "POST /endpoints": await c.post("/endpoints", data={"csrf_token": token, "agent_id": "w2",
                                                               "queues": "q", "verbs": ["claim_next"]}),
            "PUT / (not allowed)": await c.put("/", content=b""),
        }
        for what, r in {**anonymous, **signed_in}.items():
            assert_strict_headers(r, what)
            if r.headers.get("content-type", "").startswith("text/html"):
                assert_no_inline_code(r.text, what)
                assert r.headers.get("cache-control") == "no-store", what
        assert signed_in["GET /todos/{random}"].status_code == 404
        assert signed_in["POST /endpoints"].status_code == 201
        async with c.stream("GET", "/events") as r:
            assert_strict_headers(r, "GET /events")
        async with open_stream(c, f"?todo={todo['id']}") as stream:
            assert_strict_headers(stream.response, "GET /events?todo=")
            assert_no_inline_code(stream.snapshot["drawer"] + stream.snapshot["rows"], "the SSE snapshot")


async def test_templates_render_with_autoescape_on():
    from board.web.templating import ENV, render
    assert ENV.autoescape is True
    html = render("_flash.html", flash=("error", "<script>alert(1)</script>"))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
