"""How the Board presents store data: the one Jinja environment (autoescape on), its
filters, and the read-time derivations (a row's holder and its next deadline; an open
attempt's liveness comes with it from the store, board/store/liveness.py). No data is marked safe
here; templates escape everything.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from board.store.liveness import span, waiting_for_person
from board.resources import resource_dir
from board.store.inputs import list_cursor
from board.store import vocabulary
from board.store.vocabulary import BOARD_PAGE_SIZES, BOARD_SORTS, LIST_SORTS, DEFAULT_GRANT, DIED_OUTCOMES, HOLDER_STATES, STATES, VERBS
# The todo detail every surface shows, and its wording, live in board/view (the drawer takes it from there).
from board.view.todo_detail import (DISPOSITION_WORDS, OUTCOME_WORDS, SUMMARY_START_CHARS,  # noqa: F401 (re-exported)
                                    attempt_sentence, duration_words, fmt_iso, fmt_relative, fmt_when,
                                    state_label, summary_start, todo_detail, usage_text)
from board.view.records import record_line



# The vend wizard's verb groups. release sits in a group of its own: it is granted only
# when ticked, and no other verb implies it (REQ-9). heartbeat implies note (an endpoint that
# may keep a lease alive may say what it is doing).
VERB_GROUPS = (
    ("Read", ("list_todos", "get_todo")),
    ("Drain", ("claim", "claim_next", "heartbeat", "note", "complete", "fail")),
    ("Release", ("release",)),
    ("Produce and control", ("add_todo", "cancel", "interrupt", "resume")),
)
VERB_HELP = {
    "add_todo": "add todos to its queues",
    "list_todos": "list its todos (also allows get_todo)",
    "get_todo": "read one todo with its attempts",
    "claim": "claim a todo by id",
    "claim_next": "claim the oldest ready todo",
    "heartbeat": "extend the lease it holds (also allows note)",
    "note": "leave working notes on the attempt it holds, for the next worker",
    "complete": "finish the todo it holds",
    "fail": "report a failed attempt",
    "release": "hand a held todo back to the queue, unfinished; implied by no other verb",
    "cancel": "cancel a todo",
    "interrupt": "pause for input or auth",
    "resume": "resume after an interrupt",
}
DEFAULT_VERBS = DEFAULT_GRANT
# The vend wizard's presets: (value, button label, what it is for, the verbs it ticks). A worker
# is what `switchboard work` needs (docs/worker.md), release included, so a stop hands its todo back.
VERB_PRESETS = (
    ("worker", "Worker", "what switchboard work needs",
     ("list_todos", "get_todo", "claim_next", "heartbeat", "note", "complete", "fail", "release")),
    ("read-only", "Read-only", "list and read its todos", ("list_todos", "get_todo")),
)
assert sorted(v for _, group in VERB_GROUPS for v in group) == sorted(VERBS), "every verb is offered once"


# The one wording of a time span, shared with the derived liveness (board/store/liveness.py).
fmt_span = span


def attempt_line(attempt: dict) -> str:
    """One short line about an attempt, for announcing it: "Attempt 3 failed: tests red"."""
    seq = attempt["seq"]
    if attempt.get("outcome") is None:
        who = attempt.get("claimant")
        return f"Attempt {seq} opened" + (f" by {who}" if who else "")
    line = f"Attempt {seq} {state_label(attempt['outcome'])}"
    if attempt["outcome"] in DIED_OUTCOMES:
        return f"{line}: died, no report"
    summary = summary_start(attempt.get("summary"))
    return f"{line}: {summary}" if summary else line


def pretty_json(value: Any) -> str:
    """Data as indented JSON text; the template escapes it."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


# How a form names the argument a store message starts with.
ARGUMENT_LABELS = (("max_attempts", "Max attempts"), ("agent_id", "Agent id"), ("payload", "Payload"),
                   ("routing", "Routing"), ("title", "The title"), ("queue", "The queue"),
                   ("text", "The note"), ("priority", "The priority"), ("start_at", "The start time"),
                   ("run_at", "The start time"), ("key", "The key"))


def sentence(message: str) -> str:
    """A store message ("payload must be ...") as a sentence to show next to its field."""
    for name, label in ARGUMENT_LABELS:
        if message.startswith(name + " "):
            message = label + message[len(name):]
            break
    message = message[:1].upper() + message[1:]
    return message if message.endswith(".") else message + "."


def holder(todo: dict, actor: int) -> str:
    """Who holds the todo; "you" when it is the person looking (human.actor: in a team's
    space, the person, not the team)."""
    owner = todo.get("owner")
    if not owner or todo["state"] not in HOLDER_STATES:
        return ""
    if owner == f"human:{actor}":
        return "you"
    return owner


def deadline(todo: dict) -> tuple[str, datetime | None]:
    """A row's next deadline: the lease expiry of a held todo or a failed todo's retry."""
    if todo["state"] in HOLDER_STATES and todo.get("lease_expires_at"):
        return "lease until", todo["lease_expires_at"]
    if todo["state"] == "failed" and todo.get("next_retry_at"):
        return "retry at", todo["next_retry_at"]
    return "", None


def priority_label(priority: int | None) -> str:
    """A priority as the Board shows it: P0 (the most urgent) to P4."""
    return "" if priority is None else f"P{priority}"


def starts_at(todo: dict, now: datetime | None = None) -> datetime | None:
    """When a scheduled todo starts (it waits for its run_at, pending); None for any other.
    A snoozed or delayed todo that has fallen due keeps its run_at, now past."""
    run_at = todo.get("run_at")
    if todo["state"] != "pending" or run_at is None:
        return None
    return run_at if run_at > (now or datetime.now(timezone.utc)) else None


def actions_for(todo: dict, actor: int) -> list[str]:
    """The drawer's actions the todo's state allows for the person (human.actor) acting on it."""
    state = todo["state"]
    out = []
    if state == "pending":
        out.append("claim" if starts_at(todo) is None else "start_now")
        out.append("priority")
    if state == "claimed" and todo.get("owner") == f"human:{actor}":
        out.append("complete")
    if state in HOLDER_STATES:
        out += ["release", "fail"]
    if todo.get("dead_letter"):
        out.append("retry")
    if state in ("pending", *HOLDER_STATES) or (state == "failed" and todo.get("next_retry_at")):
        out.append("cancel")
    if state in ("done", "canceled") or todo.get("dead_letter"):  # ended: the store's todo_ended
        out.append("delete")
    return out


# The list's sortable columns, in the table's order: (sort column, heading, the words for its
# order ascending, descending).
LIST_COLUMNS = (
    ("title", "Title", "A to Z", "Z to A"),
    ("queue", "Queue", "A to Z", "Z to A"),
    ("state", "State", "pending first", "canceled first"),
    ("attempt", "Attempt", "fewest first", "most first"),
    ("last", "Last attempt", "by outcome, A to Z", "by outcome, Z to A"),
    ("holder", "Holder", "A to Z", "Z to A"),
    ("deadline", "Lease or retry", "soonest first", "latest first"),
    ("created", "Created", "oldest first", "newest first"),
    ("updated", "Updated", "earliest first", "latest first"),
)
# The list's sorts beyond its columns' headings, offered in the search's Sort choice: a
# todo's priority shows in its State cell (a column of its own would leave the title too
# little of a 1280 px screen).
MORE_SORTS = (("priority", "Priority", "P0 first", "P4 first"),)
_ORDER_WORDS = {column: (heading, asc, desc) for column, heading, asc, desc in LIST_COLUMNS + MORE_SORTS}


def sort_label(sort: str) -> str:
    """A sort as the Board says it: "Title, A to Z", "Created, newest first"."""
    column, descending = BOARD_SORTS[sort]
    heading, asc, desc = _ORDER_WORDS[column]
    return f"{heading}, {desc if descending else asc}"


def row_cursor(todo: dict, sort: str) -> str:
    """The cursor of the page after this row, in a list sorted newest first by a time: the
    live list moves its "Older todos" link to the last row it keeps (static/board.js)."""
    if sort not in LIST_SORTS:
        return ""
    return list_cursor(sort, todo[f"{sort}_at"], todo["id"])


LIMITS_SHOWN = ("TITLE_MAX_CHARS", "MAX_ATTEMPTS_MAX", "NOTE_MAX_BYTES", "SUMMARY_MAX_BYTES", "AGENT_ID_MAX_CHARS",
                "ENDPOINT_NAME_MAX_CHARS", "SEARCH_MAX_CHARS", "PRIORITY_DEFAULT", "KEY_MAX_BYTES",
                "QUEUE_LIMIT_MAX", "USERNAME_MAX_CHARS")


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(resource_dir("templates"))),
        autoescape=True,  # everywhere, whatever the file name
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=fmt_when, iso=fmt_iso, pretty_json=pretty_json, state_label=state_label,
                       span=fmt_span, summary_start=summary_start, usage_text=usage_text,
                       priority=priority_label)
    env.globals.update(holder=holder, deadline=deadline, actions_for=actions_for, starts_at=starts_at,
                       PRIORITIES=range(vocabulary.PRIORITY_MIN, vocabulary.PRIORITY_MAX + 1),
                       todo_detail=todo_detail, attempt_line=attempt_line, attempt_sentence=attempt_sentence,
                       DISPOSITION_WORDS=DISPOSITION_WORDS, relative=fmt_relative, waiting_for=waiting_for_person,
                       STATES=STATES, DIED_OUTCOMES=DIED_OUTCOMES,
                       BOARD_SORTS=BOARD_SORTS, BOARD_PAGE_SIZES=BOARD_PAGE_SIZES,
                       LIST_COLUMNS=LIST_COLUMNS, sort_label=sort_label, row_cursor=row_cursor, VERB_GROUPS=VERB_GROUPS, VERB_HELP=VERB_HELP,
                       VERB_PRESETS=VERB_PRESETS, record_line=record_line)
    # The bounds of arguments, for the forms' maxlength and help text (board/store/vocabulary.py).
    env.globals.update({name: getattr(vocabulary, name) for name in LIMITS_SHOWN})
    return env


ENV = _env()


def compile_templates() -> int:
    """Compile every template now: Jinja compiles a template, and each it includes, at its
    first rendering, 10-20 ms for the drawer's, which the first page or live update after
    a start would otherwise wait for. Returns how many."""
    names = ENV.list_templates(extensions=["html"])
    for name in names:
        ENV.get_template(name)
    return len(names)


def _may_nothing(role: str) -> bool:
    return False


def render(template: str, **context: Any) -> str:
    context.setdefault("now", datetime.now(timezone.utc))
    # What the human's role in the space lets them do: controls they may not use are not drawn
    # (the store refuses them anyway).
    human = context.get("human")
    context.setdefault("role", human.role if human is not None else None)
    context.setdefault("may", human.may if human is not None else _may_nothing)
    return ENV.get_template(template).render(**context)


def kept_message(refused: list[dict]) -> str:
    """Why a delete kept todos others wait on: "Kept “x”: “y” and “z” wait on it; drop the
    dependency or delete them with it." One sentence per todo kept."""
    said = []
    for r in refused:
        names = [f"“{w['title']}”" for w in r["waiters"]]
        who = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        said.append(f"Kept “{r['title']}”: {who} {'waits' if len(names) == 1 else 'wait'} on it; "
                    f"drop the dependency or delete {'that todo' if len(names) == 1 else 'them'} with it.")
    return " ".join(said)
