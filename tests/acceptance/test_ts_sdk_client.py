"""The official TypeScript MCP SDK client (what most agent hosts embed) against a real server.

It is stricter than the Python SDK's client: it validates the structured content of every
result against the tool's output schema and throws on a mismatch, error results included.
So every success must match its schema, and every error must reach the client as a tool
error whose code the agent can read."""

from __future__ import annotations

import pytest

from board.config import Settings
from board.store.vocabulary import VERBS
from tests.acceptance.mcp_helpers import make_team, vend
from tests.acceptance.third_party import Threw, ok, tool_error, ts_client
from tests.conftest import create_database, drop_database, run_server, sql_rows

RATE_BURST = 30


@pytest.fixture(scope="module")
async def ts_server(pg_admin_url, template_url):
    """A server whose rate limit is reachable (a burst of 30 calls, then one every 20 s), so
    the rate_limited error is provoked for real; each test vends its own endpoints."""
    name, url = create_database(pg_admin_url)
    settings = Settings(database_url=url, secret_key="test-secret-key-0123456789", reaper_interval_seconds=0,
                        retry_interval_seconds=0.2, retention_interval_seconds=0, doorbell_heartbeat_seconds=0,
                        rate_limit_per_second=0.05, rate_limit_burst=RATE_BURST)
    try:
        async with run_server(settings) as server:
            yield server
    finally:
        drop_database(pg_admin_url, name)


async def test_the_typescript_client_connects_and_reads_the_loop_from_the_instructions(ts_server):
    ep = await vend(ts_server.store)
    async with ts_client(ts_server, ep.token) as client:
        assert client.info["protocolVersion"] == "2025-11-25" and client.info["sessionId"]
        assert client.info["serverVersion"]["name"] == "switchboard"
        instructions = client.info["instructions"]
        for step in ("claim_next", "heartbeat", "complete", "fail", "release", "summary", "lease_token"):
            assert step in instructions, step


async def test_the_typescript_client_lists_every_tool_with_a_title_and_the_hints_hosts_gate_on(ts_server):
    ep = await vend(ts_server.store)
    async with ts_client(ts_server, ep.token) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
    assert set(tools) == set(VERBS) | {"add_todos", "complete_todos"}
    for name, tool in tools.items():
        assert tool["title"] and tool["description"], name
        assert tool["inputSchema"]["type"] == "object" and tool["outputSchema"]["type"] == "object", name
    hints = {name: {k: v for k, v in tool["annotations"].items() if k.endswith("Hint")} for name, tool in tools.items()}
    for name in ("list_todos", "get_todo"):
        assert hints[name] == {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                               "openWorldHint": False}, name
    assert hints["cancel"]["destructiveHint"] is True and hints["cancel"]["readOnlyHint"] is False
    assert hints["heartbeat"]["idempotentHint"] is True
    for name in set(VERBS) - {"list_todos", "get_todo"}:
        assert hints[name]["readOnlyHint"] is False, name
    for name in set(VERBS) - {"cancel"}:
        assert hints[name]["destructiveHint"] is False, name


async def test_a_fenced_cycle_through_the_typescript_client(ts_server):
    """add, claim_next with require_fence, heartbeat with the token, complete with a summary,
    get_todo: each result passes the client's output-schema check and says what happened. The
    claimant's control characters (a NUL and a bell) are removed, not refused."""
    ep = await vend(ts_server.store)
    async with ts_client(ts_server, ep.token) as client:
        todo = ok(await client.call_tool("add_todo", {"queue": "q", "title": "fix the build", "payload": {"n": 1}}))
        assert (todo["state"], todo["payload"], todo["attempts_total"]) == ("pending", {"n": 1}, 0)
        claim = ok(await client.call_tool("claim_next", {"require_fence": True,
                                                             "claimant": "ts-host/\u0000run-1\u0007"}))
        assert claim["todo"]["id"] == todo["id"] and claim["todo"]["state"] == "claimed"
        assert (claim["attempt_seq"], claim["attempts_total"], claim["prior_attempts"]) == (1, 1, [])
        token = claim["lease_token"]
        beat = ok(await client.call_tool("heartbeat", {"id": todo["id"], "lease_token": token, "lease_seconds": 120}))
        assert beat["state"] == "claimed" and beat["lease_expires_at"] > claim["todo"]["lease_expires_at"]
        done = ok(await client.call_tool("complete", {"id": todo["id"], "lease_token": token, "result": {"ok": True},
                                                      "summary": "bumped the pin; tests green"}))
        assert (done["state"], done["result"]) == ("done", {"ok": True})
        assert done["closed_attempt"] == {"seq": 1, "attempt": 1, "outcome": "completed", "disposition": "done",
                                          "died": False}
        got = ok(await client.call_tool("get_todo", {"id": todo["id"]}))
    assert got["state"] == "done" and got["attempt_outcomes"] == {"completed": 1}
    [attempt] = got["attempts"]
    assert (attempt["claimant"], attempt["outcome"], attempt["summary"]) == (
        "ts-host/run-1", "completed", "bumped the pin; tests green")
    rows = await sql_rows(ts_server.settings.database_url,
                          "SELECT outcome::text, disposition::text, summary FROM attempts WHERE todo_id = %s",
                          (todo["id"],))
    assert rows == [{"outcome": "completed", "disposition": "done", "summary": "bumped the pin; tests green"}]


async def test_every_tool_s_success_passes_the_typescript_client_s_schema_check(ts_server):
    ep = await vend(ts_server.store)
    async with ts_client(ts_server, ep.token) as client:
        async def call(tool, args):
            return ok(await client.call_tool(tool, args))

        a = await call("add_todo", {"queue": "q", "title": "a", "max_attempts": 1})
        b = await call("add_todo", {"queue": "q", "title": "b", "routing": {"lane": "x"}})
        c = await call("add_todo", {"queue": "q", "title": "c"})
        assert (await call("list_todos", {"state": "pending"}))["next_cursor"] is None
        assert (await call("claim", {"id": a["id"]}))["todo"]["id"] == a["id"]
        assert (await call("interrupt", {"id": a["id"], "state": "auth_required"}))["state"] == "auth_required"
        assert (await call("resume", {"id": a["id"]}))["state"] == "claimed"
        failed = await call("fail", {"id": a["id"], "summary": "red", "result": [1, "two", None]})
        assert failed["dead_letter"] is True and failed["result"] == [1, "two", None]
        await call("claim", {"id": b["id"]})
        assert (await call("release", {"id": b["id"], "summary": "shutting down"}))["state"] == "pending"
        again = await call("claim", {"id": b["id"]})
        assert [p["outcome"] for p in again["prior_attempts"]] == ["released"]
        assert (await call("complete", {"id": b["id"], "result": "a string result"}))["result"] == "a string result"
        assert (await call("cancel", {"id": c["id"]}))["state"] == "canceled"
        assert await call("claim_next", {}) == {"todo": None}
        history = await call("get_todo", {"id": a["id"]})
        assert history["dead_letter"] is True and history["attempts"][0]["outcome"] == "failed"


async def _provoke(client, code: str):
    """Make the call that yields `code`; returns the raw result the client returned."""
    if code == "invalid":
        todo = ok(await client.call_tool("add_todo", {"queue": "q", "title": "x"}))
        ok(await client.call_tool("claim", {"id": todo["id"]}))
        return await client.call_tool("complete", {"id": todo["id"], "artifact": "ftp://not-an-allowed-scheme"})
    if code == "not_found":
        return await client.call_tool("get_todo", {"id": "never-minted-0000"})
    if code == "conflict":
        ok(await client.call_tool("add_todo", {"queue": "q", "title": "x"}))
        claim = ok(await client.call_tool("claim_next", {"require_fence": True}))
        return await client.call_tool("heartbeat", {"id": claim["todo"]["id"], "lease_token": "not-the-token"})
    if code == "forbidden":
        return await client.call_tool("add_todo", {"queue": "not-granted", "title": "x"})
    if code == "rate_limited":
        for _ in range(RATE_BURST * 2):
            result = await client.call_tool("list_todos", {"limit": 1})
            if result.get("isError"):
                return result
        raise AssertionError(f"no call was rate limited after {RATE_BURST * 2} calls")
    raise AssertionError(code)


@pytest.mark.parametrize("code", ["invalid", "not_found", "conflict", "forbidden", "rate_limited"])
async def test_every_error_code_reaches_the_typescript_client_as_a_readable_tool_error(ts_server, code):
    ep = await vend(ts_server.store)
    async with ts_client(ts_server, ep.token) as client:
        try:
            result = await _provoke(client, code)
        except Threw as thrown:
            pytest.fail(f"the TypeScript client threw instead of returning the {code} tool error: {thrown}")
        error = tool_error(result)
    assert error["code"] == code, error
    assert error["message"]
    if code == "invalid":
        assert error["argument"] == "artifact"
    if code == "forbidden":
        assert error["argument"] == "queue"


@pytest.mark.parametrize("owners", [("person", "person"), ("team", "other-team"), ("team", "person"),
                                    ("person", "team")],
                         ids=["personal", "two-teams", "team-vs-personal", "personal-vs-team"])
async def test_a_foreign_todo_and_a_never_minted_id_look_the_same_to_the_typescript_client(ts_server, owners):
    teams = {side: await make_team(ts_server.store) for side in set(owners) - {"person"}}
    a = await vend(ts_server.store, user_id=teams.get(owners[0]))
    b = await vend(ts_server.store, user_id=teams.get(owners[1]))
    async with ts_client(ts_server, a.token) as client_a:
        theirs = ok(await client_a.call_tool("add_todo", {"queue": "q", "title": "a's"}))
    async with ts_client(ts_server, b.token) as client_b:
        for verb in ("get_todo", "claim", "heartbeat", "complete", "fail", "release", "cancel"):
            foreign = await client_b.call_tool(verb, {"id": theirs["id"]})
            never = await client_b.call_tool(verb, {"id": "01JRANDOM-never-minted"})
            assert foreign == never, verb
            assert tool_error(foreign) == {"code": "not_found", "message": "no such todo"}, verb
        assert ok(await client_b.call_tool("list_todos", {}))["todos"] == []


async def test_two_endpoints_of_a_team_share_its_todos_through_the_typescript_client(ts_server):
    """A planner of a team adds, a worker of the team claims and completes with its lease:
    every result passes the client's output-schema checks; a person's endpoint sees none of it."""
    team = await make_team(ts_server.store)
    planner = await vend(ts_server.store, user_id=team, agent_id="planner")
    worker = await vend(ts_server.store, user_id=team, agent_id="worker")
    person = await vend(ts_server.store)
    async with ts_client(ts_server, planner.token) as p, ts_client(ts_server, worker.token) as w, \
            ts_client(ts_server, person.token) as o:
        todo = ok(await p.call_tool("add_todo", {"queue": "q", "title": "for the team"}))
        mine = ok(await o.call_tool("add_todo", {"queue": "q", "title": "the person's"}))
        assert [t["id"] for t in ok(await w.call_tool("list_todos", {}))["todos"]] == [todo["id"]]
        claim = ok(await w.call_tool("claim_next", {"require_fence": True}))
        assert claim["todo"]["id"] == todo["id"]
        ok(await w.call_tool("note", {"id": todo["id"], "text": "on it", "lease_token": claim["lease_token"]}))
        ok(await w.call_tool("complete", {"id": todo["id"], "lease_token": claim["lease_token"], "summary": "done"}))
        read = ok(await p.call_tool("get_todo", {"id": todo["id"]}))
        assert read["state"] == "done" and read["attempts"][0]["summary"] == "done"
        assert tool_error(await w.call_tool("get_todo", {"id": mine["id"]}))["code"] == "not_found"
        assert tool_error(await o.call_tool("get_todo", {"id": todo["id"]}))["code"] == "not_found"
        assert [t["id"] for t in ok(await o.call_tool("list_todos", {}))["todos"]] == [mine["id"]]


async def test_the_typescript_client_without_a_token_is_refused_with_401(ts_server):
    with pytest.raises(Threw) as refused:
        async with ts_client(ts_server, None):
            pass
    assert "401" in str(refused.value)


async def test_a_complete_retried_after_its_reply_was_lost_is_a_replay_the_typescript_client_accepts(ts_server):
    """The agent cannot know whether its complete committed; sending it again with the same
    lease_token answers the same closed attempt, marked replayed, and passes the client's
    output-schema check. The database holds one completed attempt."""
    ep = await vend(ts_server.store)
    async with ts_client(ts_server, ep.token) as client:
        todo = ok(await client.call_tool("add_todo", {"queue": "q", "title": "retry me"}))
        claim = ok(await client.call_tool("claim", {"id": todo["id"], "require_fence": True}))
        args = {"id": todo["id"], "lease_token": claim["lease_token"], "summary": "done once"}
        first = ok(await client.call_tool("complete", args))
        again = ok(await client.call_tool("complete", args))
    assert again["replayed"] is True and "replayed" not in first
    assert again["closed_attempt"] == first["closed_attempt"] and again["state"] == "done"
    rows = await sql_rows(ts_server.settings.database_url,
                          "SELECT outcome::text, summary FROM attempts WHERE todo_id = %s", (todo["id"],))
    assert rows == [{"outcome": "completed", "summary": "done once"}]


async def test_notes_and_liveness_pass_the_typescript_client_s_schema_check(ts_server):
    """The note tool's schemas as the client compiles them, a fenced note, get_todo with notes
    and the open attempt's liveness, and a claim's prior attempt with its notes: each result
    validated by the client against the tool's output schema."""
    ep = await vend(ts_server.store)
    async with ts_client(ts_server, ep.token) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        note = tools["note"]
        assert note["inputSchema"]["required"] == ["id", "text"]
        assert set(note["inputSchema"]["properties"]) == {"id", "text", "lease_token"}
        assert note["outputSchema"]["required"] == ["id", "attempt_seq", "notes_count", "notes_pruned", "note"]
        attempt = tools["get_todo"]["outputSchema"]["properties"]["attempts"]["items"]["properties"]
        assert {"notes", "notes_count", "notes_pruned", "liveness", "last_activity_at"} <= set(attempt)
        assert "notes_limit" in tools["get_todo"]["inputSchema"]["properties"]

        todo = ok(await client.call_tool("add_todo", {"queue": "q", "title": "noted"}))
        claim = ok(await client.call_tool("claim", {"id": todo["id"], "require_fence": True}))
        args = {"id": todo["id"], "lease_token": claim["lease_token"]}
        noted = ok(await client.call_tool("note", {**args, "text": "tried the cache flag; no change"}))
        assert (noted["notes_count"], noted["note"]["author_kind"]) == (1, "endpoint")
        long = ok(await client.call_tool("note", {**args, "text": "€" * 1000}))
        assert long["note"]["truncated"] is True and len(long["note"]["text"].encode()) <= 2048
        got = ok(await client.call_tool("get_todo", {"id": todo["id"], "notes_limit": 10}))
        [current] = got["attempts"]
        assert current["liveness"] == "live" and current["notes_count"] == 2
        assert [n["text"] for n in current["notes"]][1] == "tried the cache flag; no change"
        ok(await client.call_tool("release", {**args, "summary": "handing over"}))
        again = ok(await client.call_tool("claim", {"id": todo["id"]}))
        assert again["prior_attempts"][0]["notes_count"] == 2 and len(again["prior_attempts"][0]["notes"]) == 2
        empty = await client.call_tool("note", {"id": todo["id"], "text": "\u0001"})
    assert tool_error(empty)["argument"] == "text"


async def test_continuations_and_usage_pass_the_typescript_client_s_schema_check(ts_server):
    """add_todo with continues, complete, fail and release with usage, a claim that returns
    `continues`, and get_todo with its chain and usage totals: each result passes the
    client's output-schema check."""
    ep = await vend(ts_server.store)
    async with ts_client(ts_server, ep.token) as client:
        async def call(tool, args):
            return ok(await client.call_tool(tool, args))

        root = await call("add_todo", {"queue": "q", "title": "draft"})
        await call("claim", {"id": root["id"]})
        await call("release", {"id": root["id"], "usage": {"input_tokens": 3}})
        await call("claim", {"id": root["id"]})
        await call("complete", {"id": root["id"], "result": {"v": 1}, "summary": "drafted",
                                "usage": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.5, "model": "m-1"}})
        nxt = await call("add_todo", {"queue": "q", "title": "review fixes", "continues": root["id"],
                                      "max_attempts": 1})
        assert nxt["continues_id"] == root["id"]
        claim = await call("claim", {"id": nxt["id"]})
        assert claim["continues"]["id"] == root["id"] and claim["continues"]["last_attempt"]["usage"]["model"] == "m-1"
        failed = await call("fail", {"id": nxt["id"], "usage": {"output_tokens": 4}})
        assert failed["dead_letter"] is True
        got = await call("get_todo", {"id": nxt["id"]})
        assert [c["id"] for c in got["chain"]] == [root["id"], nxt["id"]]
        assert got["usage"] == {"input_tokens": None, "output_tokens": 4, "cost_usd": None}
        first = await call("get_todo", {"id": root["id"]})
        assert first["continued_by_id"] == nxt["id"] and first["usage"]["input_tokens"] == 13
        error = tool_error(await client.call_tool("complete", {"id": nxt["id"], "usage": {"cost_usd": -1}}))
        assert error["code"] == "invalid" and error["argument"] == "usage"
