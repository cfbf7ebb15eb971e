"""A2A push notifications: the A2A surface's push seam (board/a2a/__init__.py) over the Store,
and the body of each push the hook outbox delivers (board/ops/hooks.py).

A config is stored per task (migration 0021), scoped like the task: another caller's task is
NotFound, as a never-minted one. From then on every status change of the task writes a push
per config in the change's own transaction; delivery POSTs it, signed like a notify hook, with
the config's token (X-A2A-Notification-Token) and authentication (Authorization), from any
server process, retried with backoff until a 2xx. The body is what the A2A SDK's push sender
sends: a StreamResponse with the status update, as JSON.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import AsyncIterator

from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from board.a2a.tasks import task_state
from board.errors import Invalid, Unavailable
from board.store.inputs import clean_push_config
from board.store.store import Agent, Store

# The outbox event of a push (migration 0021's trigger and push_config_set write it).
PUSH_EVENT = "a2a.task_status"


def _config_out(row: dict) -> pb.TaskPushNotificationConfig:
    """A stored config as the caller reads it back: no token, no credentials."""
    config = pb.TaskPushNotificationConfig(id=row["id"], task_id=row["task_id"], url=row["url"])
    if row["auth_scheme"]:
        config.authentication.scheme = row["auth_scheme"]
    return config


def _fields(config: pb.TaskPushNotificationConfig) -> tuple[str | None, ...]:
    """id, url, token, authentication scheme and credentials; None for each one not given."""
    auth = config.authentication if config.HasField("authentication") else None
    return (config.id or None, config.url, config.token or None, auth.scheme if auth else None,
            auth.credentials if auth else None)


def _task_id(task_id: str) -> str:
    if not task_id:
        raise Invalid("taskId is required: the task whose push notification configs these are", argument="taskId")
    return task_id


class StorePushNotifications:
    """The push seam (board.a2a.handler.PushNotifications) over the Store, which the app's
    lifespan hands over once it is open (`running`), as it does to the other surfaces."""

    def __init__(self) -> None:
        self._store: Store | None = None

    @contextlib.asynccontextmanager
    async def running(self, store: Store) -> AsyncIterator[None]:
        self._store = store
        try:
            yield
        finally:
            self._store = None

    @property
    def store(self) -> Store:
        if self._store is None:
            raise Unavailable()
        return self._store

    def check(self, config: pb.TaskPushNotificationConfig, field: str) -> None:
        """Refuses a bad config before anything is written (SendMessage's, before its task is
        added), naming the field under `field`."""
        try:
            clean_push_config(*_fields(config))
        except Invalid as err:
            raise Invalid(err.message.replace(err.argument, f"{field}.{err.argument}", 1),
                          argument=f"{field}.{err.argument}") from None

    async def create(self, agent: Agent, config: pb.TaskPushNotificationConfig) -> pb.TaskPushNotificationConfig:
        config_id, url, token, auth_scheme, auth_credentials = _fields(config)
        row = await self.store.push_config_set(agent, _task_id(config.task_id), config_id=config_id, url=url,
                                               token=token, auth_scheme=auth_scheme, auth_credentials=auth_credentials)
        return _config_out(row)

    async def get(self, agent: Agent, request: pb.GetTaskPushNotificationConfigRequest) -> pb.TaskPushNotificationConfig:
        return _config_out(await self.store.push_config(agent, _task_id(request.task_id), request.id or None))

    async def list(self, agent: Agent, request: pb.ListTaskPushNotificationConfigsRequest
                   ) -> pb.ListTaskPushNotificationConfigsResponse:
        # At most PUSH_CONFIGS_MAX a task: one page holds them all.
        rows = await self.store.push_configs(agent, _task_id(request.task_id))
        return pb.ListTaskPushNotificationConfigsResponse(configs=[_config_out(r) for r in rows])

    async def delete(self, agent: Agent, request: pb.DeleteTaskPushNotificationConfigRequest) -> None:
        await self.store.push_config_delete(agent, _task_id(request.task_id), request.id or None)


def push_body(event: dict) -> dict:
    """A push's JSON body from its outbox row: the StreamResponse of the status update the
    task's state change was (an interrupt's question, a dead letter's summary as its message)."""
    payload = event["payload"]
    todo = payload["todo"]
    status = pb.TaskStatus(state=task_state(todo))
    status.timestamp.FromDatetime(datetime.fromisoformat(payload["occurred_at"]))
    context_id = todo.get("context_id") or todo["id"]
    text, key = None, None
    question = payload.get("question")
    if question:
        text, key = question["text"], f"question:{question['seq']}:{question['asked_at']}"
    elif payload.get("summary"):
        text, key = payload["summary"], f"failed:{todo['attempts_total']}"
    if text is not None:
        message = status.message
        message.message_id, message.task_id, message.context_id = f"{todo['id']}:{key}", todo["id"], context_id
        message.role = pb.ROLE_AGENT
        message.parts.add().text = text
        if question:
            json_format.ParseDict({"choices": question["choices"] or [], "asked_at": question["asked_at"]},
                                  message.parts.add().data)
    update = pb.TaskStatusUpdateEvent(task_id=todo["id"], context_id=context_id, status=status)
    return json_format.MessageToDict(pb.StreamResponse(status_update=update))
