"""The record of what people did (migration 0018's audit_records) in words: a line of a
todo's drawer ("Canceled by Carol"), an Activity row's action, and the sentence a watching
Board announces when another member acts ("Bob canceled todo Fix the build"). A record with
no actor is the command line's."""

from __future__ import annotations

from typing import Any

COMMAND_LINE = "the command line"

# A record as the drawer and the Activity page say it, before "by <who>".
DONE_WORDS = {
    "add": "Added", "claim": "Claimed", "complete": "Completed", "fail": "Failed", "release": "Released",
    "cancel": "Canceled", "retry": "Retried", "note": "Note added", "answer": "Answered",
    "drop_dependency": "A dependency dropped", "delete": "Deleted", "start_now": "Started now",
    "set_priority": "Priority set", "pause": "Paused", "resume": "Resumed", "set_limit": "Limit set",
    "schedule_add": "Schedule added", "schedule_pause": "Schedule paused", "schedule_resume": "Schedule resumed",
    "schedule_remove": "Schedule removed", "vend": "Endpoint vended", "revoke": "Endpoint revoked",
    "member_set": "Member set", "member_remove": "Member removed", "team_create": "Team created",
}

# What a person did, in a sentence after their name, of `what` (a todo, some todos, a queue).
DID_WORDS = {
    "add": "added", "claim": "claimed", "complete": "completed", "fail": "failed", "release": "released",
    "cancel": "canceled", "retry": "retried", "note": "added a note to", "answer": "answered",
    "drop_dependency": "dropped a dependency of", "delete": "deleted", "start_now": "started now",
    "set_priority": "set the priority of", "pause": "paused", "resume": "resumed", "set_limit": "set the limit of",
    "schedule_add": "added a schedule", "schedule_pause": "paused a schedule", "schedule_resume": "resumed a schedule",
    "schedule_remove": "removed a schedule", "vend": "vended an endpoint", "revoke": "revoked an endpoint",
    "member_set": "set a member's role", "member_remove": "removed a member", "team_create": "created the team",
}
# The actions whose words name no object after them.
_NO_OBJECT = {"schedule_add", "schedule_pause", "schedule_resume", "schedule_remove", "vend", "revoke",
              "member_set", "member_remove", "team_create"}


def who(actor_name: str | None) -> str:
    return actor_name or COMMAND_LINE


def action_words(action: str) -> str:
    """An action as a person says it, for the Activity page's filter and its rows."""
    return DONE_WORDS.get(action) or action.replace("_", " ").capitalize()


def record_line(record: dict) -> str:
    """One of a todo's records as the drawer says it: "Canceled by Carol", "Priority set to
    P1 by Ann", "Canceled by the command line"."""
    action = record["action"]
    done = action_words(action)
    detail = record.get("detail") or {}
    if action == "set_priority" and isinstance(detail.get("priority"), int):
        done += f" to P{detail['priority']}"
    elif action == "answer" and isinstance(detail.get("choice"), str):
        done += f" {detail['choice']}"
    return f"{done} by {who(record.get('actor_name'))}"


def short_id(todo_id: str) -> str:
    return todo_id[:8]


def activity_sentence(event: dict[str, Any], title: str | None = None) -> str:
    """What a watching Board announces of another member's action (an `activity`
    notification): "Bob canceled todo Fix the build", "Bob canceled 3 todos", "Ann paused
    queue builds". title: the one todo's title, when it could be read; else its short id."""
    action = str(event.get("action") or "")
    did = DID_WORDS.get(action, action.replace("_", " "))
    name = who(event.get("actor") if isinstance(event.get("actor"), str) else None)
    name = name[:1].upper() + name[1:]
    if action in _NO_OBJECT:
        return f"{name} {did}"
    todos = [t for t in event.get("todos") or () if isinstance(t, str)]
    count = event.get("count") if isinstance(event.get("count"), int) else len(todos)
    if todos and count > 1:
        return f"{name} {did} {count} todos"
    if todos:
        return f"{name} {did} todo {title or short_id(todos[0])}"
    queue = event.get("queue")
    return f"{name} {did} queue {queue}" if isinstance(queue, str) and queue else f"{name} {did}"
