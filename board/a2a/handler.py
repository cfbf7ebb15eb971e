"""The A2A request handler: each operation of A2A 1.0 (the SDK's RequestHandler) mapped onto
the Store, as the authenticated endpoint (board/a2a/server.py puts it in the call context).

- SendMessage: a message naming no task adds a todo (board/a2a/tasks.py reads its queue,
  title and payload); one naming a task in input-required answers its question; one naming
  an ended task in the same context adds a todo continuing it.
- SendStreamingMessage and SubscribeToTask: the task as it is, then each change of it, from
  the LISTEN fan-out (board/live/fanout.py: no polling), until it ends. A resync of the
  fan-out (its connection came back) re-reads the task, so no state is missed.
- GetTask, ListTasks (the caller's tasks added over A2A), CancelTask.
Every error is an A2A error naming what was wrong; a foreign task is the error of a task
never minted (REQ-10).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator
from typing import Any, Protocol

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.types import a2a_pb2 as pb
from a2a.utils import errors as a2a_errors

from board.a2a import tasks
from board.errors import Conflict, Invalid, NotFound, SwitchboardError
from board.live.fanout import RESYNC, SHUTDOWN, Fanout
from board.store.store import Agent, Store, call_deadline, deadline_after
from board.store.vocabulary import LIST_LIMIT_MAX

log = logging.getLogger("switchboard.a2a")

# Where board/a2a/server.py puts the authenticated endpoint in the call context's state.
AGENT_KEY = "agent"


class PushNotifications(Protocol):
    """The push notification seam (board/a2a/__init__.py says how it is used)."""

    def check(self, config: pb.TaskPushNotificationConfig, field: str) -> None: ...

    async def create(self, agent: Agent, config: pb.TaskPushNotificationConfig) -> pb.TaskPushNotificationConfig: ...

    async def get(self, agent: Agent, request: pb.GetTaskPushNotificationConfigRequest
                  ) -> pb.TaskPushNotificationConfig: ...

    async def list(self, agent: Agent, request: pb.ListTaskPushNotificationConfigsRequest
                   ) -> pb.ListTaskPushNotificationConfigsResponse: ...

    async def delete(self, agent: Agent, request: pb.DeleteTaskPushNotificationConfigRequest) -> None: ...


def a2a_error(err: SwitchboardError) -> a2a_errors.A2AError:
    """The A2A error for a store error: not_found is TaskNotFound whatever the id (REQ-10);
    invalid is InvalidParams naming the field; the rest carry their code beside the message."""
    data = {"code": err.code} | ({"argument": err.argument} if err.argument else {})
    if isinstance(err, NotFound):
        return a2a_errors.TaskNotFoundError()
    if isinstance(err, Invalid):
        return a2a_errors.InvalidParamsError(message=err.message, data=data)
    if err.code == "internal":
        return a2a_errors.InternalError()
    if err.code == "unavailable":
        return a2a_errors.InternalError(message=err.message, data=data)
    return a2a_errors.InvalidRequestError(message=err.message, data=data)


class TodoRequestHandler(RequestHandler):
    def __init__(self, store: Store, fanout: Fanout, card, push: PushNotifications | None = None):
        self.store = store
        self.fanout = fanout
        self.card = card  # board/a2a/server.py's AgentCards
        self.push = push

    # -- calls ----------------------------------------------------------------------------

    @staticmethod
    def _agent(context: ServerCallContext) -> Agent:
        agent = context.state.get(AGENT_KEY)
        if agent is None:  # only if something bypassed the ASGI gate
            raise a2a_errors.InvalidRequestError(message="unauthenticated")
        return agent

    async def _call(self, context: ServerCallContext, work):
        try:
            # each read its own bounded wait for the pool: a stream reads long after its request began
            with call_deadline(deadline_after(self.store.settings.db_wait_seconds)):
                return await work
        except SwitchboardError as err:
            if err.code == "internal":
                log.error("a2a call failed: %s", err)
            raise a2a_error(err) from None

    async def _task(self, agent: Agent, todo_id: str, history_length: int | None = None) -> pb.Task:
        todo = await self.store.todo_get(agent, todo_id, attempts_limit=tasks.HISTORY_ATTEMPTS)
        return tasks.to_task(todo, history_length)

    # -- the operations ---------------------------------------------------------------------

    async def on_get_task(self, params: pb.GetTaskRequest, context: ServerCallContext) -> pb.Task | None:
        agent = self._agent(context)
        history = params.history_length if params.HasField("history_length") else None
        if history is not None and history < 0:
            raise a2a_errors.InvalidParamsError(message="historyLength must be 0 or more",
                                                data={"argument": "historyLength"})
        return await self._call(context, self._task(agent, params.id, history))

    async def on_list_tasks(self, params: pb.ListTasksRequest, context: ServerCallContext) -> pb.ListTasksResponse:
        agent = self._agent(context)
        size = params.page_size if params.HasField("page_size") else 50
        if not 1 <= size <= LIST_LIMIT_MAX:
            raise a2a_errors.InvalidParamsError(message=f"pageSize must be from 1 to {LIST_LIMIT_MAX}",
                                                data={"argument": "pageSize"})
        history = params.history_length if params.HasField("history_length") else None

        async def work():
            page = await self.store.todo_list_a2a(
                agent, context=params.context_id or None, states=tasks.STATES_OF.get(params.status),
                limit=size, cursor=params.page_token or None)
            out = pb.ListTasksResponse(next_page_token=page["next_cursor"] or "", page_size=size)
            for todo_id in page["ids"]:
                try:
                    task = await self._task(agent, todo_id, history)
                except NotFound:  # deleted meanwhile
                    continue
                if params.status and task.status.state != params.status:
                    continue  # a failed todo waiting for its retry is submitted, not failed
                out.tasks.append(task)
            out.total_size = len(out.tasks)
            return out

        return await self._call(context, work())

    async def on_cancel_task(self, params: pb.CancelTaskRequest, context: ServerCallContext) -> pb.Task | None:
        agent = self._agent(context)

        async def work():
            try:
                await self.store.todo_cancel(agent, params.id)
            except Conflict as err:
                raise a2a_errors.TaskNotCancelableError(message=err.message) from None
            return await self._task(agent, params.id)

        return await self._call(context, work())

    async def on_message_send(self, params: pb.SendMessageRequest, context: ServerCallContext) -> pb.Task:
        agent = self._agent(context)
        return await self._call(context, self._send(agent, params))

    async def _send(self, agent: Agent, params: pb.SendMessageRequest) -> pb.Task:
        message = params.message
        if not message.parts:
            raise Invalid("message.parts must hold at least one part", argument="message.parts")
        pushing = params.configuration.HasField("task_push_notification_config")
        if pushing:  # refused before the task is added: nothing half-written
            if self.push is None:
                raise a2a_errors.PushNotificationNotSupportedError()
            self.push.check(params.configuration.task_push_notification_config,
                            "configuration.taskPushNotificationConfig")
        if message.task_id:
            todo_id = await self._follow_up(agent, message, params)
        else:
            context = tasks.client_context(message) or str(uuid.uuid4())
            added = await self.store.todo_add(
                agent, queue=tasks.message_queue(message, params.metadata, agent.queues),
                title=tasks.message_title(message), payload=tasks.message_payload(message),
                a2a=(agent.agent_id, context))
            todo_id = added["id"]
        if pushing:
            config = pb.TaskPushNotificationConfig()
            config.CopyFrom(params.configuration.task_push_notification_config)
            config.task_id = todo_id
            await self.push.create(agent, config)
        history = params.configuration.history_length if params.configuration.HasField("history_length") else None
        if agent.allows("get_todo"):
            return await self._task(agent, todo_id, history)
        return pb.Task(id=todo_id, status=pb.TaskStatus(state=pb.TASK_STATE_SUBMITTED))

    async def _follow_up(self, agent: Agent, message: pb.Message, params: pb.SendMessageRequest) -> str:
        """A message to a task: the answer to its question, or the next todo of its chain."""
        todo = await self.store.todo_get(agent, message.task_id, attempts_limit=1)
        if message.context_id and message.context_id != tasks.context_of(todo):
            raise Invalid("message.contextId is not this task's contextId", argument="message.contextId")
        state = tasks.task_state(todo)
        if state == pb.TASK_STATE_INPUT_REQUIRED:
            attempt = todo["attempts"][0] if todo["attempts"] else None
            question = attempt.get("question") if attempt else None
            asked = tasks.answer_fence(message, question)
            text, choice = tasks.answer_of(message, question["choices"] if question else None)
            await self.store.todo_answer(agent, todo["id"], text=text, choice=choice, asked=asked)
            return todo["id"]
        if state in tasks.TERMINAL:
            named = tasks.named_queue(message, params.metadata)
            added = await self.store.todo_add(
                agent, queue=named or todo["queue"], title=tasks.message_title(message),
                payload=tasks.message_payload(message), continues=todo["id"],
                a2a=(agent.agent_id, tasks.context_of(todo)))
            return added["id"]
        raise Conflict("the task is " + pb.TaskState.Name(state).removeprefix("TASK_STATE_").lower().replace("_", "-")
                       + ": a message may answer a task in input-required or continue an ended one",
                       argument="message.taskId")

    # -- streams --------------------------------------------------------------------------

    async def on_message_send_stream(self, params: pb.SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[Any]:
        agent = self._agent(context)
        async with self._watching(agent) as sub:
            task = await self._call(context, self._send(agent, params))
            async for event in self._follow(agent, context, task.id, sub):
                yield event

    async def on_subscribe_to_task(self, params: pb.SubscribeToTaskRequest,
                                   context: ServerCallContext) -> AsyncGenerator[Any]:
        agent = self._agent(context)
        async with self._watching(agent) as sub:
            async for event in self._follow(agent, context, params.id, sub):
                yield event

    def _watching(self, agent: Agent):
        return _Watch(self.fanout, agent, self.store.settings.db_wait_seconds)

    async def _follow(self, agent: Agent, context: ServerCallContext, todo_id: str, sub) -> AsyncGenerator[Any]:
        """The task as it is now, then a status event for each change of its state (and its
        question), and its artifacts as it completes; ends once the task has ended."""
        task = await self._call(context, self._task(agent, todo_id))
        yield task
        if task.status.state in tasks.TERMINAL:
            return
        seen = _seen(task)
        while True:
            event = await sub.get()
            if event is SHUTDOWN:
                return
            if event is not RESYNC and event.get("todo") != todo_id:
                continue
            try:
                task = await self._call(context, self._task(agent, todo_id))
            except a2a_errors.TaskNotFoundError:
                return  # deleted
            # The state this notification committed, when the read shows a later one already (a
            # claim and its complete both committed before this read): sent first, so the
            # client sees each state the todo went through, in order.
            passed = tasks.STATE.get(event.get("state")) if event is not RESYNC else None
            if passed is not None and passed not in (seen[0], task.status.state):
                yield pb.TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id,
                                               status=pb.TaskStatus(state=passed))
                seen = (passed, *seen[1:])
            now = _seen(task)
            if now == seen:
                continue
            seen = now
            final = task.status.state in tasks.TERMINAL
            if final:
                for artifact in task.artifacts:
                    yield pb.TaskArtifactUpdateEvent(task_id=task.id, context_id=task.context_id, artifact=artifact,
                                                     last_chunk=True)
            yield pb.TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=task.status)
            if final:
                return

    # -- the card and push ------------------------------------------------------------------

    async def on_get_extended_agent_card(self, params: pb.GetExtendedAgentCardRequest,
                                         context: ServerCallContext) -> pb.AgentCard:
        return self.card.extended(context.state["base"], self._agent(context))

    def _push(self) -> PushNotifications:
        if self.push is None:
            raise a2a_errors.PushNotificationNotSupportedError()
        return self.push

    async def on_create_task_push_notification_config(self, params, context):
        return await self._call(context, self._push().create(self._agent(context), params))

    async def on_get_task_push_notification_config(self, params, context):
        return await self._call(context, self._push().get(self._agent(context), params))

    async def on_list_task_push_notification_configs(self, params, context):
        return await self._call(context, self._push().list(self._agent(context), params))

    async def on_delete_task_push_notification_config(self, params, context):
        return await self._call(context, self._push().delete(self._agent(context), params))


def _seen(task: pb.Task) -> tuple:
    """What a status event reports: the state, its attempt and its message (a new question)."""
    return task.status.state, task.metadata["attempts_total"], task.status.message.message_id


class _Watch:
    """A fan-out subscription with the endpoint's human held in presence (so its todos'
    transitions notify), entered before the first read: nothing committed after it is missed."""

    def __init__(self, fanout: Fanout, agent: Agent, wait_seconds: float):
        self.fanout, self.agent, self.wait_seconds = fanout, agent, wait_seconds
        self.sub = None

    async def __aenter__(self):
        self.sub = self.fanout.subscribe()
        presence = self.fanout.presence
        if presence is not None:
            presence.hold(self.agent.user_id)
            try:
                await presence.ready(self.agent.user_id, self.wait_seconds)
            except BaseException as err:
                await self.__aexit__(None, None, None)
                if isinstance(err, SwitchboardError):
                    raise a2a_error(err) from None
                raise
        return self.sub

    async def __aexit__(self, *exc) -> None:
        if self.fanout.presence is not None:
            self.fanout.presence.release(self.agent.user_id)
        self.fanout.unsubscribe(self.sub)
