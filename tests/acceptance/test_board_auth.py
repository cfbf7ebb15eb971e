"""Board sign-in over HTTP: the session cookie, its expiry and tampering, sign-out, the
failed sign-in throttle, the redirect check, and the CSRF token on every changing form."""

from __future__ import annotations

import re
import time

import httpx

from board.store.auth import hash_password
from board.store.store import Human
from board.web.auth import SESSION_COOKIE, SessionCodec, new_session
from tests.conftest import make_agent

PASSWORD = "correct horse battery"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


# -- helpers the other Board acceptance tests share ----------------------------------------

async def make_human(store, name: str, password: str = PASSWORD) -> Human:
    row = await store.user_insert(name, hash_password(password))
    return Human(row["id"], row["username"])


def csrf_of(html: str) -> str:
    m = _CSRF.search(html)
    assert m, "the page has no CSRF token"
    return m.group(1)


async def sign_in(client: httpx.AsyncClient, username: str, password: str = PASSWORD) -> str:
    """Signs the client in through the form; returns the session's CSRF token."""
    page = await client.get("/login")
    r = await client.post("/login", data={"username": username, "password": password,
                                          "csrf_token": csrf_of(page.text)})
    assert r.status_code == 303, r.text
    board = await client.get("/")
    assert board.status_code == 200
    return csrf_of(board.text)


def client_for(server) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=10)


# -- sign-in and the cookie ----------------------------------------------------------------

async def test_sign_in_sets_a_signed_httponly_lax_cookie_with_an_expiry(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        page = await c.get("/login")
        assert page.status_code == 200
        assert re.search(r'<label for="username">Username</label>', page.text)
        assert re.search(r'<label for="password">Password</label>', page.text)
        assert ">Sign in</button>" in page.text
        r = await c.post("/login", data={"username": "ada", "password": PASSWORD, "csrf_token": csrf_of(page.text)})
        assert r.status_code == 303 and r.headers["location"] == "/"
        cookie = r.headers["set-cookie"]
        assert cookie.startswith(f"{SESSION_COOKIE}=")
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie.replace("Lax", "lax")
        assert re.search(r"Max-Age=\d+", cookie) and "Path=/" in cookie
        assert "Secure" not in cookie  # plain http here
        assert (await c.get("/")).status_code == 200


async def test_cookie_is_secure_when_served_over_https(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        page = await c.get("/login")
        r = await c.post("/login", headers={"x-forwarded-proto": "https"},
                         data={"username": "ada", "password": PASSWORD, "csrf_token": csrf_of(page.text)})
        assert r.status_code == 303
        assert "Secure" in r.headers["set-cookie"]


async def test_wrong_password_is_refused_without_a_session(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        page = await c.get("/login")
        r = await c.post("/login", data={"username": "ada", "password": "nope", "csrf_token": csrf_of(page.text)})
        assert r.status_code == 401
        assert "do not match" in r.text and 'role="alert"' in r.text
        assert (await c.get("/")).status_code == 303


async def test_failed_sign_ins_are_throttled_even_for_the_right_password(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        token = csrf_of((await c.get("/login")).text)
        for _ in range(5):
            r = await c.post("/login", data={"username": "ada", "password": "wrong", "csrf_token": token})
            assert r.status_code == 401
        r = await c.post("/login", data={"username": "ada", "password": PASSWORD, "csrf_token": token})
        assert r.status_code == 429
        assert int(r.headers["retry-after"]) > 0
        assert "Too many failed sign-ins" in r.text
        assert (await c.get("/")).status_code == 303


async def test_every_page_but_sign_in_needs_the_session(live_server):
    async with client_for(live_server) as c:
        for path in ("/", "/endpoints", "/todos/abc", "/endpoints/abc/revoke"):
            r = await c.get(path)
            assert r.status_code == 303 and r.headers["location"].startswith("/login"), path
        assert (await c.get("/events")).status_code == 401
        assert (await c.get("/todos/abc/drawer")).status_code == 401
        assert (await c.get("/login")).status_code == 200


async def test_after_sign_in_the_human_returns_to_a_local_page_only(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        r = await c.get("/endpoints")
        assert r.headers["location"] == "/login?next=%2Fendpoints"
        for target, expected in (("/endpoints", "/endpoints"), ("//evil.example/x", "/"),
                                 ("https://evil.example/", "/"), ("/\\evil.example", "/")):
            c.cookies.clear()
            page = await c.get("/login")
            r = await c.post("/login", data={"username": "ada", "password": PASSWORD, "next": target,
                                             "csrf_token": csrf_of(page.text)})
            assert r.headers["location"] == expected, target


async def test_sign_out_ends_the_session(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        old_cookie = c.cookies[SESSION_COOKIE]
        r = await c.post("/logout", data={"csrf_token": token})
        assert r.status_code == 303 and r.headers["location"] == "/login"
        assert (await c.get("/")).status_code == 303
        assert "You have signed out." in (await c.get("/login")).text
        assert old_cookie != c.cookies[SESSION_COOKIE]


async def test_a_tampered_cookie_is_refused(live_server):
    human = await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        good = c.cookies[SESSION_COOKIE]
        payload, rest = good.split(".", 1)
        # Flip a character of the signature, then forge a different user id with a bad key.
        tampered = [good[:-2] + ("A" if good[-2] != "A" else "B") + good[-1],
                    SessionCodec("not-the-server-key").encode(new_session(human.user_id)),
                    "garbage", payload]
        for value in tampered:
            c.cookies.clear()
            c.cookies.set(SESSION_COOKIE, value)
            assert (await c.get("/")).status_code == 303, value
            assert (await c.get("/events")).status_code == 401


async def test_an_expired_cookie_is_refused(live_server):
    human = await make_human(live_server.store, "ada")
    codec = SessionCodec(live_server.settings.secret_key)
    long_ago = time.time() - codec.max_age - 60
    old = codec.encode(new_session(human.user_id, issued=long_ago), signed_at=long_ago)
    fresh = codec.encode(new_session(human.user_id))
    # Re-signed recently, but issued long ago: the expiry is absolute.
    resigned = codec.encode(new_session(human.user_id, issued=long_ago))
    async with client_for(live_server) as c:
        c.cookies.set(SESSION_COOKIE, fresh)
        assert (await c.get("/")).status_code == 200
        for value in (old, resigned):
            c.cookies.clear()
            c.cookies.set(SESSION_COOKIE, value)
            r = await c.get("/")
            assert r.status_code == 303 and r.headers["location"].startswith("/login")


# -- CSRF --------------------------------------------------------------------------------

async def test_changing_forms_without_the_csrf_token_are_rejected(live_server):
    store = live_server.store
    human = await make_human(store, "ada")
    agent = await make_agent(store, user=human, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="t")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        posts = [f"/todos/{todo['id']}/claim", f"/todos/{todo['id']}/cancel", "/endpoints",
                 f"/endpoints/{agent.endpoint_id}/revoke", "/logout", "/login", "/scheme"]
        for path in posts:
            for data in ({}, {"csrf_token": "forged"}, {"csrf_token": ""}):
                data = dict(data, agent_id="x", queues="q", verbs="claim", username="ada", password=PASSWORD,
                            scheme="dark")
                r = await c.post(path, data=data)
                assert r.status_code == 403, (path, data)
                assert "This form has expired" in r.text
        # From another site, even a right token is refused.
        r = await c.post(f"/todos/{todo['id']}/claim", data={"csrf_token": token},
                         headers={"origin": "https://evil.example"})
        assert r.status_code == 403
        # Nothing changed.
        got = await store.todo_get(human, todo["id"])
        assert got["state"] == "pending" and got["attempts"] == []
        assert len(await store.endpoints_of_user(human.user_id)) == 1
        assert (await c.get("/")).status_code == 200  # still signed in
        # The right token does work.
        r = await c.post(f"/todos/{todo['id']}/claim", data={"csrf_token": token})
        assert r.status_code == 303
        assert (await store.todo_get(human, todo["id"]))["state"] == "claimed"


async def test_a_token_from_another_session_is_rejected(live_server):
    store = live_server.store
    human = await make_human(store, "ada")
    agent = await make_agent(store, user=human, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="t")
    async with client_for(live_server) as first, client_for(live_server) as second:
        token_one = await sign_in(first, "ada")
        await sign_in(second, "ada")
        r = await second.post(f"/todos/{todo['id']}/claim", data={"csrf_token": token_one})
        assert r.status_code == 403


async def test_a_form_posted_with_no_session_cookie_is_refused_even_with_a_token(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as drawn, client_for(live_server) as cookieless:
        token = csrf_of((await drawn.get("/login")).text)
        r = await cookieless.post("/login", data={"username": "ada", "password": PASSWORD, "csrf_token": token})
        assert r.status_code == 403 and "This form has expired" in r.text
        assert "sb_session" not in r.headers.get("set-cookie", "")


async def test_a_post_from_the_board_s_own_origin_or_a_null_origin_is_accepted(live_server):
    """Browsers send Origin on every form post: the Board's own, or "null" under its
    no-referrer policy, must pass (the token decides), where a foreign one is refused."""
    store = live_server.store
    human = await make_human(store, "ada")
    agent = await make_agent(store, user=human, agent_id="w1")
    first = await store.todo_add(agent, queue="q", title="one")
    second = await store.todo_add(agent, queue="q", title="two")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        r = await c.post(f"/todos/{first['id']}/claim", data={"csrf_token": token},
                         headers={"origin": live_server.url.rstrip("/")})
        assert r.status_code == 303, r.text
        r = await c.post(f"/todos/{second['id']}/claim", data={"csrf_token": token}, headers={"origin": "null"})
        assert r.status_code == 303, r.text
    assert {(await store.todo_get(human, t["id"]))["state"] for t in (first, second)} == {"claimed"}


async def test_signing_in_issues_a_new_csrf_token_and_the_sign_in_page_s_stops_working(live_server):
    """A token planted on the sign-in page (the anonymous session's) is no use after sign-in."""
    store = live_server.store
    human = await make_human(store, "ada")
    agent = await make_agent(store, user=human, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="t")
    async with client_for(live_server) as c:
        anonymous = csrf_of((await c.get("/login")).text)
        r = await c.post("/login", data={"username": "ada", "password": PASSWORD, "csrf_token": anonymous})
        assert r.status_code == 303
        signed_in = csrf_of((await c.get("/")).text)
        assert signed_in != anonymous
        r = await c.post(f"/todos/{todo['id']}/claim", data={"csrf_token": anonymous})
        assert r.status_code == 403
    assert (await store.todo_get(human, todo["id"]))["state"] == "pending"
