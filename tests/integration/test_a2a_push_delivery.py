"""A2A pushes through the hook outbox: each status change delivered as the A2A SDK's push
sender would send it (a StreamResponse status update, the config's token and
authentication), signed like a notify hook, retried until the receiver takes it."""

from __future__ import annotations

import json

import httpx2
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from board.a2a.push import PUSH_EVENT, push_body
from board.ops.hooks import HookDelivery, verify
from board.store import store as st
from tests.integration.test_hooks import Receiver

SECRET = "push-secret-for-tests"
URL = "https://receiver.example.com/a2a"


def updates(receiver: Receiver) -> list[pb.TaskStatusUpdateEvent]:
    out = []
    for _, body in receiver.requests:
        response = json_format.ParseDict(json.loads(body), pb.StreamResponse())
        assert response.WhichOneof("payload") == "status_update"
        out.append(response.status_update)
    return out


def pushing(store) -> tuple[st.Store, HookDelivery]:
    settings = store.settings.with_(hook_secret=SECRET, hook_retry_base_seconds=0, hook_retry_max_seconds=0)
    s = st.Store(store.pool, settings)
    return s, HookDelivery(s, settings, bodies={PUSH_EVENT: push_body})


async def drain(delivery, receiver, rounds=5):
    async with httpx2.AsyncClient(transport=receiver.transport()) as client:
        for _ in range(rounds):
            await delivery.deliver_due(client)


async def test_a_tasks_status_changes_arrive_signed_with_the_configs_token_and_authentication(store, agent):
    s, delivery = pushing(store)
    todo = await s.todo_add(agent, queue="q", title="t")
    await s.push_config_set(agent, todo["id"], url=URL, token="tok-1", auth_scheme="Bearer", auth_credentials="c-1")
    await s.todo_claim(agent, todo["id"])
    await s.todo_complete(agent, todo["id"], summary="green")
    receiver = Receiver()
    await drain(delivery, receiver)
    states = [u.status.state for u in updates(receiver)]
    assert states == [pb.TASK_STATE_SUBMITTED, pb.TASK_STATE_WORKING, pb.TASK_STATE_COMPLETED]
    assert {(u.task_id, u.context_id) for u in updates(receiver)} == {(todo["id"], todo["id"])}
    for headers, body in receiver.requests:
        assert verify(SECRET, headers["x-switchboard-signature"], body)
        assert headers["x-switchboard-event"] == PUSH_EVENT
        assert headers["x-a2a-notification-token"] == "tok-1"
        assert headers["authorization"] == "Bearer c-1"
        assert b"green" not in body  # a completed push says so; the task's reader gets its artifacts


async def test_an_interrupt_pushes_its_question_and_a_dead_letter_its_summary(store, agent):
    s, delivery = pushing(store)
    todo = await s.todo_add(agent, queue="q", title="t", max_attempts=1)
    await s.todo_claim(agent, todo["id"])
    await s.push_config_set(agent, todo["id"], url=URL)
    await s.todo_interrupt(agent, todo["id"], question="Deploy to prod?", choices=["yes", "no"])
    await s.todo_resume(agent, todo["id"])
    await s.todo_fail(agent, todo["id"], summary="still red")
    receiver = Receiver()
    await drain(delivery, receiver)
    pushed = updates(receiver)
    assert [u.status.state for u in pushed] == [pb.TASK_STATE_WORKING, pb.TASK_STATE_INPUT_REQUIRED,
                                                 pb.TASK_STATE_WORKING, pb.TASK_STATE_FAILED]
    asked = pushed[1].status.message
    assert asked.role == pb.ROLE_AGENT and asked.parts[0].text == "Deploy to prod?"
    assert json_format.MessageToDict(asked.parts[1].data)["choices"] == ["yes", "no"]
    assert pushed[3].status.message.parts[0].text == "still red"
    assert not pushed[2].status.HasField("message")
    assert all("x-a2a-notification-token" not in h and "authorization" not in h for h, _ in receiver.requests)


async def test_a_refused_push_is_retried_until_taken_under_one_event_id(store, agent):
    s, delivery = pushing(store)
    todo = await s.todo_add(agent, queue="q", title="t")
    await s.push_config_set(agent, todo["id"], url=URL)
    receiver = Receiver(fail_first=2)
    await drain(delivery, receiver)
    ids = [h["x-switchboard-event-id"] for h, _ in receiver.requests]
    assert len(ids) == 3 and len(set(ids)) == 1
    again = Receiver()
    await drain(delivery, again, rounds=2)
    assert again.requests == []  # delivered means delivered


async def test_a_push_goes_where_its_config_points_when_it_is_sent(store, agent):
    s, delivery = pushing(store)
    todo = await s.todo_add(agent, queue="q", title="t")
    await s.push_config_set(agent, todo["id"], url=URL, token="old")
    await s.push_config_set(agent, todo["id"], url=URL + "/moved", token="new")
    seen: list[tuple[str, str]] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        seen.append((str(request.url), request.headers["x-a2a-notification-token"]))
        return httpx2.Response(204)

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handle)) as client:
        await delivery.deliver_due(client)
    assert seen == [(URL + "/moved", "new")] * 2
