"""An agent asks and a human answers, through the official TypeScript SDK client (what most
agent hosts embed), which validates every result's structured content against the tool's
output schema and throws on a mismatch: interrupt with a question and choices, a subscription
to the todo's URI that the Board answer rings, resume with the answers, and get_todo and a
claim carrying question, answer and expired notes and the attempt's question.

The TypeScript SDK (1.32) speaks protocol 2025-11-25 only (a session with a GET stream); the
2026-07-28 generation is covered through the Python SDK (test_mcp_questions.py)."""

from __future__ import annotations

import time

import pytest

from board.config import Settings
from tests.acceptance.mcp_helpers import doorbell, vend, wait_until
from tests.acceptance.test_mcp_questions import RING_BOUND, answer_on_the_board, same_answers, uri, wait_for_state
from tests.acceptance.test_board_auth import make_human
from tests.acceptance.third_party import ok, tool_error, ts_client
from tests.conftest import create_database, drop_database, run_server


@pytest.fixture(scope="module")
async def ts_questions_server(pg_admin_url, template_url):
    """The question sweep every 0.2 s (an expiry of 1 s releases its todo within the test)."""
    name, url = create_database(pg_admin_url)
    settings = Settings(database_url=url, secret_key="test-secret-key-0123456789", reaper_interval_seconds=0.2,
                        retry_interval_seconds=0.2, retention_interval_seconds=0, doorbell_heartbeat_seconds=0)
    try:
        async with run_server(settings) as server:
            yield server
    finally:
        drop_database(pg_admin_url, name)


async def test_the_typescript_client_reads_the_question_arguments_and_the_answers_schema(ts_questions_server):
    ep = await vend(ts_questions_server.store)
    async with ts_client(ts_questions_server, ep.token) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        instructions = client.info["instructions"]
    assert "interrupt with a question" in instructions and "resume" in instructions
    interrupt, resume = tools["interrupt"], tools["resume"]
    assert set(interrupt["inputSchema"]["properties"]) == {"id", "state", "question", "choices",
                                                           "expires_in_seconds", "lease_token"}
    assert interrupt["inputSchema"]["properties"]["choices"]["maxItems"] == 10
    assert "question" in interrupt["outputSchema"]["properties"]
    assert "answers" in resume["outputSchema"]["required"]
    assert "owning human" in resume["outputSchema"]["properties"]["answers"]["description"]
    note = tools["get_todo"]["outputSchema"]["properties"]["attempts"]["items"]["properties"]["notes"]["items"]
    assert note["properties"]["kind"]["enum"] == ["working", "question", "answer", "expired"]
    assert "system" in note["properties"]["author_kind"]["enum"]


async def test_a_question_answered_on_the_board_rings_the_typescript_client_and_resume_returns_it(
        ts_questions_server):
    server = ts_questions_server
    human = await make_human(server.store, "tsada")
    ep = await vend(server.store, user_id=human.user_id)
    before = doorbell(server).live_doorways(ep.endpoint_id)
    async with ts_client(server, ep.token) as client:
        assert client.info["protocolVersion"] == "2025-11-25"
        await wait_until(lambda: doorbell(server).live_doorways(ep.endpoint_id) > before)  # its GET stream is open

        async def call(tool, args):
            return ok(await client.call_tool(tool, args))

        todo = await call("add_todo", {"queue": "q", "title": "deploy 412"})
        claim = await call("claim", {"id": todo["id"], "require_fence": True, "lease_seconds": 600})
        fence = {"id": todo["id"], "lease_token": claim["lease_token"]}
        await client.request("subscribe", uri=uri(todo["id"]))
        asked = await call("interrupt", {**fence, "question": "Ship it now?",
                                         "choices": ["yes", "not yet"], "expires_in_seconds": 3600})
        assert asked["state"] == "input_required"
        assert asked["question"]["choices"] == ["yes", "not yet"] and asked["question"]["expires_at"]
        conflict = tool_error(await client.call_tool("interrupt", {**fence, "question": "again?"}))
        assert conflict["code"] == "conflict"
        bad = tool_error(await client.call_tool("interrupt", {**fence, "question": "?",
                                                              "choices": [str(i) for i in range(11)]}))
        assert (bad["code"], bad["argument"]) == ("invalid", "choices")

        waiting = await call("get_todo", {"id": todo["id"]})
        [attempt] = waiting["attempts"]
        assert attempt["notes"][0]["kind"] == "question" and attempt["question"]["current"] is True

        seen = (await client.request("updated")).count(uri(todo["id"]))
        began, _ = await answer_on_the_board(server, "tsada", todo["id"], choice="yes")
        began_wall = time.time() - (time.monotonic() - began)
        heard = await client.request("waitUpdated", uri=uri(todo["id"]), seen=seen,
                                     timeoutMs=int((RING_BOUND + 5) * 1000))
        latency = heard["heardAt"] / 1000 - began_wall
        print(f"\n[typescript, 2025-11-25] answer posted -> ring heard: {latency:.3f} s (wall clocks, ms precision)")
        assert latency < RING_BOUND

        resumed = await call("resume", fence)
        assert [(a["text"], a["choice"], a["who"]) for a in resumed["answers"]] == [("yes", "yes", "tsada")]
        answered = await call("get_todo", {"id": todo["id"]})
        notes = answered["attempts"][0]["notes"]
        assert [(n["kind"], n["author_kind"]) for n in notes] == [("answer", "owner"), ("question", "endpoint")]
        assert same_answers(answered["attempts"][0]["question"]["answers"], resumed["answers"])
        # resume with no answer since the interrupt: an empty list, still valid.
        await call("interrupt", fence)
        assert (await call("resume", fence))["answers"] == []


async def test_an_expired_question_passes_the_typescript_client_s_schema_check(ts_questions_server):
    """get_todo with the system's expired note, and the next claim's prior attempt with the
    question and its expired_at."""
    server = ts_questions_server
    ep = await vend(server.store)
    async with ts_client(server, ep.token) as client:
        async def call(tool, args):
            return ok(await client.call_tool(tool, args))

        todo = await call("add_todo", {"queue": "q", "title": "approve"})
        await call("claim", {"id": todo["id"], "lease_seconds": 600})
        await call("interrupt", {"id": todo["id"], "question": "Approve?", "expires_in_seconds": 1})
        await wait_for_state(server, todo["id"], "pending")
        got = await call("get_todo", {"id": todo["id"]})
        [attempt] = got["attempts"]
        assert [(n["kind"], n["author_kind"]) for n in attempt["notes"]] == [("expired", "system"),
                                                                            ("question", "endpoint")]
        assert attempt["question"]["expired_at"] and attempt["question"]["current"] is False
        claim = await call("claim_next", {"lease_seconds": 600})
    assert claim["todo"]["id"] == todo["id"]
    assert claim["prior_attempts"][0]["question"]["text"] == "Approve?"
    assert claim["prior_attempts"][0]["notes"][0]["kind"] == "expired"
