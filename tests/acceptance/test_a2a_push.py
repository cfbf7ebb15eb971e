"""A2A push notification configs through the A2A Python SDK's client against a real server
with pushes on (SWITCHBOARD_HOOK_SECRET set): created, read, listed and deleted without their
secrets; another caller's task answered as a never-minted one; a bad config answered with an
error naming its field, nothing stored. Delivery across a restart is
tests/faults/test_a2a_push_restart.py's."""

from __future__ import annotations

import contextlib
import uuid

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.utils.errors import A2AError
from a2a.types import a2a_pb2 as pb

from board.config import Settings
from tests.acceptance.mcp_helpers import vend
from tests.conftest import create_database, drop_database, run_server, sql_rows

RECEIVER = "https://receiver.example.com/a2a"


@pytest.fixture(scope="module")
async def push_server(pg_admin_url, template_url):
    name, url = create_database(pg_admin_url)
    settings = Settings(database_url=url, secret_key="test-secret-key-0123456789", retention_interval_seconds=0,
                        doorbell_heartbeat_seconds=0, hook_secret="push-secret-for-tests")
    try:
        async with run_server(settings) as server:
            yield server
    finally:
        drop_database(pg_admin_url, name)


@contextlib.asynccontextmanager
async def a2a_client(server, token: str):
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30.0) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create_from_url(server.url)
        try:
            yield client
        finally:
            await client.close()


async def a_task(client) -> str:
    msg = pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text="Index the docs")])
    sent = pb.SendMessageRequest(message=msg, configuration=pb.SendMessageConfiguration(return_immediately=True))
    [response] = [r async for r in client.send_message(sent)]
    return response.task.id


async def test_a_tasks_push_configs_are_created_read_listed_and_deleted_without_their_secrets(push_server):
    cred = await vend(push_server.store, agent_id="orchestrator", queues=("docs",))
    async with a2a_client(push_server, cred.token) as client:
        task_id = await a_task(client)
        made = await client.create_task_push_notification_config(pb.TaskPushNotificationConfig(
            task_id=task_id, id="ci", url=RECEIVER, token="tok",
            authentication=pb.AuthenticationInfo(scheme="Bearer", credentials="secret-cred")))
        assert (made.id, made.task_id, made.url, made.authentication.scheme) == ("ci", task_id, RECEIVER, "Bearer")
        assert made.token == "" and made.authentication.credentials == ""
        await client.create_task_push_notification_config(pb.TaskPushNotificationConfig(
            task_id=task_id, id="ops", url=RECEIVER + "/ops"))
        got = await client.get_task_push_notification_config(pb.GetTaskPushNotificationConfigRequest(
            task_id=task_id, id="ci"))
        assert got == made
        listed = await client.list_task_push_notification_configs(pb.ListTaskPushNotificationConfigsRequest(
            task_id=task_id))
        assert [c.id for c in listed.configs] == ["ci", "ops"]
        await client.delete_task_push_notification_config(pb.DeleteTaskPushNotificationConfigRequest(
            task_id=task_id, id="ci"))
        listed = await client.list_task_push_notification_configs(pb.ListTaskPushNotificationConfigsRequest(
            task_id=task_id))
        assert [c.id for c in listed.configs] == ["ops"]
    # each config got the task's status at once, written to the outbox
    rows = await sql_rows(push_server.settings.database_url,
                          "SELECT push_config_id FROM hook_events WHERE todo_id = %s", (task_id,))
    assert [r["push_config_id"] for r in rows] == ["ops"]  # the deleted config's push went with it


async def test_another_callers_task_is_answered_as_a_never_minted_one(push_server):
    mine = await vend(push_server.store, agent_id="orchestrator", queues=("docs",))
    other = await vend(push_server.store, agent_id="stranger", queues=("docs",))
    async with a2a_client(push_server, mine.token) as client, a2a_client(push_server, other.token) as stranger:
        task_id = await a_task(client)
        await client.create_task_push_notification_config(pb.TaskPushNotificationConfig(task_id=task_id,
                                                                                         url=RECEIVER))
        errors = []
        for task in (task_id, str(uuid.uuid4())):
            for call in (
                    lambda: stranger.create_task_push_notification_config(pb.TaskPushNotificationConfig(
                        task_id=task, url=RECEIVER)),
                    lambda: stranger.get_task_push_notification_config(pb.GetTaskPushNotificationConfigRequest(
                        task_id=task)),
                    lambda: stranger.list_task_push_notification_configs(pb.ListTaskPushNotificationConfigsRequest(
                        task_id=task)),
                    lambda: stranger.delete_task_push_notification_config(pb.DeleteTaskPushNotificationConfigRequest(
                        task_id=task))):
                with pytest.raises(A2AError) as err:
                    await call()
                errors.append(str(err.value))
        assert errors[:4] == errors[4:] and all(task_id not in e for e in errors)
        listed = await client.list_task_push_notification_configs(pb.ListTaskPushNotificationConfigsRequest(
            task_id=task_id))
        assert [c.url for c in listed.configs] == [RECEIVER]


@pytest.mark.parametrize("config, field", [
    ({"url": "ftp://receiver.example.com/x"}, "url"),
    ({"url": ""}, "url"),
    ({"url": "https://me:hunter2hunter2@receiver.example.com/x"}, "url"),
    ({"url": RECEIVER, "token": "a\nb"}, "token"),
    ({"url": RECEIVER, "authentication": {"credentials": "c"}}, "authentication.scheme"),
    ({"url": RECEIVER, "taskId": ""}, "taskId"),
])
async def test_a_bad_config_gets_an_error_naming_its_field_and_stores_nothing(push_server, config, field):
    cred = await vend(push_server.store, agent_id="orchestrator", queues=("docs",))
    async with a2a_client(push_server, cred.token) as client:
        task_id = await a_task(client)
    params = {"taskId": task_id, **config}
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {cred.token}", "A2A-Version": "1.0"}) as http:
        reply = (await http.post(push_server.url + "/a2a", json={
            "jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", "params": params})).json()
    error = reply["error"]
    assert error["code"] == -32602 and "internal" not in error["message"].lower(), error
    assert any(d.get("metadata", {}).get("argument") == field for d in error.get("data", [])), error
    rows = await sql_rows(push_server.settings.database_url,
                          "SELECT count(*) AS n FROM a2a_push_configs WHERE todo_id = %s", (task_id,))
    assert rows[0]["n"] == 0


async def test_a_message_with_a_bad_push_config_is_refused_before_its_task_is_added(push_server):
    cred = await vend(push_server.store, agent_id="orchestrator", queues=("docs",))
    params = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "Index the docs"}]},
              "configuration": {"taskPushNotificationConfig": {"url": "ftp://receiver.example.com/x"}}}
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {cred.token}", "A2A-Version": "1.0"}) as http:
        reply = (await http.post(push_server.url + "/a2a", json={
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params})).json()
    error = reply["error"]
    assert error["code"] == -32602, error
    assert any(d.get("metadata", {}).get("argument") == "configuration.taskPushNotificationConfig.url"
               for d in error.get("data", [])), error
    rows = await sql_rows(push_server.settings.database_url, "SELECT count(*) AS n FROM todos WHERE endpoint_id = %s",
                          (cred.endpoint_id,))
    assert rows[0]["n"] == 0
