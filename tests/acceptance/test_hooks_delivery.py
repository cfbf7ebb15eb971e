"""Notify hooks end to end: a running server delivers to a local HTTP receiver, and events
committed while no server was delivering arrive after a restart."""

from __future__ import annotations

import asyncio
import contextlib
import json

import uvicorn

from board.ops.hooks import verify
from tests.conftest import free_port, make_agent, run_server, sql_rows

SECRET = "receiver-secret"


class Receiver:
    """A real HTTP server on loopback that records hook POSTs."""

    def __init__(self, fail_first: int = 0):
        self.fail_first = fail_first
        self.received: list[tuple[dict, bytes]] = []
        self.port = free_port()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/hook"

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.received.append((headers, body))
        status = 500 if len(self.received) <= self.fail_first else 204
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    @contextlib.asynccontextmanager
    async def running(self):
        server = uvicorn.Server(uvicorn.Config(self, host="127.0.0.1", port=self.port, log_level="warning"))
        task = asyncio.create_task(server.serve())
        deadline = asyncio.get_running_loop().time() + 30
        while not server.started:
            if task.done():
                task.result()  # it failed to start: say why
            assert asyncio.get_running_loop().time() < deadline, "the receiver did not start within 30 s"
            await asyncio.sleep(0.01)
        try:
            yield self
        finally:
            server.should_exit = True
            await task

    def events(self):
        return [json.loads(b) for _, b in self.received]


async def wait_for(predicate, timeout=30.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, f"not met within {timeout} s"
        await asyncio.sleep(0.05)


async def tried(db_url: str, todo_id: str) -> bool:
    rows = await sql_rows(db_url, "SELECT tries, delivered_at FROM hook_events WHERE todo_id = %s", (todo_id,))
    return bool(rows) and rows[0]["tries"] >= 1 and rows[0]["delivered_at"] is None


async def test_events_committed_before_a_restart_are_delivered_after_it(server_settings):
    receiver = Receiver(fail_first=2)
    settings = server_settings.with_(hook_urls=(receiver.url,), hook_secret=SECRET, hook_poll_seconds=0.1,
                                     hook_retry_base_seconds=0.05, hook_retry_max_seconds=0.2)
    # The first server commits a transition while the receiver is down, then stops.
    async with run_server(settings) as srv:
        agent = await make_agent(srv.store)
        first = await srv.store.todo_add(agent, queue="q", title="before the restart")
        # delivery tries and fails: nobody is listening
        await wait_for(lambda: tried(settings.database_url, first["id"]))
    async with receiver.running(), run_server(settings) as srv:
        second = await srv.store.todo_add(agent, queue="q", title="after the restart")
        async def both_delivered():
            return {e["todo"]["id"] for e in receiver.events() if e["event"] == "todo.ready"} >= {
                first["id"], second["id"]}

        await wait_for(both_delivered)
    for headers, body in receiver.received:
        assert verify(SECRET, headers["x-switchboard-signature"], body)
    delivered = [e for e in receiver.events() if e["todo"]["id"] == first["id"]]
    assert len({e["id"] for e in delivered}) == 1  # one event id however often it was tried
