"""Todos as A2A tasks, and A2A messages as todos (the mapping table of docs/a2a.md).

A task's id is its todo's id; its contextId is the one the todo was added with (migration
0020). Its status follows the todo's state; its history is built from the attempts (each
attempt's opening and close a status message, oldest first); a done todo's result and its
last attempt's summary and artifact are its artifacts.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from google.protobuf import json_format, struct_pb2
from a2a.types import a2a_pb2 as pb

from board.errors import Invalid
from board.store.vocabulary import QUEUE_PATTERN, QUEUE_RULE, TITLE_MAX_CHARS

STATE = {
    "pending": pb.TASK_STATE_SUBMITTED,
    "claimed": pb.TASK_STATE_WORKING,
    "input_required": pb.TASK_STATE_INPUT_REQUIRED,
    "auth_required": pb.TASK_STATE_AUTH_REQUIRED,
    "done": pb.TASK_STATE_COMPLETED,
    "canceled": pb.TASK_STATE_CANCELED,
}
# The todo states each A2A state filter of ListTasks stands for (a failed todo waiting for its
# retry is submitted again, a dead letter failed).
STATES_OF = {
    pb.TASK_STATE_SUBMITTED: ["pending", "failed"], pb.TASK_STATE_WORKING: ["claimed"],
    pb.TASK_STATE_INPUT_REQUIRED: ["input_required"], pb.TASK_STATE_AUTH_REQUIRED: ["auth_required"],
    pb.TASK_STATE_COMPLETED: ["done"], pb.TASK_STATE_FAILED: ["failed"], pb.TASK_STATE_CANCELED: ["canceled"],
}
TERMINAL = frozenset({pb.TASK_STATE_COMPLETED, pb.TASK_STATE_FAILED, pb.TASK_STATE_CANCELED})
# How many attempts a task's history reads (the newest; historyLength cuts further).
HISTORY_ATTEMPTS = 50
# The longest contextId a client may give (the todos CHECK of migration 0019).
CONTEXT_MAX_CHARS = 256


def task_state(todo: dict) -> int:
    if todo["state"] == "failed":
        return pb.TASK_STATE_FAILED if todo["dead_letter"] else pb.TASK_STATE_SUBMITTED
    return STATE[todo["state"]]


def _iso(value: datetime | str) -> str:
    """A time as the todo read gives it (nested JSON keeps its text) in ISO 8601."""
    return value if isinstance(value, str) else value.isoformat()


def _ts(value: datetime | None, target) -> None:
    if value is not None:
        target.FromDatetime(value)


def _agent_message(todo: dict, text: str, data: dict | None = None, key: str = "status") -> pb.Message:
    message = pb.Message(message_id=f"{todo['id']}:{key}", task_id=todo["id"], context_id=context_of(todo),
                         role=pb.ROLE_AGENT, parts=[pb.Part(text=text)])
    if data is not None:
        part = message.parts.add()
        json_format.ParseDict(data, part.data)
    return message


def context_of(todo: dict) -> str:
    return todo["a2a"]["context_id"] if todo.get("a2a") else todo["id"]


def _current_attempt(todo: dict) -> dict | None:
    attempts = todo.get("attempts") or []
    return attempts[0] if attempts else None


def task_status(todo: dict) -> pb.TaskStatus:
    state = task_state(todo)
    status = pb.TaskStatus(state=state)
    _ts(todo["updated_at"], status.timestamp)
    last = _current_attempt(todo)
    if state == pb.TASK_STATE_INPUT_REQUIRED and last and last.get("question") and last["question"]["current"]:
        question = last["question"]
        status.message.CopyFrom(_agent_message(
            todo, question["text"], {"choices": question["choices"] or [], "asked_at": _iso(question["asked_at"])},
            key=f"question:{last['seq']}:{_iso(question['asked_at'])}"))
    elif state == pb.TASK_STATE_FAILED and last and last.get("summary"):
        status.message.CopyFrom(_agent_message(todo, last["summary"], key=f"failed:{last['seq']}"))
    return status


def task_artifacts(todo: dict) -> list[pb.Artifact]:
    """A done todo's result, and its last attempt's summary and artifact (as text)."""
    if todo["state"] != "done":
        return []
    out = []
    if todo.get("result") is not None:
        artifact = pb.Artifact(artifact_id=f"{todo['id']}:result", name="result")
        json_format.ParseDict(todo["result"], artifact.parts.add().data)
        out.append(artifact)
    last = _current_attempt(todo)
    if last and last.get("summary"):
        out.append(pb.Artifact(artifact_id=f"{todo['id']}:summary", name="summary", parts=[pb.Part(text=last["summary"])]))
    if last and last.get("artifact"):
        out.append(pb.Artifact(artifact_id=f"{todo['id']}:artifact", name="artifact",
                               parts=[pb.Part(text=last["artifact"])]))
    return out


def task_history(todo: dict) -> list[pb.Message]:
    """Each attempt's opening and close as a status message, oldest first."""
    out = []
    for attempt in reversed(todo.get("attempts") or []):
        seq = attempt["seq"]
        opened = _agent_message(todo, f"attempt {seq} claimed by {attempt.get('claimant') or 'a worker'}",
                                {"attempt": seq, "state": "working", "at": _iso(attempt["claimed_at"])},
                                key=f"attempt:{seq}:opened")
        out.append(opened)
        if attempt.get("ended_at") is not None:
            data = {"attempt": seq, "outcome": attempt["outcome"], "disposition": attempt["disposition"],
                    "at": _iso(attempt["ended_at"])}
            text = f"attempt {seq} {attempt['outcome']} ({attempt['disposition']})"
            if attempt.get("summary"):
                text += f": {attempt['summary']}"
            out.append(_agent_message(todo, text, data, key=f"attempt:{seq}:closed"))
    return out


def to_task(todo: dict, history_length: int | None = None, *, artifacts: bool = True) -> pb.Task:
    task = pb.Task(id=todo["id"], context_id=context_of(todo), status=task_status(todo))
    if artifacts:
        task.artifacts.extend(task_artifacts(todo))
    history = task_history(todo)
    if history_length is not None:
        history = history[len(history) - history_length:] if history_length else []
    task.history.extend(history)
    json_format.ParseDict({"queue": todo["queue"], "title": todo["title"], "attempts_total": todo["attempts_total"]},
                          task.metadata)
    return task


# -- messages in ----------------------------------------------------------------------------

def _struct(value: struct_pb2.Struct) -> dict:
    return json_format.MessageToDict(value)


def named_queue(message: pb.Message, request_metadata: struct_pb2.Struct) -> str | None:
    """The queue a message names: its metadata's, the request's, or a data part's "queue"."""
    named = [m.get("queue") for m in (_struct(message.metadata), _struct(request_metadata)) if "queue" in m]
    for part in message.parts:
        if part.WhichOneof("content") == "data":
            value = json_format.MessageToDict(part.data)
            if isinstance(value, dict) and "queue" in value:
                named.append(value["queue"])
    if not named:
        return None
    queue = named[0]
    if not isinstance(queue, str) or not QUEUE_PATTERN.fullmatch(queue):
        raise Invalid(f"message.metadata.queue must be {QUEUE_RULE}", argument="message.metadata.queue")
    return queue


def message_queue(message: pb.Message, request_metadata: struct_pb2.Struct, granted: tuple[str, ...]) -> str:
    """The queue a message names, or the credential's one queue when it names none."""
    queue = named_queue(message, request_metadata)
    if queue is not None:
        return queue
    if len(granted) == 1:
        return granted[0]
    raise Invalid("message.metadata.queue is required: this credential may add to several queues ("
                  + ", ".join(granted) + ")", argument="message.metadata.queue")


def message_title(message: pb.Message) -> str:
    """The first non-blank line of the message's text, cut like a title."""
    for part in message.parts:
        if part.WhichOneof("content") == "text":
            for line in part.text.splitlines():
                if line.strip():
                    line = line.strip()
                    return line if len(line) <= TITLE_MAX_CHARS else line[:TITLE_MAX_CHARS - 1] + "…"
    raise Invalid("message.parts needs a text part whose first line is the task's title", argument="message.parts")


def message_payload(message: pb.Message) -> dict:
    """The todo's payload from the message's parts: its text, its data parts (merged, the
    queue left out), its files by URL. Inline file bytes are refused (not a todo's to carry)."""
    texts, data, files = [], {}, []
    for i, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            value = json_format.MessageToDict(part.data)
            if isinstance(value, dict):
                data.update({k: v for k, v in value.items() if k != "queue"})
            else:
                data.setdefault("data", []).append(value)
        elif kind == "url":
            if not part.url.startswith(("http://", "https://")):
                raise Invalid(f"message.parts[{i}].url must be an http(s) URL", argument=f"message.parts[{i}].url")
            files.append({k: v for k, v in (("url", part.url), ("filename", part.filename),
                                            ("media_type", part.media_type)) if v})
        elif kind == "raw":
            raise Invalid(f"message.parts[{i}].raw: send a file by url, not inline bytes",
                          argument=f"message.parts[{i}].raw")
        else:
            raise Invalid(f"message.parts[{i}] is empty: give text, data or url", argument=f"message.parts[{i}]")
    payload: dict[str, Any] = {}
    if texts:
        payload["text"] = "\n".join(texts)
    if data:
        payload["data"] = data
    if files:
        payload["files"] = files
    return payload


def answer_of(message: pb.Message, choices: list[str] | None) -> tuple[str | None, str | None]:
    """A message answering a question: (text, choice). A data part's "choice", or a text equal
    to one of the question's choices, is the choice."""
    text = "\n".join(p.text for p in message.parts if p.WhichOneof("content") == "text").strip() or None
    choice = None
    for part in message.parts:
        if part.WhichOneof("content") == "data":
            value = json_format.MessageToDict(part.data)
            if isinstance(value, dict) and "choice" in value:
                choice = value["choice"]
                if not isinstance(choice, str):
                    raise Invalid("message.parts: a data part's choice must be a string", argument="message.parts")
    if choice is None and text is not None and choices and text in choices:
        choice = text
    if text is None and choice is None:
        raise Invalid("message.parts: an answer needs text or a data part with a choice", argument="message.parts")
    return text, choice


def answer_fence(message: pb.Message, question: dict | None) -> str:
    """The question an answer is for (store's asked): the message metadata's askedAt (what the
    client was shown in the status message), else the question waiting now."""
    asked = _struct(message.metadata).get("asked_at")
    if asked is not None:
        if not isinstance(asked, str):
            raise Invalid("message.metadata.asked_at must be the question's asked_at", argument="message.metadata.asked_at")
        return asked
    return _iso(question["asked_at"]) if question else ""


def client_context(message: pb.Message) -> str | None:
    context = message.context_id or None
    if context is not None and len(context) > CONTEXT_MAX_CHARS:
        raise Invalid(f"message.contextId must be at most {CONTEXT_MAX_CHARS} characters",
                      argument="message.contextId")
    return context
