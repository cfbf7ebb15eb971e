"""Notify hooks end to end: a running server delivers to a local HTTP receiver, and events
committed while no server was delivering arrive after a restart."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import datetime

import uvicorn

from board.ops.hooks import verify
from board.store.vocabulary import VERBS
from tests.conftest import free_port, make_agent, make_user, run_server, sql_rows

SECRET = "receiver-secret"


class Receiver:
    """A real HTTP server on loopback that records hook POSTs."""

    def __init__(self, fail_first: int = 0, refuse_once: tuple[str, ...] = ()):
        self.fail_first = fail_first
        self.refuse_once = refuse_once  # event names whose first delivery is answered 500
        self.refused: set[str] = set()
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
        event_id = headers.get("x-switchboard-event-id", "")
        if headers.get("x-switchboard-event") in self.refuse_once and event_id not in self.refused:
            self.refused.add(event_id)
            status = 500
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


async def test_a_question_reaches_the_receiver_signed_again_after_a_refusal_and_carries_no_token(server_settings):
    receiver = Receiver(refuse_once=("todo.input_required",))
    settings = server_settings.with_(hook_urls=(receiver.url,), hook_secret=SECRET, hook_poll_seconds=0.1,
                                     hook_retry_base_seconds=0.05, hook_retry_max_seconds=0.2,
                                     public_url="https://board.example.com")
    async with receiver.running(), run_server(settings) as srv:
        store = srv.store
        ada = await make_user(store, "ada")
        _, bearer = await store.endpoint_vend(ada.user_id, name="deployer", agent_id="deployer", queues=["ops"],
                                              scope=list(VERBS))
        agent = await store.endpoint_authenticate(bearer)
        todo = await store.todo_add(agent, queue="ops", title="deploy the release")
        claimed = await store.todo_claim(agent, todo["id"], require_fence=True)
        lease_token = claimed["lease_token"]
        asked = await store.todo_interrupt(agent, todo["id"], question="Ship it to production?",
                                           choices=["ship", "hold"], expires_in_seconds=3600,
                                           lease_token=lease_token)

        def asking():
            return [(h, b) for h, b in receiver.received if h.get("x-switchboard-event") == "todo.input_required"]

        async def delivered():
            rows = await sql_rows(settings.database_url, "SELECT delivered_at FROM hook_events "
                                  "WHERE event = 'todo.input_required'")
            return len(asking()) >= 2 and rows[0]["delivered_at"] is not None

        await wait_for(delivered)
    tries = asking()
    assert len(tries) == 2  # refused once, then accepted: at least once, and no more after the 2xx
    bodies = [json.loads(body) for _, body in tries]
    assert tries[0][0]["x-switchboard-event-id"] == tries[1][0]["x-switchboard-event-id"] == bodies[0]["id"] \
        == bodies[1]["id"]
    for headers, body in tries:
        assert verify(SECRET, headers["x-switchboard-signature"], body)
        assert not verify("another-secret", headers["x-switchboard-signature"], body)
        assert not verify(SECRET, headers["x-switchboard-signature"], body.replace(b"ship", b"shop"))
    event = bodies[1]
    assert event["event"] == "todo.input_required"
    assert event["todo"]["id"] == todo["id"] and event["todo"]["state"] == "input_required"
    assert event["todo"]["queue"] == "ops" and event["todo"]["title"] == "deploy the release"
    assert event["question"]["text"] == "Ship it to production?"
    assert event["question"]["choices"] == ["ship", "hold"]
    assert datetime.fromisoformat(event["question"]["expires_at"]) == asked["question"]["expires_at"]
    assert event["board_url"] == f"https://board.example.com/todos/{todo['id']}"
    # Neither the endpoint's bearer token nor the attempt's lease token, nor an authorization header.
    for headers, body in tries:
        assert "authorization" not in headers
        for token in (bearer, lease_token):
            assert token not in body.decode()
            assert not any(token in f"{k}: {v}" for k, v in headers.items())
