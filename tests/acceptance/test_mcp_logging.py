"""Structured logs (REQ-19, issue item 9): one line per tool call with tool, endpoint id,
todo id, code and duration, and never a bearer token, a lease token, a summary or an
artifact, checked by capturing every log record during a full fenced cycle."""

from __future__ import annotations

import logging

import pytest

from tests.acceptance.mcp_helpers import GENERATIONS, call, call_error, connect, vend

SUMMARY = "summary-canary-7f3a tests still red"
ARTIFACT = "mcp://cairn/artifactCanary7f3a"
RESULT_NOTE = "result-canary-7f3a"


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_full_fenced_cycle_logs_no_token_summary_or_artifact(live_server, generation, caplog):
    store = live_server.store
    ep = await vend(store)
    caplog.set_level(logging.DEBUG)  # every logger, the SDK's server side included
    async with connect(live_server, ep.token, generation) as client:
        todo = await call(client, "add_todo", {"queue": "q", "title": "t"})
        claim = await call(client, "claim_next", {"require_fence": True, "claimant": "run-1"})
        lease_token = claim["lease_token"]
        await call(client, "heartbeat", {"id": todo["id"], "lease_token": lease_token})
        await call_error(client, "complete", {"id": todo["id"], "lease_token": "wrong-" + lease_token[:8]})
        await call(client, "fail", {"id": todo["id"], "lease_token": lease_token, "summary": SUMMARY,
                                    "artifact": ARTIFACT, "result": {"note": RESULT_NOTE}})
        await call(client, "get_todo", {"id": todo["id"]})
    # The client runs in this process too; its own DEBUG lines (mcp.client.*, httpx2, httpcore2)
    # echo what it sends and are not the server's logs.
    client_side = ("mcp.client", "httpx2", "httpcore2")
    server_records = [r for r in caplog.records if not r.name.startswith(client_side)]
    text = "\n".join(f"{r.name} {r.getMessage()} {r.__dict__}" for r in server_records)
    for secret in (ep.token, lease_token, SUMMARY, "summary-canary", ARTIFACT, "artifactCanary", RESULT_NOTE):
        assert secret not in text, f"{secret!r} was logged"

    calls = [r for r in caplog.records if r.name == "switchboard.mcp" and r.getMessage().startswith("mcp call")]
    assert [(r.tool, r.code) for r in calls] == [
        ("add_todo", "ok"), ("claim_next", "ok"), ("heartbeat", "ok"), ("complete", "conflict"), ("fail", "ok"),
        ("get_todo", "ok")]
    for r in calls:
        assert r.endpoint_id == ep.endpoint_id and r.todo_id == todo["id"]
        assert isinstance(r.duration_ms, float) and r.duration_ms >= 0
        assert f"tool={r.tool} endpoint={ep.endpoint_id} todo={todo['id']} code={r.code}" in r.getMessage()


async def test_each_call_is_counted_in_metrics_by_tool_and_code(live_server):
    import httpx2

    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        todo = await call(client, "add_todo", {"queue": "q", "title": "t"})
        await call_error(client, "complete", {"id": todo["id"]})
    async with httpx2.AsyncClient() as http:
        text = (await http.get(live_server.url + "/metrics")).text
    assert 'switchboard_mcp_call_duration_seconds_count{code="ok",tool="add_todo"} 1.0' in text
    assert 'switchboard_mcp_call_duration_seconds_count{code="conflict",tool="complete"} 1.0' in text
    assert todo["id"] not in text and ep.endpoint_id not in text
