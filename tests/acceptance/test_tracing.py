"""Traces (docs/tracing.md) through the SDK's in-memory exporter: a server in this process
exports every span to it, and agents call it over HTTP with the MCP SDK's clients (which carry
their trace in `_meta`), the TypeScript SDK's (a traceparent header), a bare HTTP client, and
`switchboard work`. Each attempt is one span from its claim to its close in the claim's trace;
the calls' and the statements' spans are the instrumentations'; nothing secret is in any span.
tests/acceptance/test_tracing_otlp.py has a real `switchboard serve` export over OTLP/HTTP."""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from board.config import Settings
from board.ops.tracing import Tracing, attempt_span_id, new_provider
from tests.acceptance.mcp_helpers import GENERATIONS, connect, vend
from tests.acceptance.third_party import ok, ts_client
from tests.acceptance.worker_helpers import WorkerProcess
from tests.conftest import create_database, drop_database, run_server, sql_rows, until

EXPORTED = InMemorySpanExporter()
PSYCOPG = "opentelemetry.instrumentation.psycopg"
MCP_SDK = "mcp-python-sdk"


@pytest.fixture(scope="module")
async def traced(pg_admin_url, template_url):
    """One server exporting to EXPORTED as each span ends. Its provider is the process's
    global one from here on (the MCP SDK's spans go there); its exporter is shut down at the
    end, so later tests' spans go nowhere."""
    provider = new_provider(EXPORTED, batch=False)
    name, url = create_database(pg_admin_url)
    settings = Settings(database_url=url, secret_key="test-secret-key-0123456789", reaper_interval_seconds=0,
                        retry_interval_seconds=0.2, retention_interval_seconds=0, doorbell_heartbeat_seconds=0)
    try:
        async with run_server(settings, tracing=Tracing(provider)) as server:
            yield server
    finally:
        EXPORTED.shutdown()  # the processor stays, quietly handing spans to a stopped exporter
        drop_database(pg_admin_url, name)


def spans():
    return EXPORTED.get_finished_spans()


def attempt_spans(todo_id: str) -> list:
    return [s for s in spans() if s.name == "attempt" and s.attributes["switchboard.todo.id"] == todo_id]


async def attempt_span(todo_id: str, seq: int = 1):
    """The attempt's span once its close has emitted it."""
    await until(lambda: any(s.attributes["switchboard.attempt.seq"] == seq for s in attempt_spans(todo_id)),
                f"the span of attempt {seq} of {todo_id}")
    return next(s for s in attempt_spans(todo_id) if s.attributes["switchboard.attempt.seq"] == seq)


def server_call_span(trace_id: int, tool: str):
    """The MCP SDK's span of one tools/call in the trace."""
    found = [s for s in spans() if s.context.trace_id == trace_id and s.name == f"tools/call {tool}"
             and s.kind == trace.SpanKind.SERVER]
    assert len(found) == 1, [s.name for s in spans() if s.context.trace_id == trace_id]
    return found[0]


def nanoseconds(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000) * 1000


def traceparent(trace_id: int, span_id: int, flags: int = 1) -> str:
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def traceparent_of(span) -> str:
    return traceparent(span.context.trace_id, span.context.span_id, int(span.context.trace_flags))


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_an_attempt_is_one_span_from_its_claim_to_its_close_in_the_trace_the_agent_sent(traced, generation):
    """The agent's client carries its trace in `_meta` (the MCP SDK does): the claim's call
    continues it, the attempt's span is the claim call's child from claimed_at to ended_at with
    the todo, queue, attempt, outcome and agent, linked to the complete call's span, and the
    claim's result hands out the attempt's traceparent in `_meta`. The statements of the claim
    are spans under its call."""
    ep = await vend(traced.store, agent_id="tracer-agent", queues=("traced-q",))
    agent_tracer = trace.get_tracer("test-agent")
    async with connect(traced, ep.token, generation) as client:
        added = (await client.call_tool("add_todo", {"queue": "traced-q", "title": "t"})).structured_content
        with agent_tracer.start_as_current_span("agent loop") as loop:
            claimed = await client.call_tool("claim_next", {"require_fence": True})
            token = claimed.structured_content["lease_token"]
            beat = await client.call_tool("heartbeat", {"id": added["id"], "lease_token": token})
            complete = await client.call_tool("complete", {"id": added["id"], "lease_token": token})
        assert not beat.is_error and not complete.is_error
    trace_id = loop.get_span_context().trace_id

    span = await attempt_span(added["id"])
    claim_call = server_call_span(trace_id, "claim_next")
    assert span.context.trace_id == trace_id
    assert span.parent.span_id == claim_call.context.span_id
    assert span.context.span_id == attempt_span_id(trace_id, added["id"], 1)
    assert claimed.meta["traceparent"] == traceparent_of(span)
    assert dict(span.attributes) == {
        "switchboard.todo.id": added["id"], "switchboard.queue": "traced-q", "switchboard.attempt.seq": 1,
        "switchboard.attempt.number": 1, "switchboard.attempt.outcome": "completed",
        "switchboard.attempt.disposition": "done", "switchboard.attempt.died": False,
        "switchboard.attempt.claimer": "endpoint", "switchboard.endpoint.id": ep.endpoint_id,
        "switchboard.agent.id": "tracer-agent"}
    [row] = await sql_rows(traced.runtime.database_url,
                           "SELECT claimed_at, ended_at FROM attempts WHERE todo_id = %s", (added["id"],))
    assert (span.start_time, span.end_time) == (nanoseconds(row["claimed_at"]), nanoseconds(row["ended_at"]))
    assert [link.context.span_id for link in span.links] == [server_call_span(trace_id, "complete").context.span_id]
    statements = [s for s in spans() if s.instrumentation_scope.name == PSYCOPG
                  and s.parent is not None and s.parent.span_id == claim_call.context.span_id]
    assert statements and all(s.context.trace_id == trace_id for s in statements)
    assert any("INSERT INTO attempts" in s.attributes.get("db.statement", "") for s in statements)


async def test_a_failed_attempt_and_a_reaped_one_end_their_spans_in_error(traced):
    """fail closes failed/retry_scheduled; a lease left to lapse is closed by the reaper, in
    no call at all, and its span still lands in the claim's trace."""
    ep = await vend(traced.store, queues=("reaped-q",))
    async with connect(traced, ep.token) as client:
        failed = (await client.call_tool("add_todo", {"queue": "reaped-q", "title": "f"})).structured_content
        await client.call_tool("claim", {"id": failed["id"]})
        await client.call_tool("fail", {"id": failed["id"]})
        lapsed = (await client.call_tool("add_todo", {"queue": "reaped-q", "title": "r"})).structured_content
        with trace.get_tracer("test-agent").start_as_current_span("agent") as agent:
            await client.call_tool("claim", {"id": lapsed["id"], "lease_seconds": 1})
    span = await attempt_span(failed["id"])
    assert (span.attributes["switchboard.attempt.outcome"], span.attributes["switchboard.attempt.disposition"]) \
        == ("failed", "retry_scheduled")
    assert span.status.status_code == trace.StatusCode.ERROR
    assert await traced.store.sweep_reap(now=datetime.now(timezone.utc) + timedelta(seconds=30)) >= 1
    span = await attempt_span(lapsed["id"])
    assert span.attributes["switchboard.attempt.outcome"] == "reaped" and span.attributes["switchboard.attempt.died"]
    assert span.context.trace_id == agent.get_span_context().trace_id
    assert span.status.status_code == trace.StatusCode.ERROR


async def test_a_traceparent_header_is_continued_by_the_board_and_by_a_session_of_the_typescript_client(traced):
    """No `_meta` from this client: the header's trace is the request's, and the 2025-11-25
    session's calls, handled in the session's task, are children of their own requests."""
    trace_id, parent = secrets.randbits(128), secrets.randbits(64)
    async with httpx.AsyncClient(base_url=traced.url) as http:
        assert (await http.get("/login", headers={"traceparent": traceparent(trace_id, parent)})).status_code == 200
    [login] = [s for s in spans() if s.context.trace_id == trace_id]
    assert (login.name, login.parent.span_id) == ("GET /login", parent)

    ep = await vend(traced.store, queues=("ts-q",))
    trace_id, parent = secrets.randbits(128), secrets.randbits(64)
    headers = {"traceparent": traceparent(trace_id, parent)}
    async with ts_client(traced, ep.token, headers=headers) as client:
        assert client.info["protocolVersion"] == "2025-11-25"
        added = ok(await client.call_tool("add_todo", {"queue": "ts-q", "title": "t"}))
        claimed = await client.call_tool("claim_next", {"require_fence": True})
        claim = ok(claimed)  # the TypeScript SDK validated the result, its `_meta` with it
        ok(await client.call_tool("complete", {"id": added["id"], "lease_token": claim["lease_token"]}))
    claim_call = server_call_span(trace_id, "claim_next")
    request = next(s for s in spans() if s.context.span_id == claim_call.parent.span_id)
    assert (request.name, request.parent.span_id) == ("POST /mcp", parent)
    span = await attempt_span(added["id"])
    assert (span.context.trace_id, span.parent.span_id) == (trace_id, claim_call.context.span_id)
    assert claimed["_meta"]["traceparent"] == traceparent_of(span)


async def test_switchboard_work_gives_its_command_the_attempts_traceparent(traced, tmp_path):
    """A real `switchboard work` whose command prints $TRACEPARENT: the attempt's span id, in
    the trace of the worker's claim."""
    ep = await vend(traced.store, queues=("work-q",))
    async with connect(traced, ep.token) as client:
        added = (await client.call_tool("add_todo", {"queue": "work-q", "title": "t"})).structured_content
    script = tmp_path / "print_traceparent.py"
    script.write_text('import os, json\nprint(json.dumps({"traceparent": os.environ.get("TRACEPARENT")}))\n')
    worker = WorkerProcess(traced.url, ep.token, ["python3", str(script)], "--queue", "work-q", "--max-todos", "1")
    try:
        assert await worker.wait() == 0, worker.output
    finally:
        worker.kill()
    span = await attempt_span(added["id"])
    [todo] = await sql_rows(traced.runtime.database_url, "SELECT result FROM todos WHERE id = %s", (added["id"],))
    assert todo["result"] == {"traceparent": traceparent_of(span)}


async def test_no_span_carries_a_title_payload_summary_artifact_note_query_or_token(traced):
    """Every secret an agent or a person hands the server, in every place it can go, and then
    every span exported so far, its name, attributes, events, links and status, searched."""
    ep = await vend(traced.store, queues=("secret-q",))
    planted = {name: f"{name}-{secrets.token_hex(8)}" for name in ("title", "payload", "summary", "note", "query")}
    planted["artifact"] = f"https://example.com/{secrets.token_hex(8)}"
    async with connect(traced, ep.token, "legacy") as client:
        added = (await client.call_tool("add_todo", {"queue": "secret-q", "title": planted["title"],
                                                      "payload": {"k": planted["payload"]}})).structured_content
        claimed = (await client.call_tool("claim", {"id": added["id"], "require_fence": True})).structured_content
        planted["lease_token"] = claimed["lease_token"]
        await client.call_tool("note", {"id": added["id"], "text": planted["note"],
                                        "lease_token": claimed["lease_token"]})
        await client.call_tool("complete", {"id": added["id"], "lease_token": claimed["lease_token"],
                                            "summary": planted["summary"], "artifact": planted["artifact"],
                                            "result": {"r": planted["payload"]}})
        await client.call_tool("get_todo", {"id": added["id"]})
    async with httpx.AsyncClient(base_url=traced.url) as http:
        await http.get("/", params={"q": planted["query"]}, headers={"authorization": f"Bearer {ep.token}"})
    planted["bearer"] = ep.token
    await attempt_span(added["id"])

    def text_of(span) -> str:
        parts = [span.name, span.status.description or ""]
        parts += [json.dumps(list(span.attributes.values()), default=str)]
        for event in span.events:
            parts += [event.name, json.dumps(list(event.attributes.values()), default=str)]
        for link in span.links:
            parts += [json.dumps(list((link.attributes or {}).values()), default=str)]
        return "\n".join(parts)

    everything = "\n".join(text_of(s) for s in spans())
    assert "secret-q" in everything  # the search does see the spans of this test
    assert {name: value for name, value in planted.items() if value in everything} == {}
