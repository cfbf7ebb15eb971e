"""SIGTERM to a `switchboard serve` with a call in flight: /readyz answers 503 "draining" at
once while the process serves on for SWITCHBOARD_SHUTDOWN_DELAY_SECONDS (a second signal
skips the rest), then it stops accepting, ends its MCP listen stream, and the call in
flight completes before the process exits, within its grace."""

from __future__ import annotations

import asyncio
import signal
import socket
import time

import httpx

from tests.faults import harness as h

DEADLINE = 30.0


async def until(what: str, check, timeout: float = DEADLINE):
    """Poll `check` (async) until it returns something true; returns that."""
    deadline = time.monotonic() + timeout
    while not (found := await check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.02)
    return found


async def readyz(url: str) -> tuple[int, str] | None:
    try:
        async with httpx.AsyncClient(base_url=url, timeout=5) as client:
            r = await client.get("/readyz")
            return r.status_code, r.text
    except httpx.HTTPError:
        return None


async def refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


async def test_sigterm_with_a_call_in_flight_says_draining_stops_accepting_ends_listen_and_completes_the_call(
        db_url, store, size, tmp_path):
    started = time.monotonic()
    token, agent = await h.vend(store)
    [todo_id] = await h.add_todos(store, agent, 1)
    server = h.ServerProcess(db_url, tmp_path / "server.log", SWITCHBOARD_SHUTDOWN_DELAY_SECONDS="600")
    await server.start()
    try:
        async with h.mcp_client(server.url, token) as client, h.mcp_client(server.url, token) as listener, \
                await h.reader(db_url) as locker:
            claim = (await client.call_tool("claim_next", {"require_fence": True})).structured_content
            assert claim["todo"]["id"] == todo_id
            async with listener.listen(resource_subscriptions=["switchboard://todos"]) as sub:
                listening = asyncio.create_task(anext(aiter(sub), None))
                async with locker.transaction():  # the todo's row locked: its complete waits in the server
                    await locker.execute("SELECT 1 FROM todos WHERE id = %s FOR UPDATE", (todo_id,))
                    complete = asyncio.create_task(client.call_tool("complete", {
                        "id": todo_id, "lease_token": claim["lease_token"], "summary": "finished during a stop"}))
                    await until("the complete waiting on the row lock", lambda: h.rows(
                        locker, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                "AND wait_event_type = 'Lock'"))
                    server.proc.send_signal(signal.SIGTERM)
                    assert await until("/readyz answering 503", lambda: _draining(server.url)) == (503, "draining\n")
                    assert not listening.done(), "the listen stream ended before the process stopped serving"
                    server.proc.send_signal(signal.SIGTERM)  # skips the rest of the delay: it stops now
                    await until("the port refusing connections", lambda: refused(server.port))
                    # Ended, normally or as lost (either way its client listens again, elsewhere).
                    await asyncio.wait({listening}, timeout=DEADLINE)
                    assert listening.done(), "the listen stream was not ended when the process stopped"
                    assert not complete.done() and server.proc.poll() is None, "the call in flight was cut off"
                result = await asyncio.wait_for(complete, DEADLINE)
            assert not result.is_error, h.error_of(result)
            assert result.structured_content["state"] == "done"
        code = await asyncio.to_thread(server.proc.wait, DEADLINE)
    finally:
        server.kill()
    log = server.log_text()
    assert code in (0, -signal.SIGTERM), server.log_tail()
    assert "draining: /readyz answers 503" in log and "graceful shutdown exceeded" not in log
    await h.check_invariants(db_url, todos=1, drained=True)
    h.report("SIGTERM with a call in flight", size, seconds=round(time.monotonic() - started, 1))


async def _draining(url: str) -> tuple[int, str] | None:
    answer = await readyz(url)
    return answer if answer and answer[0] != 200 else None
