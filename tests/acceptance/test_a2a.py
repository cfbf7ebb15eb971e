"""A2A clients delegate to Switchboard's workers, through the A2A Python SDK's own client
over HTTP against a real server: the card (public without skills, extended with a skill per
queue), a streamed send that a real MCP worker claims and completes (submitted, working,
completed in order, the result as an artifact, history from the attempts), a question
answered by message and returned by the worker's resume, a cancel, another caller's task id
answered as a never-minted one, and bad input answered with clear errors, nothing written."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.utils.errors import A2AError, TaskNotFoundError
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from tests.acceptance.mcp_helpers import call, connect, make_team, mcp_server, vend  # noqa: F401 (the module's server)
from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.conftest import sql_rows

CLIENTS = Path(__file__).resolve().parents[1] / "clients"
STATES = {pb.TASK_STATE_SUBMITTED: "submitted", pb.TASK_STATE_WORKING: "working",
          pb.TASK_STATE_COMPLETED: "completed", pb.TASK_STATE_INPUT_REQUIRED: "input-required",
          pb.TASK_STATE_CANCELED: "canceled", pb.TASK_STATE_FAILED: "failed"}


@contextlib.asynccontextmanager
async def a2a_client(server, token: str | None, *, streaming: bool = True):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30.0, read=120.0)) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create_from_url(server.url)
        try:
            yield client
        finally:
            await client.close()


def message(text: str, *, queue: str | None = None, task_id: str = "", context_id: str = "", data=None) -> pb.Message:
    msg = pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text=text)], task_id=task_id,
                     context_id=context_id)
    if queue is not None:
        json_format.ParseDict({"queue": queue}, msg.metadata)
    if data is not None:
        json_format.ParseDict(data, msg.parts.add().data)
    return msg


def state_of(event: pb.StreamResponse) -> str | None:
    if event.HasField("task"):
        return STATES[event.task.status.state]
    if event.HasField("status_update"):
        return STATES[event.status_update.status.state]
    return None


async def producer_and_worker(server, queues=("builds",)):
    """An A2A client's credential (it may add and read) and a worker's, of one team (whose
    endpoints share its todos)."""
    team = await make_team(server.store)
    client = await vend(server.store, user_id=team, agent_id="orchestrator", queues=queues,
                        scope=("add_todo", "get_todo", "list_todos", "cancel"))
    worker = await vend(server.store, user_id=team, agent_id="builder", queues=queues)
    return client, worker


async def test_the_public_card_lists_no_skill_and_the_extended_card_one_per_queue_the_credential_may_add_to(mcp_server):
    client_cred, _ = await producer_and_worker(mcp_server, queues=("builds", "docs"))
    async with httpx.AsyncClient() as http:
        card = (await http.get(mcp_server.url + "/.well-known/agent-card.json")).json()
    assert card["name"] == "Switchboard"
    assert card["supportedInterfaces"][0] == {"url": mcp_server.url + "/a2a", "protocolBinding": "JSONRPC",
                                              "protocolVersion": "1.0"}
    assert card["capabilities"]["streaming"] is True and not card["capabilities"].get("pushNotifications")
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    oauth = card["securitySchemes"]["oauth"]["oauth2SecurityScheme"]
    assert oauth["oauth2MetadataUrl"] == mcp_server.url + "/.well-known/oauth-authorization-server"
    assert not card.get("skills")
    async with a2a_client(mcp_server, client_cred.token) as client:
        extended = await client.get_extended_agent_card(pb.GetExtendedAgentCardRequest())
    assert sorted(s.name for s in extended.skills) == ["builds", "docs"]


async def test_a_streamed_task_shows_submitted_working_completed_with_the_result_and_history_from_attempts(mcp_server):
    client_cred, worker = await producer_and_worker(mcp_server)
    async with a2a_client(mcp_server, client_cred.token) as client, connect(mcp_server, worker.token) as mcp:
        events = []
        stream = client.send_message(pb.SendMessageRequest(message=message(
            "Build release 7\nwith the arm64 target", queue="builds", data={"target": "arm64"})))

        async def work():
            claimed = await call(mcp, "claim_next", {"claimant": "builder-1"})
            await call(mcp, "complete", {"id": claimed["todo"]["id"], "result": {"artifact_url": "https://x/7"},
                                         "summary": "built in 3 minutes"})

        worker_task = None
        async for event in stream:
            events.append(event)
            if worker_task is None:
                worker_task = asyncio.ensure_future(work())
        await worker_task
        states = [s for s in map(state_of, events) if s]
        assert states == ["submitted", "working", "completed"]
        task_id = events[0].task.id
        artifacts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
        result = next(a for a in artifacts if a.name == "result")
        assert json_format.MessageToDict(result.parts[0].data) == {"artifact_url": "https://x/7"}
        assert any(a.name == "summary" and a.parts[0].text == "built in 3 minutes" for a in artifacts)

        task = await client.get_task(pb.GetTaskRequest(id=task_id))
        assert STATES[task.status.state] == "completed"
        assert [m.parts[0].text for m in task.history] == [
            "attempt 1 claimed by builder-1", "attempt 1 completed (done): built in 3 minutes"]
        assert len((await client.get_task(pb.GetTaskRequest(id=task_id, history_length=1))).history) == 1
        [todo] = await sql_rows(mcp_server.settings.database_url,
                                "SELECT title, payload, a2a_client FROM todos WHERE id = %s", (task_id,))
        assert todo["title"] == "Build release 7" and todo["a2a_client"] == "orchestrator"
        assert todo["payload"] == {"text": "Build release 7\nwith the arm64 target", "data": {"target": "arm64"}}
        listed = await client.list_tasks(pb.ListTasksRequest(context_id=task.context_id))
        assert [t.id for t in listed.tasks] == [task_id]


async def test_a_question_is_input_required_and_the_clients_answer_is_what_resume_returns(mcp_server):
    client_cred, worker = await producer_and_worker(mcp_server)
    async with a2a_client(mcp_server, client_cred.token, streaming=False) as client, \
            connect(mcp_server, worker.token) as mcp:
        [first] = [e async for e in a2a_client_send(client, message("Deploy build 412", queue="builds"))]
        task_id = first.task.id
        claimed = await call(mcp, "claim_next", {})
        await call(mcp, "interrupt", {"id": task_id, "question": "Deploy to production now?",
                                      "choices": ["yes", "not yet"]})
        task = await client.get_task(pb.GetTaskRequest(id=task_id))
        assert STATES[task.status.state] == "input-required"
        assert task.status.message.parts[0].text == "Deploy to production now?"
        assert json_format.MessageToDict(task.status.message.parts[1].data)["choices"] == ["yes", "not yet"]
        [answered] = [e async for e in a2a_client_send(client, message("not yet", task_id=task_id))]
        assert answered.task.id == task_id
        resumed = await call(mcp, "resume", {"id": claimed["todo"]["id"]})
        assert [(a["text"], a["choice"], a["who"]) for a in resumed["answers"]] == [("not yet", "not yet",
                                                                                     "orchestrator")]
        await call(mcp, "complete", {"id": task_id, "result": {"deployed": False}})
        assert STATES[(await client.get_task(pb.GetTaskRequest(id=task_id))).status.state] == "completed"


async def a2a_client_send(client, msg):
    async for event in client.send_message(pb.SendMessageRequest(message=msg)):
        yield event


async def test_a_canceled_task_is_canceled_and_another_callers_task_is_not_found_like_a_never_minted_one(mcp_server):
    mine, _ = await producer_and_worker(mcp_server)
    other, _ = await producer_and_worker(mcp_server)
    async with a2a_client(mcp_server, mine.token, streaming=False) as client, \
            a2a_client(mcp_server, other.token, streaming=False) as stranger:
        [sent] = [e async for e in a2a_client_send(client, message("Index the docs", queue="builds"))]
        task_id = sent.task.id
        errors = []
        for who, task in ((stranger, task_id), (stranger, str(uuid.uuid4())), (client, str(uuid.uuid4()))):
            with pytest.raises(TaskNotFoundError) as err:
                await who.get_task(pb.GetTaskRequest(id=task))
            errors.append(str(err.value))
            with pytest.raises(TaskNotFoundError):
                await who.cancel_task(pb.CancelTaskRequest(id=task))
        assert len(set(errors)) == 1 and task_id not in errors[0]
        canceled = await client.cancel_task(pb.CancelTaskRequest(id=task_id))
        assert STATES[canceled.status.state] == "canceled"


@pytest.mark.parametrize("params, field", [
    ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}],
                  "metadata": {"queue": "not granted"}}}, "message.metadata.queue"),
    ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"queue": "builds"}}]}},
     "message.parts"),
    ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x", "url": "file:///etc/passwd"}],
                  "metadata": {"queue": "builds"}}}, None),
    ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}, {"url": "ftp://h/f"}],
                  "metadata": {"queue": "builds"}}}, "message.parts[1].url"),
    ({"message": {"messageId": "m", "role": "ROLE_USER",
                  "parts": [{"text": "deploy with password=hunter2hunter2"}], "metadata": {"queue": "builds"}}},
     "title"),
    ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}, None),
    ({"message": "nonsense"}, None),
    ({}, None),
])
async def test_a_bad_message_gets_a_clear_error_naming_what_was_wrong_and_adds_nothing(mcp_server, params, field):
    client_cred, _ = await producer_and_worker(mcp_server)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {client_cred.token}",
                                          "A2A-Version": "1.0"}) as http:
        reply = (await http.post(mcp_server.url + "/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                                                                "params": params})).json()
    error = reply["error"]
    assert error["code"] in (-32602, -32600), error  # invalid params or request, never internal
    assert error["message"] and "internal" not in error["message"].lower()
    if field is not None:
        assert any(d.get("metadata", {}).get("argument") == field for d in error.get("data", [])), error
    rows = await sql_rows(mcp_server.settings.database_url, "SELECT count(*) AS n FROM todos t JOIN endpoints e "
                          "ON e.id = t.endpoint_id WHERE e.user_id = %s", (client_cred.user_id,))
    assert rows[0]["n"] == 0


async def test_a2a_without_a_valid_bearer_token_is_401(mcp_server):
    async with httpx.AsyncClient() as http:
        for headers in ({}, {"Authorization": "Bearer nope"}):
            reply = await http.post(mcp_server.url + "/a2a", headers=headers,
                                    json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})
            assert reply.status_code == 401 and reply.headers["www-authenticate"].startswith("Bearer")


async def test_the_boards_drawer_says_a_todo_was_added_over_a2a_by_the_client(mcp_server):
    human = await make_human(mcp_server.store, f"a2aowner{uuid.uuid4().hex[:8]}")
    cred = await vend(mcp_server.store, user_id=human.user_id, agent_id="planner-bot", queues=("builds",),
                      scope=("add_todo", "get_todo"))
    async with a2a_client(mcp_server, cred.token, streaming=False) as client:
        [sent] = [e async for e in a2a_client_send(client, message("Ship the docs"))]  # the one queue, unnamed
    async with client_for(mcp_server) as board:
        await sign_in(board, human.username)
        drawer = await board.get(f"/todos/{sent.task.id}")
    assert drawer.status_code == 200 and "Added over A2A by planner-bot." in drawer.text


async def test_a_worker_whose_lease_lapses_shows_submitted_again_then_working_under_the_next_attempt(mcp_server):
    client_cred, worker = await producer_and_worker(mcp_server)
    async with a2a_client(mcp_server, client_cred.token) as client, connect(mcp_server, worker.token) as mcp:
        seen = []
        async for event in client.send_message(pb.SendMessageRequest(message=message("Flaky build", queue="builds"))):
            state = state_of(event)
            if state is None:
                continue
            seen.append((state, int(event.task.metadata["attempts_total"]) if event.HasField("task") else None))
            if seen == [("submitted", 0)]:  # the first worker claims, then dies (no heartbeat): the reaper takes it
                await call(mcp, "claim_next", {"lease_seconds": 1})
            elif len(seen) == 3:  # back to submitted: the next worker claims and completes
                claimed = await call(mcp, "claim_next", {})
                await call(mcp, "complete", {"id": claimed["todo"]["id"], "result": {"ok": True}})
        assert [s for s, _ in seen] == ["submitted", "working", "submitted", "working", "completed"]
        task = await client.get_task(pb.GetTaskRequest(id=event.status_update.task_id))
        assert [m.parts[0].text.split(":")[0] for m in task.history] == [
            "attempt 1 claimed by a worker", "attempt 1 reaped (requeued)", "attempt 2 claimed by a worker",
            "attempt 2 completed (done)"]


async def test_the_a2a_javascript_sdks_client_streams_a_task_a_worker_completes(mcp_server):
    client_cred, worker = await producer_and_worker(mcp_server)
    driver = await asyncio.create_subprocess_exec(
        "node", str(CLIENTS / "a2a_js_driver.mjs"), mcp_server.url, "builds", cwd=CLIENTS,
        env={**os.environ, "A2A_TOKEN": client_cred.token}, stdout=asyncio.subprocess.PIPE)
    lines = []
    async with connect(mcp_server, worker.token) as mcp:
        while line := await asyncio.wait_for(driver.stdout.readline(), 60):
            lines.append(json.loads(line))
            assert "error" not in lines[-1], lines[-1]["error"]
            if len(lines) == 1:
                claimed = await call(mcp, "claim_next", {"claimant": "js-builder"})
                await call(mcp, "complete", {"id": claimed["todo"]["id"], "result": {"ok": True},
                                             "summary": "built"})
    assert await driver.wait() == 0
    assert [x["state"] for x in lines if "state" in x] == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING",
                                                           "TASK_STATE_COMPLETED"]
    assert {x["artifact"] for x in lines if "artifact" in x} == {"result", "summary"}
    assert lines[-1]["history"] == ["attempt 1 claimed by js-builder", "attempt 1 completed (done): built"]


async def test_a_message_to_a_completed_task_in_its_context_adds_a_todo_continuing_it(mcp_server):
    client_cred, worker = await producer_and_worker(mcp_server)
    async with a2a_client(mcp_server, client_cred.token, streaming=False) as client, \
            connect(mcp_server, worker.token) as mcp:
        [sent] = [e async for e in a2a_client_send(client, message("Draft the notes", queue="builds"))]
        first = sent.task
        claimed = await call(mcp, "claim_next", {})
        await call(mcp, "complete", {"id": claimed["todo"]["id"], "result": {"draft": 1}})
        [again] = [e async for e in a2a_client_send(client, message(
            "Shorten them", task_id=first.id, context_id=first.context_id))]
        follow = again.task
        assert follow.id != first.id and follow.context_id == first.context_id
        assert STATES[follow.status.state] == "submitted"
        nxt = await call(mcp, "claim_next", {})
        assert nxt["todo"]["id"] == follow.id and nxt["continues"]["id"] == first.id
        with pytest.raises(A2AError) as err:  # a message to a task in another context
            [_ async for _ in a2a_client_send(client, message("x", task_id=follow.id, context_id="elsewhere"))]
        assert "contextId" in str(err.value)
        listed = await client.list_tasks(pb.ListTasksRequest(context_id=first.context_id))
        assert [t.id for t in listed.tasks] == [follow.id, first.id]
