"""Switchboard's vocabulary, defined once: every other module imports these names.

States and transitions are SPEC-0003's as the design baseline fixes them; outcomes and
dispositions are SPEC-0034's. Transition kinds (in the notification payload, the metrics
label, the in-process hooks and the doorbell) are all past participles: what happened.
"""

from __future__ import annotations

import re
from datetime import datetime
from dataclasses import dataclass, replace
from typing import Any, Callable

from board.errors import Forbidden

STATES = ("pending", "claimed", "input_required", "auth_required", "done", "failed", "canceled")
# A holder has the lease in these states; the interrupt states pause it for input or auth.
HOLDER_STATES = ("claimed", "input_required", "auth_required")
INTERRUPT_STATES = ("input_required", "auth_required")

OUTCOMES = ("completed", "failed", "released", "lease_expired", "reaped", "canceled", "revoked")
DISPOSITIONS = ("done", "retry_scheduled", "dead_lettered", "requeued", "canceled")
# An attempt died when its lease lapsed with no report from its holder (REQ-4).
DIED_OUTCOMES = ("lease_expired", "reaped")

# The verbs an endpoint's scope may grant; each is an MCP tool of the same name.
VERBS = (
    "add_todo", "list_todos", "get_todo", "claim", "claim_next", "heartbeat",
    "complete", "fail", "release", "cancel", "interrupt", "resume", "note",
)
# What a new credential is granted unless the person ticks more: the vend wizard and the
# consent screen tick these at first (a worker's loop; never release, never a producer's verb).
DEFAULT_GRANT = ("list_todos", "get_todo", "claim_next", "heartbeat", "complete", "fail")
# What a worker calls (switchboard_worker's loop): the scope /mcp's 401 asks an OAuth host for,
# so that it does not request every verb.
WORKER_SCOPE = ("claim_next", "heartbeat", "note", "complete", "fail", "release", "get_todo")
# A verb another implies: an endpoint that may keep a lease alive may say what it is doing;
# one that may add a todo, or complete one, may do several at once (add_todos and
# complete_todos are no verbs of their own to grant).
IMPLIED_BY = {"note": "heartbeat", "add_todos": "add_todo", "complete_todos": "complete"}

# What each committed transition is called wherever it is reported.
TRANSITION_KINDS = (
    "added", "claimed", "lease_expired", "lease_extended", "completed", "failed", "released", "canceled",
    "interrupted", "resumed", "retried", "reaped", "requeued", "revoked", "deleted", "answered",
    # the claim's order (migration 0015): added or released to wait for its run_at, fallen
    # due (or started now), a pending todo's priority changed
    "scheduled", "due", "reprioritized",
    # plans (migration 0016): added (or fallen due) still waiting for other todos, made
    # claimable by the last of them completing or by a dependency dropped
    "waiting", "unblocked",
)
# Kinds of notifications about endpoints rather than todos (no subscriber re-reads a todo).
CONTROL_KINDS = ("endpoint_revoked", "endpoint_changed")
# Kinds of notifications about an open attempt's working notes (no transition: the todo's
# state and lease stay as they are; an open drawer re-reads it).
NOTE_KINDS = ("noted",)
# Kinds of notifications about a human's queue (its pause), for the Board and the doorbell.
QUEUE_KINDS = ("queue_paused", "queue_resumed", "queue_limited")
# The kind of notification a schedule added, paused, resumed or removed sends (every
# process's timer looks again).
SCHEDULE_KINDS = ("schedules",)
# Kinds of notifications about a team (migration 0018): a person's action recorded (who did
# it, for the Board to say), a member's role changed, a member removed (their streams end).
TEAM_KINDS = ("activity", "member_changed", "member_removed")
# The kind of the transition each closing verb commits.
CLOSED_BY = {"complete": "completed", "fail": "failed", "release": "released", "cancel": "canceled"}

# The LISTEN/NOTIFY channel; versioned, so a payload change can move to a new one.
NOTIFY_CHANNEL = "switchboard_v1"

# -- the bounds of arguments ---------------------------------------------------------------
# Every bound an argument has, written once: the MCP tools' published input schemas
# (board/mcp/tools.py), the store's checks (inputs.py, store.py, accounts.py), the Board's
# forms and their templates (maxlength, help text; Jinja globals in board/web/templating.py) and
# the error messages all read it here. Where the database holds the same bound (a domain, a
# CHECK or the todos trigger, in migrations/), tests/acceptance/test_argument_bounds.py
# holds the three together.

# Queue names: the one rule, for input checks and messages (the todos trigger holds it too).
QUEUE_MAX_CHARS = 64
QUEUE_PATTERN = re.compile(rf"[A-Za-z0-9_.:-]{{1,{QUEUE_MAX_CHARS}}}")
QUEUE_RULE = f"1-{QUEUE_MAX_CHARS} of letters, digits, _ . : -"
# An endpoint's agent id and a person's username (the endpoints and users CHECKs), and the
# name an endpoint is shown by (cut to this many characters).
AGENT_ID_MAX_CHARS = 128
USERNAME_MAX_CHARS = 64
ENDPOINT_NAME_MAX_CHARS = 100

# A todo's title (the todos trigger), and its max_attempts when it is added.
TITLE_MAX_CHARS = 500
MAX_ATTEMPTS_MAX = 1000
MAX_ATTEMPTS_DEFAULT = 5
SUMMARY_MAX_BYTES = 2048
ARTIFACT_MAX_BYTES = 512
CLAIMANT_MAX_BYTES = 128
RESULT_MAX_BYTES = 65536
# Usage per attempt (migration 0004's domains hold the same bounds).
USAGE_TOKENS_MAX = 10**12
USAGE_COST_MAX = 10**9
USAGE_MODEL_MAX_BYTES = 128
# get_todo's continuation chain: at most this many links each way from the todo, and of a
# longer chain the CHAIN_MAX links nearest it (passed to todo_get as chain_max).
CHAIN_MAX = 50
PRIOR_ATTEMPTS = 5
# Notes on an attempt (migration 0004): each cut to this many bytes; the newest few come with
# each prior attempt of a claim, get_todo returns notes_limit of them (0 to the maximum).
NOTE_MAX_BYTES = 2048
PRIOR_NOTES = 3
# An interrupt's question (migration 0009): its text is cut like a summary; at most this many
# choices of at most this many bytes each; it may expire at most this far ahead.
QUESTION_CHOICES_MAX = 10
CHOICE_MAX_BYTES = 200
QUESTION_EXPIRES_MAX_SECONDS = 30 * 86400
NOTES_LIMIT_DEFAULT = 5
NOTES_LIMIT_MAX = 50
ATTEMPTS_LIMIT_DEFAULT = 20
ATTEMPTS_LIMIT_MAX = 50
LIST_LIMIT_DEFAULT = 50
LIST_LIMIT_MAX = 200
# The claim's order (migration 0015): a priority, 0 the most urgent (shown P0 to P4); a
# start at most DELAY_SECONDS_MAX ahead (add_todo's delay_seconds, release's snooze); a key
# of at most KEY_MAX_BYTES; a queue's limit on its held todos, 0 to remove it.
PRIORITY_MIN, PRIORITY_MAX, PRIORITY_DEFAULT = 0, 4, 2
DELAY_SECONDS_MAX = 31 * 86400
KEY_MAX_BYTES = 200
QUEUE_LIMIT_MAX = 100000
# The due timer's batch, and its longest sleep when nothing is scheduled (a scheduled add
# wakes it sooner; the sleep only bounds how late a missed notification is made up for).
DUE_BATCH = 500
DUE_SLEEP_MAX_SECONDS = 30.0
# Schedules (migration 0017): the timer's batch of due schedules, the longest --every, how many
# next run times a preview shows.
SCHEDULE_BATCH = 100
SCHEDULE_EVERY_MAX = 366 * 86400
SCHEDULE_PREVIEW = 3

# A2A push notification configs (migration 0021): at most this many a task; the bounds of
# their fields (the table's CHECKs hold the same).
PUSH_CONFIGS_MAX = 10
PUSH_CONFIG_ID_MAX_CHARS = 128
PUSH_URL_MAX_CHARS = 2048
PUSH_TOKEN_MAX_CHARS = 1024
PUSH_AUTH_SCHEME_MAX_CHARS = 64
PUSH_AUTH_CREDENTIALS_MAX_CHARS = 4096

# The batched verbs: todos per add_todos call, todos one claim_next may claim at once, and
# todos one complete_todos may close.
TODOS_ADD_MAX = 1000
# How many todos one todo may wait for (add_todo's and each add_todos item's after).
AFTER_MAX = 20
# How many of the todos waiting on a todo get_todo lists (blocking, the Board's plan).
DEPENDENTS_MAX = 50
CLAIM_NEXT_LIMIT_MAX = 50
COMPLETE_TODOS_MAX = 50
# The longest search text each of the Board's list filters takes (longer cannot match: a
# title is at most TITLE_MAX_CHARS characters, a claimant CLAIMANT_MAX_BYTES bytes; a
# payload key or value is not bounded, these are).
SEARCH_MAX_CHARS = {"title": TITLE_MAX_CHARS, "claimant": CLAIMANT_MAX_BYTES, "payload_key": 200,
                    "payload_value": 1000}

# A list is newest first by one of these times.
LIST_SORTS = ("created", "updated")
# The Board's list also sorts by any of its columns, each way: sort name -> (column, descending).
# A column's first click takes its natural order (times newest first, the rest A to Z or
# smallest first); the name for the other way adds its direction. created and updated,
# newest first, are the list_todos sorts (an index each); the others read the human's
# matching todos to order them.
BOARD_SORT_COLUMNS = {"title": False, "queue": False, "state": False, "attempt": False, "last": False,
                      "holder": False, "deadline": False, "created": True, "updated": True, "priority": False}
BOARD_SORTS = {name: (column, desc) for column, first_desc in BOARD_SORT_COLUMNS.items()
               for name, desc in ((column, first_desc), (f"{column}_{'asc' if first_desc else 'desc'}", not first_desc))}
BOARD_PAGE_SIZES = (25, 50, 100)
SWEEP_BATCH = 500
# Board bulk actions: todos per batch, transitions in flight at once, todos per action.
BULK_BATCH = 100
BULK_CONCURRENCY = 4
BULK_MAX = 1000


# -- callers and transitions ---------------------------------------------------------

@dataclass(frozen=True)
class Agent:
    """An endpoint credential calling over MCP. Its reads are scoped to its space's todos in
    its granted queues (ADR-0022): its own, or a team's for an endpoint of a team (migration
    0018); its claims write owner = agent:<agent_id>."""

    endpoint_id: str
    agent_id: str
    user_id: int
    scope: frozenset[str]
    queues: tuple[str, ...]
    session_id: str | None = None
    # An OAuth access token's expiry (unix seconds) and the resource it was issued for; both
    # None for a vended endpoint's token, which does not expire.
    expires_at: float | None = None
    resource: str | None = None
    # A team endpoint's space: the team's space endpoint, which owns every todo of the team
    # (migration 0018). None for a personal endpoint, whose own todos are its space.
    space_id: str | None = None

    @property
    def owner(self) -> str:
        return f"agent:{self.agent_id}"

    @property
    def space(self) -> str:
        """The endpoint whose todos this endpoint reads and claims."""
        return self.space_id or self.endpoint_id

    def allows(self, verb: str) -> bool:
        if verb == "get_todo":  # REQ-8: an endpoint that may list may read one
            return "get_todo" in self.scope or "list_todos" in self.scope
        return verb in self.scope or IMPLIED_BY.get(verb) in self.scope

    def require(self, verb: str) -> None:
        if not self.allows(verb):
            raise Forbidden(f"this endpoint's scope does not grant {verb}", op=verb)

    def on_session(self, session_id: str | None) -> "Agent":
        return replace(self, session_id=session_id)


# A team member's roles, least first: a viewer sees everything of the team and changes
# nothing; an operator also acts on todos; an admin also manages members, endpoints, pauses,
# limits and schedules. A person is the admin of their own space.
ROLES = ("viewer", "operator", "admin")
AUDIT_SOURCES = ("board", "cli")


@dataclass(frozen=True)
class Human:
    """A person acting in one space (migration 0018): their own (user_id is theirs) or a
    team's (user_id is the team's), with their role there. Sees the todos of the space's
    endpoints, and is exempt from the fence (REQ-6). actor_id is the person; via says where
    they act from, for the record of actions."""

    user_id: int
    username: str
    actor_id: int | None = None  # None: the space's own person
    role: str = "admin"
    via: str = "board"
    space_name: str | None = None  # a team's name; None in a personal space

    @property
    def actor(self) -> int:
        return self.user_id if self.actor_id is None else self.actor_id

    @property
    def owner(self) -> str:
        return f"human:{self.actor}"

    @property
    def in_team(self) -> bool:
        return self.actor_id is not None and self.actor_id != self.user_id

    def may(self, role: str) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)


Caller = Agent | Human


# -- committed-transition events ---------------------------------------------------------

@dataclass(frozen=True)
class Transition:
    """One committed transition, handed to observers after commit (metrics, hooks, the
    doorbell). Carries the closing attempt when one closed. Never logged."""

    kind: str  # one of vocabulary.TRANSITION_KINDS
    todo_id: str
    endpoint_id: str
    queue: str
    state: str
    dead_letter: bool = False
    closed: dict | None = None
    attempts_total: int = 0
    opened_seq: int | None = None
    waited_seconds: float | None = None  # answered: from the question to its first answer
    run_at: datetime | None = None  # added or released: when it may first be claimed (the due timer's wake)


Observer = Callable[[Transition], Any]
