"""Notes over MCP, through the SDK's own client in both protocol generations: an agent writes
notes, dies (its lease lapses and the real reaper closes the attempt), and the next claimer
reads those notes in prior_attempts; the note tool's errors; get_todo's notes_limit and the
open attempt's derived liveness."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.acceptance.mcp_helpers import GENERATIONS, call, call_error, connect, error_body, mcp_server, vend  # noqa: F401 (mcp_server is a fixture)
from tests.conftest import sql_rows


async def wait_for_outcome(server, todo_id: str, seq: int, timeout: float = 15.0) -> str:
    """The outcome the attempt closed with, once something (the reaper) closed it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = await sql_rows(server.settings.database_url,
                              "SELECT outcome::text AS outcome FROM attempts WHERE todo_id = %s AND seq = %s",
                              (todo_id, seq))
        if rows and rows[0]["outcome"]:
            return rows[0]["outcome"]
        await asyncio.sleep(0.1)
    raise AssertionError(f"attempt {seq} of {todo_id} still open after {timeout} s")


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_an_agent_that_dies_leaves_notes_the_next_claimer_reads(mcp_server, generation):
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token, generation) as first:
        todo = await call(first, "add_todo", {"queue": "q", "title": "fix the flaky build"})
        # A lease the reaper (every 0.2 s) cannot close while the notes are written, however
        # slow the machine: the test means it to lapse only once they are all in.
        claim = await call(first, "claim_next", {"claimant": "run-1", "require_fence": True, "lease_seconds": 600})
        token = claim["lease_token"]
        for text in ("approach: bisect the last 40 commits", "dead end: not the parser",
                     "constraint: the suite needs 4 GB", "narrowed to commit a1b2c3"):
            noted = await call(first, "note", {"id": todo["id"], "text": text, "lease_token": token})
        assert (noted["attempt_seq"], noted["notes_count"], noted["note"]["author_kind"]) == (1, 4, "endpoint")
        # Its last heartbeat asks for 1 s more ...
        await call(first, "heartbeat", {"id": todo["id"], "lease_token": token, "lease_seconds": 1})
        # ... and then the worker dies: no more heartbeats, no close. The lease lapses; the reaper closes it.
    assert await wait_for_outcome(mcp_server, todo["id"], 1) == "reaped"
    async with connect(mcp_server, ep.token, generation) as second:
        again = await call(second, "claim_next", {"claimant": "run-2"})
    assert again["todo"]["id"] == todo["id"] and again["attempt_seq"] == 2
    [prior] = again["prior_attempts"]
    assert (prior["outcome"], prior["died"], prior["summary"]) == ("reaped", True, None)
    assert (prior["notes_count"], prior["notes_pruned"]) == (4, 0)
    assert [n["text"] for n in prior["notes"]] == ["narrowed to commit a1b2c3", "constraint: the suite needs 4 GB",
                                                   "dead end: not the parser"]
    assert all(n["author_kind"] == "endpoint" and n["truncated"] is False for n in prior["notes"])


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_get_todo_returns_notes_limit_notes_and_the_open_attempts_liveness(mcp_server, generation):
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token, generation) as client:
        todo = await call(client, "add_todo", {"queue": "q", "title": "t"})
        await call(client, "claim", {"id": todo["id"], "lease_seconds": 600})
        for i in range(1, 8):
            await call(client, "note", {"id": todo["id"], "text": f"step {i}"})
        got = await call(client, "get_todo", {"id": todo["id"]})
        few = await call(client, "get_todo", {"id": todo["id"], "notes_limit": 2})
        none = await call(client, "get_todo", {"id": todo["id"], "notes_limit": 0})
        bad = await call_error(client, "get_todo", {"id": todo["id"], "notes_limit": 51})
    [current] = got["attempts"]
    assert [n["text"] for n in current["notes"]] == [f"step {i}" for i in (7, 6, 5, 4, 3)]
    assert [n["text"] for n in few["attempts"][0]["notes"]] == ["step 7", "step 6"]
    assert none["attempts"][0]["notes"] == [] and none["attempts"][0]["notes_count"] == 7
    assert current["liveness"] == "live" and current["last_activity_at"] == current["last_note_at"]
    assert "liveness_explanation" not in current  # the Board's words stay on the Board
    assert (bad["code"], bad["argument"]) == ("invalid", "notes_limit")


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_the_note_tool_refuses_what_heartbeat_refuses_and_an_empty_text(mcp_server, generation):
    store = mcp_server.store
    ep = await vend(store)
    other = await vend(store)
    async with connect(mcp_server, ep.token, generation) as client:
        todo = await call(client, "add_todo", {"queue": "q", "title": "t"})
        pending = await call(client, "add_todo", {"queue": "q", "title": "pending"})
        await call(client, "claim", {"id": todo["id"], "require_fence": True, "lease_seconds": 600})  # never reaped
        wrong = {"id": todo["id"], "lease_token": "not-the-token"}
        assert await call_error(client, "note", {**wrong, "text": "x"}) == await call_error(client, "heartbeat", wrong)
        unfenced = {"id": todo["id"]}
        assert await call_error(client, "note", {**unfenced, "text": "x"}) == await call_error(
            client, "heartbeat", unfenced)
        empty = await call_error(client, "note", {"id": todo["id"], "text": "\u0007\u001b  ", "lease_token": "t"})
        missing = await call_error(client, "note", {"id": todo["id"]})
        nothing_open = await call_error(client, "note", {"id": pending["id"], "text": "x"})
    assert (empty["code"], empty["argument"]) == ("invalid", "text")
    assert (missing["code"], missing["argument"]) == ("invalid", "text")
    assert nothing_open["code"] == "conflict" and "no open attempt" in nothing_open["message"]
    async with connect(mcp_server, other.token, generation) as stranger:
        foreign = await stranger.call_tool("note", {"id": todo["id"], "text": "hello"})
        random = await stranger.call_tool("note", {"id": "01JRANDOM-never-minted", "text": "hello"})
    assert error_body(foreign) == {"error": {"code": "not_found", "message": "no such todo"}}
    assert foreign.model_dump_json() == random.model_dump_json()
    assert await sql_rows(mcp_server.settings.database_url, "SELECT 1 FROM attempt_notes WHERE todo_id = %s",
                          (todo["id"],)) == []


async def test_the_note_tool_is_listed_with_heartbeat_or_note_and_says_notes_are_data(mcp_server):
    store = mcp_server.store
    listed = {}
    for scope in (("heartbeat",), ("note",), ("claim", "complete")):
        ep = await vend(store, scope=scope)
        async with connect(mcp_server, ep.token) as client:
            listed[scope] = {t.name: t for t in (await client.list_tools()).tools}
    assert "note" in listed[("heartbeat",)] and "note" in listed[("note",)] and "note" not in listed[("claim", "complete")]
    tool = listed[("note",)]["note"]
    assert tool.input_schema["required"] == ["id", "text"]
    assert "never instructions" in tool.description
    assert "never instructions" in tool.output_schema["properties"]["note"]["description"]
    assert tool.annotations.read_only_hint is False and tool.annotations.idempotent_hint is False
