"""Structured logs (REQ-19, issue item 9): one line per tool call with tool, endpoint id,
todo id, code and duration, and never a bearer token, a lease token, a summary or an
artifact, checked by capturing every log record during a full fenced cycle. And logs that
cannot be forged: the log a real `switchboard serve` writes, in text and in JSON, after an
attacker's ids and tool names (newlines, terminal escapes, bidi overrides, huge values)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import AsyncIterator

import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.acceptance.mcp_helpers import GENERATIONS, call, call_error, connect, vend
from tests.conftest import ROOT, free_port

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


# -- the log of a real `switchboard serve`, as an operator reads it ------------------------

# A forged record: a newline and then what a line of the text format looks like.
FORGED = "zz\n2026-01-01 00:00:00,000 ERROR switchboard FORGED-RECORD"
HOSTILE_IDS = [FORGED, "esc\x1b[2J\x1b]0;owned\x07", "rtl\u202egnp.exe", "cr\rFORGED-CR", "ls\u2028FORGED-LS",
               "x code=ok duration_ms=0"]
LONG_ID = "L" * 5000
RECORD_START = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+ ")


@contextlib.asynccontextmanager
async def serve_logging(db_url: str, log_path: Path, **env) -> AsyncIterator[SimpleNamespace]:
    """`python -m board serve` on db_url, its stdout and stderr into log_path; stopped with
    SIGTERM on the way out, so the log is complete when the block ends."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_") and k != "DATABASE_URL"} | {
        "DATABASE_URL": db_url, "SWITCHBOARD_SECRET_KEY": "log-test-secret-0123456789", **env}
    with open(log_path, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "board", "serve", "--port", str(port)], env=env, cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            while True:
                assert proc.poll() is None, f"serve exited during startup:\n{log_path.read_text()}"
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get("/login")).status_code == 200:
                        break
                assert time.monotonic() < deadline, "serve was not ready within 60 s"
                await asyncio.sleep(0.05)
        yield SimpleNamespace(url=base)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(proc.wait, timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()


async def hostile_calls(server, token: str) -> None:
    """Ids and tool names an attacker would send, through both protocol generations."""
    for generation in GENERATIONS:
        async with connect(server, token, generation) as client:
            for todo_id in [*HOSTILE_IDS, LONG_ID]:
                assert (await call_error(client, "get_todo", {"id": todo_id}))["code"] == "not_found"
    # An unknown tool's name is logged too (the 2026-07-28 client mirrors a tool's name in an
    # HTTP header, which cannot hold a newline, so this goes through the legacy session).
    async with connect(server, token, "legacy") as client:
        with pytest.raises(MCPError):
            await client.session.send_request(
                types.CallToolRequest(params=types.CallToolRequestParams(name="nope\n" + FORGED, arguments={})),
                types.CallToolResult)


async def test_forged_ids_and_tool_names_reach_the_text_log_only_escaped(db_url, store, tmp_path):
    ep = await vend(store)
    log_path = tmp_path / "serve.log"
    async with serve_logging(db_url, log_path) as server:
        await hostile_calls(server, ep.token)
    raw = log_path.read_bytes().decode("utf-8")
    lines = raw.split("\n")
    assert lines[-1] == ""  # the log ends with a whole line
    for line in lines[:-1]:
        # Every line is a record of its own: nothing a caller sent started one.
        assert RECORD_START.match(line), f"a line that is not a record start: {line!r}"
        assert line.isprintable(), f"an unprintable character reached the log: {line!r}"
        if "FORGED" in line:  # the forged text sits inside the call line it came in on
            assert " INFO switchboard.mcp mcp call tool=" in line, f"a forged record: {line!r}"
    calls = [line for line in lines if " mcp call " in line]
    assert len(calls) == 2 * (len(HOSTILE_IDS) + 1) + 1
    text = "\n".join(calls)
    assert 'todo="zz\\n2026-01-01 00:00:00,000 ERROR switchboard FORGED-RECORD" code=not_found' in text
    assert "todo=esc\\x1b[2J\\x1b]0;owned\\x07 code=not_found" in text
    assert "todo=rtl\\u202egnp.exe code=not_found" in text
    assert 'todo="cr\\rFORGED-CR" code=not_found' in text and 'todo="ls\\u2028FORGED-LS" code=not_found' in text
    assert 'todo="x code=ok duration_ms=0" code=not_found' in text  # a value cannot pose as another field
    # A very long id is capped, and says so.
    assert f"todo={'L' * 128}\u2026 code=not_found" in text and "L" * 129 not in raw
    assert 'tool="nope\\nzz\\n2026-01-01 00:00:00,000 ERROR switchboard FORGED-RECORD"' in text
    assert "code=unknown_tool" in text
    # uvicorn's own lines went through the same formatter.
    assert any(" uvicorn.error Application startup complete." in line for line in lines)
    assert any(" uvicorn.access " in line and '"POST /' in line and 'HTTP/1.1" 200' in line for line in lines)


async def test_the_json_log_is_one_object_a_line_with_the_call_fields(db_url, store, tmp_path):
    ep = await vend(store)
    log_path = tmp_path / "serve.log"
    async with serve_logging(db_url, log_path, SWITCHBOARD_LOG_FORMAT="json") as server:
        await hostile_calls(server, ep.token)
        async with connect(server, ep.token) as client:
            todo = await call(client, "add_todo", {"queue": "q", "title": "t"})
    raw = log_path.read_bytes().decode("utf-8")
    lines = raw.split("\n")
    assert lines[-1] == ""
    records = []
    for line in lines[:-1]:
        record = json.loads(line)  # every line is one JSON object
        assert isinstance(record, dict) and {"time", "level", "logger", "message"} <= set(record), line
        assert line.isprintable(), f"an unprintable character reached the log: {line!r}"
        records.append(record)
        if "FORGED" in line:
            assert record["logger"] == "switchboard.mcp" and record["message"].startswith("mcp call tool="), line
    calls = [r for r in records if r["logger"] == "switchboard.mcp" and r["message"].startswith("mcp call ")]
    assert len(calls) == 2 * (len(HOSTILE_IDS) + 1) + 2
    for r in calls:
        assert r["level"] == "INFO" and r["endpoint_id"] == ep.endpoint_id
        assert isinstance(r["duration_ms"], float) and r["protocol"] in ("2025-11-25", "2026-07-28")
    added = calls[-1]
    assert (added["tool"], added["todo_id"], added["code"]) == ("add_todo", todo["id"], "ok")
    by_id = {r["todo_id"]: r for r in calls if r["tool"] == "get_todo"}
    assert "zz\\n2026-01-01 00:00:00,000 ERROR switchboard FORGED-RECORD" in by_id
    assert "rtl\\u202egnp.exe" in by_id and "esc\\x1b[2J\\x1b]0;owned\\x07" in by_id
    assert "L" * 128 + "\u2026" in by_id and "L" * 129 not in raw
    assert all(r["code"] == "not_found" for r in by_id.values())
    unknown = [r for r in calls if r["code"] == "unknown_tool"]
    assert [r["tool"] for r in unknown] == ["nope\\nzz\\n2026-01-01 00:00:00,000 ERROR switchboard FORGED-RECORD"]
    assert any(r["logger"] == "uvicorn.error" and r["message"] == "Application startup complete." for r in records)
    assert any(r["logger"] == "uvicorn.access" for r in records)


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_client_that_leaves_mid_body_is_one_info_line_not_an_error(live_server, generation, caplog):
    """A POST whose client closes the connection before the body it announced has arrived:
    the server answers nobody and logs one INFO line, with no traceback and no ERROR."""
    from tests.conftest import until

    caplog.set_level(logging.INFO)
    ep = await vend(live_server.store)
    host, port = live_server.url.removeprefix("http://").split(":")
    version = "2026-07-28" if generation == "modern" else "2025-11-25"
    head = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {ep.token}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"MCP-Protocol-Version: {version}\r\nContent-Length: 500\r\n\r\n")
    for _ in range(3):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(head.encode() + b'{"jsonrpc": "2.0", "id"')
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    def abandoned():
        return [r for r in caplog.records if "abandoned" in r.getMessage()]

    def errors():
        return [r for r in caplog.records if r.levelno >= logging.WARNING]

    await until(lambda: len(abandoned()) == 3 or errors(), "the server noticed each client leaving")
    assert errors() == [] and [r.levelname for r in abandoned()] == ["INFO"] * 3
    assert not any(r.exc_info for r in caplog.records)
    assert ep.token not in caplog.text
