"""No input reaches an internal error: a NUL character or a lone surrogate in any string an
agent or a browser sends, and a todo id that cannot exist, get the answer a user can act on
(invalid naming the argument, not_found like any unknown id, a 400 or 404 page), and change
nothing in the database.

Postgres text cannot hold a NUL (the driver refuses it before sending) and UTF-8 cannot
encode a lone surrogate (JSON can carry one as "\\ud800"; JavaScript's JSON.stringify writes
one that way), so both used to escape as driver exceptions."""

from __future__ import annotations

import base64
import contextlib
import json
import re
from json import dumps as json_dumps

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from board.mcp import tools as mcp_tools
from board.mcp.doorbell import TODO_URI_PREFIX
from board.store.store import Human
from tests.acceptance.mcp_helpers import auth, call, connect, error_body, mcp_server, vend  # noqa: F401 (fixture)
from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in
from tests.acceptance.test_board_live import EventStream
from tests.acceptance.third_party import Threw, ok, tool_error, ts_client
from tests.conftest import make_agent, sql_rows

NUL = "a\x00b"
SURROGATE = "a\ud800b"
NEVER_MINTED = "01JRANDOM-never-minted"
# Ids no todo can have: a NUL, a lone surrogate (first and second half), and far past any id's length.
IMPOSSIBLE_IDS = {"NUL": NUL, "surrogate": SURROGATE, "low surrogate": "\udfff", "long": "x" * 5000}

# What each kind of argument gets: a plain string, or the bad text hidden inside a JSON value
# (as a key, or nested in a value) for the arguments that take JSON. (The Python SDK client
# cannot send a lone surrogate in an object key; the TypeScript client test sends one.)
BAD = {
    "NUL": {"string": NUL, "object": {"k\x00ey": 1}, "any": {"deep": {"x": NUL}}},
    "surrogate": {"string": SURROGATE, "object": {"deep": [{"x": SURROGATE}]}, "any": ["\udfff"]},
}


def _kind(schema: dict) -> str | None:
    if schema.get("type") == "string":
        return "string"
    if schema.get("type") == "object":
        return "object"
    if "anyOf" in schema:
        return "any"
    return None  # numbers and booleans


def string_arguments(spec) -> dict[str, str]:
    """Every argument of a tool that carries text: strings and JSON values."""
    return {name: kind for name, schema in spec.arguments.items() if (kind := _kind(schema))}


class EscapingHttpClient(httpx2.AsyncClient):
    """Writes request JSON with \\u escapes, as JavaScript's JSON.stringify does: httpx2's own
    encoder writes UTF-8, which cannot carry a lone surrogate, so the SDK client could never
    send one over it."""

    def build_request(self, method, url, *, json=None, content=None, **kwargs):
        if json is not None:
            content, json = json_dumps(json, separators=(",", ":"), allow_nan=False).encode("ascii"), None
        return super().build_request(method, url, json=json, content=content, **kwargs)


@contextlib.asynccontextmanager
async def escaping_client(server, token: str):
    async with EscapingHttpClient(headers=auth(token), timeout=httpx2.Timeout(30.0)) as http:
        async with Client(streamable_http_client(server.url + "/mcp", http_client=http)) as client:
            yield client


async def checksum(url: str, endpoint_id: str | None = None) -> tuple:
    """Every column of every todo, attempt and note: any write changes it (updated_at at
    least). With endpoint_id, of that endpoint's todos only (any it gained among them), with
    their attempts and notes: the MCP tests share their module's database, where the reaper
    (every 0.2 s) may close an earlier test's lapsed lease mid-test; an agent's call can only
    ever write its own endpoint's todos, so this is all that bad input could change."""
    rows = await sql_rows(url, """
        WITH mine AS (SELECT * FROM todos WHERE %(endpoint)s::uuid IS NULL OR endpoint_id = %(endpoint)s::uuid)
        SELECT (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t.id), '')) FROM mine t) AS todos,
               (SELECT md5(coalesce(string_agg(a::text, ',' ORDER BY a.todo_id, a.seq), '')) FROM attempts a
                 WHERE a.todo_id IN (SELECT id FROM mine)) AS attempts,
               (SELECT md5(coalesce(string_agg(note::text, ',' ORDER BY note.todo_id, note.seq, note.n), ''))
                  FROM attempt_notes note WHERE note.todo_id IN (SELECT id FROM mine)) AS notes,
               (SELECT count(*) FROM mine) AS count""", {"endpoint": endpoint_id})
    assert rows[0]["count"] > 0 or endpoint_id is None, "the checksum covers no todo: it would prove nothing"
    return rows[0]["todos"], rows[0]["attempts"], rows[0]["notes"], rows[0]["count"]


async def held_and_pending(server, token: str) -> dict:
    """A pending todo and a held one (claimed with a fence, on a lease no test outlasts, so
    the reaper never closes it mid-test): valid values for every other argument."""
    async with escaping_client(server, token) as client:
        pending = await call(client, "add_todo", {"queue": "q", "title": "pending"})
        held = await call(client, "add_todo", {"queue": "q", "title": "held"})
        claim = await call(client, "claim", {"id": held["id"], "require_fence": True, "lease_seconds": 3600})
    return {"pending": pending["id"], "held": held["id"], "token": claim["lease_token"]}


def base_arguments(tool: str, t: dict) -> dict:
    """Arguments that would be accepted, so that the one bad argument is what is answered."""
    on_held = {"id": t["held"], "lease_token": t["token"]}
    return {
        "add_todo": {"queue": "q", "title": "t"},
        "list_todos": {},
        "get_todo": {"id": t["pending"]},
        "claim": {"id": t["pending"]},
        "claim_next": {},
        "heartbeat": on_held,
        "note": {**on_held, "text": "a note"},
        "complete": on_held,
        "fail": on_held,
        "release": on_held,
        "cancel": {"id": t["pending"]},
        "interrupt": on_held,
        "resume": on_held,
    }[tool]


def _cursor(after_id: str) -> str:
    """A cursor this server never returned, well formed, whose todo id holds bad text."""
    return base64.urlsafe_b64encode(json.dumps(["2026-01-01T00:00:00+00:00", after_id]).encode()).decode()


# Arguments whose control characters the store removes (a claimant, a note's text, usage's
# model): a NUL there is cleaned away, not refused (test_mcp_attempts.py), so only a lone
# surrogate, which is no control character, is bad input for them.
CLEANED = {"claimant", "text", "usage"}


def cases(tool: str) -> list[tuple[str, str, object]]:
    """(argument, what is bad, the value) for every text argument of the tool."""
    out = []
    for name, kind in string_arguments(mcp_tools.BY_NAME[tool]).items():
        for bad, values in BAD.items():
            if name in CLEANED and bad == "NUL":
                continue
            out.append((name, bad, IMPOSSIBLE_IDS[bad] if name == "id" else values[kind]))
        if name == "id":
            out.append((name, "long", IMPOSSIBLE_IDS["long"]))
        if name == "cursor":
            out += [(name, f"{bad} inside", _cursor(value)) for bad, value in (("NUL", NUL), ("surrogate", SURROGATE))]
    return out


# The batched verbs take their text inside their items, each error naming the item (test_mcp_batched.py).
@pytest.mark.parametrize("tool", [spec.name for spec in mcp_tools.SPECS
                                  if spec.name not in ("add_todos", "complete_todos")])
async def test_nul_and_lone_surrogates_in_any_argument_are_invalid_naming_it_and_change_nothing(mcp_server, tool):
    """Through the Python SDK client over HTTP: each text argument of the tool, with a NUL and
    with a lone surrogate, is `invalid` naming that argument; an id that cannot exist is
    `not_found`, byte-identical to a never-minted id's answer. No call changes the database."""
    assert len(cases(tool)) >= 3, tool  # every tool takes text (get_todo and cancel only an id)
    ep = await vend(mcp_server.store)
    todos = await held_and_pending(mcp_server, ep.token)
    base = base_arguments(tool, todos)
    url = mcp_server.settings.database_url
    before = await checksum(url, ep.endpoint_id)
    wrong = []
    async with escaping_client(mcp_server, ep.token) as client:
        unknown = await client.call_tool(tool, {**base, "id": NEVER_MINTED}) if "id" in base else None
        for name, bad, value in cases(tool):
            try:
                result = await client.call_tool(tool, {**base, name: value})
            except MCPError as e:
                wrong.append((name, bad, f"JSON-RPC error {e.error.code}: {e.error.message}"))
                continue
            if name == "id":
                if result.model_dump_json() != unknown.model_dump_json():
                    wrong.append((name, bad, result.content[0].text[:200]))
                continue
            body = error_body(result) if result.is_error else {"ok": result.structured_content}
            if body.get("error", {}).get("code") != "invalid" or body["error"].get("argument") != name:
                wrong.append((name, bad, json.dumps(body)[:200]))
    assert wrong == [], "\n".join(f"{tool} {name} ({bad}): {got}" for name, bad, got in wrong)
    assert await checksum(url, ep.endpoint_id) == before


@pytest.mark.parametrize("generation", ["modern", "legacy"])
async def test_a_resource_read_of_an_impossible_todo_id_is_the_same_not_found_as_a_never_minted_one(mcp_server,
                                                                                                  generation):
    """switchboard://todos/{id} with a NUL or an id far too long. (A lone surrogate cannot be sent
    here: the modern client puts the URI in a header, and the legacy transport refuses it, below.)"""
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token, generation) as client:
        with pytest.raises(MCPError) as never:
            await client.read_resource(TODO_URI_PREFIX + NEVER_MINTED)
        for todo_id in (NUL, "\x00", IMPOSSIBLE_IDS["long"]):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(TODO_URI_PREFIX + todo_id)
            assert caught.value.error.model_dump_json() == never.value.error.model_dump_json(), todo_id[:8]


async def test_the_typescript_client_gets_invalid_naming_the_argument_for_a_nul_anywhere(mcp_server):
    """What agent hosts run, on the 2025-11-25 transport: a NUL in any argument is a tool error
    the agent can read (invalid naming the argument; not_found for an id)."""
    ep = await vend(mcp_server.store)
    todos = await held_and_pending(mcp_server, ep.token)
    held = {"id": todos["held"], "lease_token": todos["token"]}
    url = mcp_server.settings.database_url
    before = await checksum(url, ep.endpoint_id)
    async with ts_client(mcp_server, ep.token) as client:
        for verb in ("get_todo", "claim", "cancel"):
            assert (await client.call_tool(verb, {"id": NUL})
                    == await client.call_tool(verb, {"id": NEVER_MINTED})), verb
        for tool, arguments, argument in [
            ("add_todo", {"queue": "q", "title": NUL}, "title"),
            ("add_todo", {"queue": "q", "title": "t", "payload": {"k": {"deep\x00": 1}}}, "payload"),
            ("list_todos", {"queue": NUL}, "queue"),
            ("claim_next", {"queue": NUL}, "queue"),
            ("heartbeat", {**held, "lease_token": NUL}, "lease_token"),
            ("complete", {**held, "summary": NUL}, "summary"),
            ("fail", {**held, "result": [NUL]}, "result"),
            ("release", {**held, "artifact": "https://example.com/" + NUL}, "artifact"),
        ]:
            error = tool_error(await client.call_tool(tool, arguments))
            assert (error["code"], error.get("argument")) == ("invalid", argument), (tool, error)
    assert await checksum(url, ep.endpoint_id) == before


async def test_a_lone_surrogate_from_the_typescript_client_is_refused_by_the_transport_and_changes_nothing(
        mcp_server):
    """The TypeScript client writes a lone surrogate as a \\u escape; on the 2025-11-25 transport
    the MCP SDK's JSON parser refuses that escape, so the call fails as a JSON-RPC parse error
    (HTTP 400) before any tool runs: never an internal error, nothing written, and the client
    goes on working. (On 2026-07-28 it reaches the tools, as the first test shows.)"""
    ep = await vend(mcp_server.store)
    todos = await held_and_pending(mcp_server, ep.token)
    url = mcp_server.settings.database_url
    before = await checksum(url, ep.endpoint_id)
    async with ts_client(mcp_server, ep.token) as client:
        for tool, arguments in [("get_todo", {"id": SURROGATE}), ("add_todo", {"queue": "q", "title": SURROGATE}),
                                ("complete", {"id": todos["held"], "summary": SURROGATE})]:
            with pytest.raises(Threw) as refused:
                await client.call_tool(tool, arguments)
            assert "400" in str(refused.value) and "-32700" in str(refused.value), tool
        ok(await client.call_tool("list_todos", {}))
    assert await checksum(url, ep.endpoint_id) == before


# -- the Board -----------------------------------------------------------------------------

@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(reaper_interval_seconds=0, retry_interval_seconds=0)


async def board_with_a_held_todo(live_server, client) -> tuple[dict, str, Human]:
    """Ada, signed in on the client, holding one todo; returns it, her CSRF token and her."""
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="held by ada")
    await store.todo_claim(ada, todo["id"])
    return todo, await sign_in(client, "ada"), ada


def assert_error_page(response, status: int, *words: str) -> None:
    """A plain page in the Board's layout: a heading, and a message naming what was wrong."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert '<main id="main"' in page and re.search(r"<h1>[^<]+</h1>", page)
    message = re.search(r"</h1>\s*<p>(.*?)</p>", page, re.S).group(1)
    for word in words:
        assert word in message, (word, message)


# Path segments that cannot be a todo id, percent-encoded as a browser would send them.
IMPOSSIBLE_PATH_IDS = ["%00", "a%00b", "%ED%A0%80", "x" * 3000]


async def test_a_todo_id_that_cannot_exist_gets_the_same_404_page_as_a_random_id(live_server):
    async with client_for(live_server) as c:
        todo, csrf, _ = await board_with_a_held_todo(live_server, c)
        before = await checksum(live_server.settings.database_url)
        random = await c.get("/todos/5b1c7f1e-0000-4000-8000-000000000000")
        random_drawer = await c.get("/todos/5b1c7f1e-0000-4000-8000-000000000000/drawer")
        assert random.status_code == random_drawer.status_code == 404
        for todo_id in IMPOSSIBLE_PATH_IDS:
            page = await c.get(f"/todos/{todo_id}")
            assert (page.status_code, page.content) == (404, random.content), todo_id
            drawer = await c.get(f"/todos/{todo_id}/drawer")
            assert (drawer.status_code, drawer.content) == (404, random_drawer.content), todo_id
            for action in ("claim", "release", "fail", "complete", "retry", "cancel"):
                r = await c.post(f"/todos/{todo_id}/{action}", data={"csrf_token": csrf})
                assert r.status_code == 404 and "Not found" in r.text, (todo_id, action, r.status_code)
    assert await checksum(live_server.settings.database_url) == before


@pytest.mark.parametrize("query,parameter", [
    ("/?queue=%00", "queue"), ("/?state=%00", "state"), ("/?cursor=a%00", "cursor"), ("/?dead_letter=%00", "dead_letter"),
    ("/todos/{id}?queue=%00", "queue"), ("/events?queue=%00", "queue"),
])
async def test_a_query_value_with_a_nul_gets_a_400_page_naming_the_parameter(live_server, query, parameter):
    async with client_for(live_server) as c:
        todo, _, _ = await board_with_a_held_todo(live_server, c)
        r = await c.get(query.replace("{id}", todo["id"]))
    assert_error_page(r, 400, parameter, "NUL")


async def test_the_sign_in_page_with_a_nul_in_next_is_a_400_page(live_server):
    async with client_for(live_server) as c:
        assert_error_page(await c.get("/login?next=/%00"), 400, "next", "NUL")


async def test_live_updates_for_a_todo_id_that_cannot_exist_stream_it_as_gone_and_go_on(live_server):
    """The stream is not aborted (a browser would reconnect for ever): its snapshot says the
    watched todo is gone, and later changes still arrive."""
    async with client_for(live_server) as c:
        todo, _, ada = await board_with_a_held_todo(live_server, c)
        async with c.stream("GET", "/events?todo=%00") as response:
            assert response.status_code == 200
            stream = EventStream(response)
            event, snapshot = await stream.next()
            assert event == "snapshot" and snapshot["gone"] is True and snapshot["drawer"] is None
            await live_server.store.todo_release(ada, todo["id"])
            changed = await stream.next_todo(todo["id"])
            assert changed["gone"] is False and "pending" in changed["row"]


async def test_a_form_field_with_a_nul_gets_a_400_page_naming_it_and_changes_nothing(live_server):
    async with client_for(live_server) as c:
        todo, csrf, _ = await board_with_a_held_todo(live_server, c)
        before = await checksum(live_server.settings.database_url)
        r = await c.post(f"/todos/{todo['id']}/release", data={"csrf_token": csrf, "summary": "tried \x00 this"})
        assert_error_page(r, 400, "summary", "NUL")
        assert await checksum(live_server.settings.database_url) == before


def multipart(csrf: str, name: bytes, value: bytes, part_headers: bytes = b"") -> tuple[bytes, dict]:
    boundary = b"sbBOUNDARY"
    body = b"".join(
        b"--" + boundary + b'\r\nContent-Disposition: form-data; name="' + n + b'"' + h + b"\r\n\r\n" + v + b"\r\n"
        for n, v, h in ((b"csrf_token", csrf.encode(), b""), (name, value, part_headers)))
    return body + b"--" + boundary + b"--\r\n", {"content-type": "multipart/form-data; boundary=sbBOUNDARY"}


@pytest.mark.parametrize("what,value,part_headers,words", [
    ("bytes that are not UTF-8", b"\xed\xa0\x80", b"", ("UTF-8",)),
    ("an unknown character set", b"x", b"\r\nContent-Type: text/plain; charset=no-such-charset", ("UTF-8",)),
    ("a lone surrogate by way of its character set", b"\\ud800", b"\r\nContent-Type: text/plain; charset=unicode_escape",
     ("summary", "surrogate")),
    ("a file instead of text", b"hello", b'; filename="notes.txt"', ("summary", "text")),
])
async def test_a_multipart_form_field_that_is_not_plain_text_gets_a_400_page(live_server, what, value, part_headers,
                                                                             words):
    async with client_for(live_server) as c:
        todo, csrf, _ = await board_with_a_held_todo(live_server, c)
        before = await checksum(live_server.settings.database_url)
        body, headers = multipart(csrf, b"summary", value, part_headers)
        r = await c.post(f"/todos/{todo['id']}/release", content=body, headers=headers)
        assert_error_page(r, 400, *words)
        assert await checksum(live_server.settings.database_url) == before


async def test_sign_in_with_a_nul_in_the_username_is_a_400_page_not_a_500(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        csrf = csrf_of((await c.get("/login")).text)
        r = await c.post("/login", data={"csrf_token": csrf, "username": "ada\x00", "password": "whatever"})
        assert_error_page(r, 400, "username", "NUL")


async def test_vending_an_endpoint_with_a_nul_in_a_field_is_a_400_page_and_vends_nothing(live_server):
    async with client_for(live_server) as c:
        await board_with_a_held_todo(live_server, c)
        page = await c.get("/endpoints")
        for field in ("name", "agent_id", "queues"):
            values = {"name": "n", "agent_id": "a1", "queues": "q", field: "x\x00y"}
            r = await c.post("/endpoints", data={"csrf_token": csrf_of(page.text), "verbs": ["claim"], **values})
            assert_error_page(r, 400, field, "NUL")
    rows = await sql_rows(live_server.settings.database_url, "SELECT name FROM endpoints")
    assert [r["name"] for r in rows] == ["w1"]


async def test_bad_text_never_gets_a_500_from_any_board_address(live_server):
    """A sweep over every Board route with a NUL in its path, query and form."""
    async with client_for(live_server) as c:
        todo, csrf, _ = await board_with_a_held_todo(live_server, c)
        gets = ["/%00", "/?x=%00", "/todos/%00", "/todos/%00/drawer", f"/todos/{todo['id']}/%00", "/endpoints?x=%00",
                "/endpoints/%00/revoke", "/static/%00", "/static/board.css%00", "/static/%ED%A0%80", "/events?todo=%00&x=%00"]
        posts = ["/todos/%00/cancel", f"/todos/{todo['id']}/%00", "/endpoints", "/endpoints/%00/revoke", "/logout"]
        for path in gets:
            if path.startswith("/events"):
                async with c.stream("GET", path) as r:
                    assert r.status_code < 500, path
                continue
            assert (await c.get(path)).status_code < 500, path
        for path in posts:
            r = await c.post(path, data={"csrf_token": csrf, "name": "\x00", "summary": "\x00", "x\x00": "y"})
            assert r.status_code < 500, path
