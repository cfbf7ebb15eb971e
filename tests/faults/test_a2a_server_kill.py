"""kill -9 of `switchboard serve` while an A2A client streams a task: the client's stream
breaks, the task moves on while the server is down, the server comes back on its port, the
client resubscribes (SubscribeToTask) and its first event is the state it missed; it then
follows the task to completed. Across both streams it sees submitted, working, completed."""

from __future__ import annotations

import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from tests.acceptance.test_a2a import state_of
from tests.faults import harness as h

async def test_an_a2a_client_resubscribes_after_a_kill_9_and_misses_no_state(db_url, store, tmp_path):
    team = (await store.team_create(f"a2akill{uuid.uuid4().hex[:6]}",
                                    owner=(await store.user_insert(f"a2akill{uuid.uuid4().hex[:6]}", "x"))["username"]))
    token, _ = await h.vend(store, user_id=team["id"], queues=("builds",), agent_id="orchestrator")
    _, worker = await h.vend(store, user_id=team["id"], queues=("builds",), agent_id="builder")
    server = h.ServerProcess(db_url, tmp_path / "server.log")
    await server.start()
    seen = []
    try:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                     timeout=httpx.Timeout(30.0, read=120.0)) as http:
            client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(server.url)
            msg = pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text="Build 9")])
            json_format.ParseDict({"queue": "builds"}, msg.metadata)
            task_id = None
            try:
                async for event in client.send_message(pb.SendMessageRequest(message=msg)):
                    seen.append(state_of(event))
                    task_id = event.task.id
                    server.kill()  # mid-stream
            except Exception:  # the stream broke with the server: what a client sees of a kill
                pass
            assert seen == ["submitted"] and task_id
            claimed = await store.todo_claim(worker, task_id)  # the task moves on while the server is down
            await server.start()
            async for event in client.subscribe(pb.SubscribeToTaskRequest(id=task_id)):
                if state_of(event) is None:  # the result's artifact, before the final status
                    continue
                seen.append(state_of(event))
                if seen[-1] == "working":
                    await store.todo_complete(worker, task_id, result={"ok": True})
            await client.close()
    finally:
        await server.stop()
    assert claimed["todo"]["id"] == task_id
    assert seen == ["submitted", "working", "completed"]
