"""A2A push notifications through a real `switchboard serve`: an A2A client (the A2A Python
SDK's) sends a message with a push notification config naming a receiver (a real HTTP server
here), a worker (a real MCP client) claims and completes it, and the receiver gets
submitted, working and completed, each signed like a notify hook and carrying the config's
token. The completed push is committed while the receiver refuses it; the server is then
killed (SIGKILL) before it can deliver, started again, and the push arrives, signed, under
the event id it was first tried with."""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from board.ops.hooks import verify
from tests.conftest import until
from tests.faults import harness as h

SECRET = "a2a-push-secret-for-tests"
TOKEN = "receiver-token-1"


class PushReceiver:
    """A local HTTP receiver: records every POST, answering 503 while `refusing`."""

    def __init__(self) -> None:
        self.refusing = False
        self.requests: list[tuple[dict, bytes, int]] = []  # headers, body, the status answered
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                status = 503 if receiver.refusing else 200
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, body, status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/a2a-push"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "PushReceiver":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def taken(self, state: int) -> list[tuple[dict, bytes]]:
        """The pushes of that A2A state answered 200."""
        return [(headers, body) for headers, body, status in self.requests
                if status == 200 and _update(body).status.state == state]

    def refused(self, state: int) -> list[dict]:
        return [headers for headers, body, status in self.requests
                if status != 200 and _update(body).status.state == state]


def _update(body: bytes) -> pb.TaskStatusUpdateEvent:
    return json_format.ParseDict(json.loads(body), pb.StreamResponse()).status_update


@contextlib.asynccontextmanager
async def a2a_client(url: str, token: str):
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30.0) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create_from_url(url)
        try:
            yield client
        finally:
            await client.close()


async def test_a_push_committed_before_a_kill_9_arrives_signed_after_the_restart(db_url, store, tmp_path):
    token, _ = await h.vend(store, queues=("builds",))
    server = h.ServerProcess(db_url, tmp_path / "server.log", SWITCHBOARD_HOOK_SECRET=SECRET,
                             SWITCHBOARD_HOOK_POLL_SECONDS="0.1", SWITCHBOARD_HOOK_RETRY_BASE_SECONDS="0.2",
                             SWITCHBOARD_HOOK_RETRY_MAX_SECONDS="0.5")
    await server.start()
    with PushReceiver() as receiver:
        try:
            async with httpx.AsyncClient() as http:
                card = (await http.get(server.url + "/.well-known/agent-card.json")).json()
            assert card["capabilities"]["pushNotifications"] is True
            async with a2a_client(server.url, token) as client:
                sent = pb.SendMessageRequest(
                    message=pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER,
                                       parts=[pb.Part(text="Build release 7")]),
                    configuration=pb.SendMessageConfiguration(
                        return_immediately=True,
                        task_push_notification_config=pb.TaskPushNotificationConfig(url=receiver.url, token=TOKEN)))
                [response] = [r async for r in client.send_message(sent)]
                task_id = response.task.id
            await until(lambda: receiver.taken(pb.TASK_STATE_SUBMITTED), "the submitted push", timeout=30)
            async with h.mcp_client(server.url, token) as mcp:
                claimed = (await mcp.call_tool("claim_next", {})).structured_content
                assert claimed["todo"]["id"] == task_id
                await until(lambda: receiver.taken(pb.TASK_STATE_WORKING), "the working push", timeout=30)
                receiver.refusing = True
                done = await mcp.call_tool("complete", {"id": task_id, "summary": "built"})
                assert not done.is_error
            # committed and tried once, refused: the server dies before it is delivered
            await until(lambda: receiver.refused(pb.TASK_STATE_COMPLETED), "a refused completed push", timeout=30)
            server.kill()
            receiver.refusing = False
            await server.start()
            await until(lambda: receiver.taken(pb.TASK_STATE_COMPLETED), "the completed push after the restart",
                        timeout=60)
        finally:
            await server.stop()
    taken = [receiver.taken(s) for s in (pb.TASK_STATE_SUBMITTED, pb.TASK_STATE_WORKING, pb.TASK_STATE_COMPLETED)]
    assert [len(t) for t in taken] == [1, 1, 1]  # each delivered once, none lost
    for [(headers, body)] in taken:
        assert verify(SECRET, headers["x-switchboard-signature"], body)
        assert not verify("another-secret", headers["x-switchboard-signature"], body)
        assert headers["x-a2a-notification-token"] == TOKEN
        assert _update(body).task_id == task_id
    [(completed, _)] = taken[2]
    assert completed["x-switchboard-event-id"] == receiver.refused(pb.TASK_STATE_COMPLETED)[0]["x-switchboard-event-id"]
    timestamps = [_update(body).status.timestamp.ToDatetime() for [(_, body)] in taken]
    assert timestamps == sorted(timestamps)
