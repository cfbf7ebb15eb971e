"""What the demo puts in place: its data dir and settings, its state file, the demo human
and endpoint, the todos the planner seeds (queues, seeds, the agents' summaries and
artifacts), and the bounds it settles to (live todos, todos in all)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from board.config import Settings
from board.errors import Invalid

DEMO_USER = "demo"
DEMO_AGENT_ID = "demo"
STATE_FILE = "demo.json"
SHUTDOWN_SUMMARY = "Demo stopping: released unfinished for the next worker."

# Terminal todos the server's own retention sweep removes, in days. The demo's bound on
# todos in all (Limits.max_todos) is what keeps the Board short; this is a backstop for a
# data dir left alone for a long time. Whole days, so the planner's cutoff (see
# board/demo/planner.py) is exact in seconds.
RETENTION_DAYS = 7.0


@dataclass(frozen=True)
class Seed:
    title: str
    payload: dict = field(default_factory=dict)
    max_attempts: int = 5


# The queues the planner keeps stocked, in the order they are first seeded. A queue is topped
# up with its whole list when nothing in it is pending, except the TRICKLE queues, which get
# one todo at a time and only when nothing in them is open: the rescuer's claim_next must find
# a lapsed lease there, not a pending todo.
QUEUES: dict[str, tuple[Seed, ...]] = {
    "builds": (
        Seed("Fix the flaky login test", {"repo": "web", "test": "test_login_redirect"}),
        Seed("Bump the base image to Debian 12", {"image": "python:3.11-bookworm"}),
        Seed("Cache wheels in CI", {"pipeline": "ci.yml"}),
        Seed("Pin the Node toolchain", {"node": "20.x"}),
        Seed("Speed up the lint job", {"job": "lint"}),
    ),
    "docs": (
        Seed("Document the retry backoff", {"page": "operations"}),
        Seed("Explain lease tokens in the guide", {"page": "agents"}),
        Seed("Fix broken links in the API reference", {"page": "api"}),
        Seed("Write the upgrade notes for 0.2", {"page": "changelog"}),
    ),
    "triage": (
        Seed("Triage: checkout page returns 500", {"ticket": 4211}),
        Seed("Triage: search is slow on mobile", {"ticket": 4217}),
        Seed("Triage: CSV export drops accents", {"ticket": 4230}),
        Seed("Triage: duplicate welcome emails", {"ticket": 4233}),
    ),
    "flaky": (
        Seed("Run the nightly integration suite", {"fails": "always"}, max_attempts=2),
        Seed("Rebuild the search index", {"fails": 1}, max_attempts=3),
        Seed("Sync billing with the ledger", {"fails": "always"}, max_attempts=2),
        Seed("Refresh the currency rates", {"fails": 1}, max_attempts=3),
    ),
    "ops": (
        Seed("Rotate the staging TLS certificate", {"host": "staging"}, max_attempts=3),
        Seed("Vacuum the analytics database", {"db": "analytics"}, max_attempts=3),
        Seed("Restart the stuck queue consumer", {"service": "consumer"}, max_attempts=3),
    ),
    "ingest": (
        Seed("Import the March sales export", {"file": "sales-2025-03.csv"}),
        Seed("Ingest yesterday's webhook backlog", {"source": "webhooks"}),
        Seed("Parse the vendor price list", {"file": "vendor-prices.xlsx"}),
    ),
}

TRICKLE = frozenset({"ingest"})

# What the agents write when they close an attempt. Stored with the attempt and shown on the
# Board; never printed on the terminal.
SUMMARIES = {
    "complete": (
        "Done: the change is in and three clean runs back it up.",
        "Fixed at the root; left a note on why the old approach failed.",
        "Finished. Reviewed the edge cases listed in the payload.",
    ),
    "fail": (
        "Tests still red after the fix; the failure looks environmental.",
        "The upstream service timed out twice; giving this attempt up.",
        "Could not reproduce locally; failing so it is retried later.",
    ),
    "release": (
        "Needs a maintainer decision on the approach; handing it back.",
        "Blocked on credentials I do not have; released for someone who does.",
    ),
    "flaky": (
        "Integration suite timed out at the database step.",
        "Two shards failed with connection resets; retrying is the best bet.",
    ),
    "rescue": (
        "Took over from a worker that stopped heartbeating; finished the import.",
    ),
}

ARTIFACTS = (
    "https://ci.example.com/builds/{n}/log",
    "https://github.com/example/app/pull/{n}",
    "mcp://cairn/note-{n}",
)


# -- the bounds the demo settles to ----------------------------------------------------------

@dataclass(frozen=True)
class Limits:
    """At most `live_todos` live todos (pending, held, or failed with a retry to come): the
    planner adds work only below it. At most `max_todos` todos in all: before adding, the
    planner removes the oldest finished ones (done, canceled, dead letters) beyond it.

    The defaults are above what the first minute reaches on a fresh data dir (about 20
    live, 80 in all), so the first minute is as lively as ever; from then on the Board
    holds the live work and the newest ~90 finished todos."""

    live_todos: int = 30
    max_todos: int = 120

    ENV = {"live_todos": "SWITCHBOARD_DEMO_LIVE_TODOS", "max_todos": "SWITCHBOARD_DEMO_MAX_TODOS"}

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Limits":
        env = os.environ if env is None else env
        values = {}
        for attr, name in cls.ENV.items():
            raw = (env.get(name) or "").strip()
            if not raw:
                continue
            try:
                values[attr] = int(raw)
            except ValueError:
                raise Invalid(f"{name} must be a whole number, not {raw!r}", argument=name) from None
            if values[attr] < 1:
                raise Invalid(f"{name} must be at least 1, not {raw!r}", argument=name)
        limits = cls(**values)
        if limits.max_todos < limits.live_todos:
            raise Invalid(f"{cls.ENV['max_todos']} ({limits.max_todos}) must be at least "
                          f"{cls.ENV['live_todos']} ({limits.live_todos})", argument=cls.ENV["max_todos"])
        return limits


def demo_data_dir(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("SWITCHBOARD_DATA_DIR") or ".switchboard") / "demo"


def demo_settings(settings: Settings, data_dir: Path, secret_key: str) -> Settings:
    return settings.with_(
        database_url=None, data_dir=data_dir, secret_key=settings.secret_key or secret_key,
        reaper_interval_seconds=1.0, retry_interval_seconds=0.5, retry_base_seconds=2.0,
        retry_max_seconds=10.0, lease_seconds=10.0, hook_urls=(), hook_secret=None,
        retention_days=RETENTION_DAYS, retention_interval_seconds=60.0,
    )


# -- the demo's state file -----------------------------------------------------------------

@dataclass
class DemoState:
    path: Path
    data: dict

    @classmethod
    def load(cls, path: Path) -> "DemoState":
        data: dict = {}
        if path.exists():
            try:
                data = json.loads(path.read_text())
            except ValueError:
                data = {}
        state = cls(path, data if isinstance(data, dict) else {})
        state.data.setdefault("secret_key", secrets.token_urlsafe(32))
        state.data.setdefault("seed_rounds", {})
        state.data.setdefault("added", [])
        return state

    # The todos the demo added (their ids, oldest first), kept here so that a second run
    # removes only its own: a todo the person adds on the Board, or through an endpoint of
    # their own, is never in this list.

    def added(self) -> list[str]:
        return list(self.data["added"])

    def remember(self, todo_id: str) -> None:
        self.data["added"].append(todo_id)
        self.save()

    def forget(self, todo_ids) -> None:
        gone = set(todo_ids)
        if gone & set(self.data["added"]):
            self.data["added"] = [i for i in self.data["added"] if i not in gone]
            self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self.data, f, indent=2)
        os.replace(tmp, self.path)


# -- the demo human and endpoint --------------------------------------------------------------

@dataclass
class Credentials:
    username: str
    password: str
    token: str
    user_id: int


async def ensure_credentials(store, state: DemoState) -> Credentials:
    """The demo human (user `demo`) and its one endpoint (every verb, the demo queues),
    created once and reused while demo.json remembers them."""
    from board.store.auth import hash_password, verify_password
    from board.store.vocabulary import VERBS

    data = state.data
    username = data.get("username") or DEMO_USER
    password = data.get("password") or secrets.token_urlsafe(12)
    user = await store.user_by_name(username)
    if user is not None:
        ok = await asyncio.to_thread(verify_password, user["password_hash"], password)
        if not ok:  # the state file was lost or edited: make a fresh demo user
            username, password = f"{DEMO_USER}-{secrets.token_hex(2)}", secrets.token_urlsafe(12)
            user = None
    if user is None:
        user = await store.user_insert(username, await asyncio.to_thread(hash_password, password))
    token = data.get("token")
    agent = await store.endpoint_authenticate(token) if token else None
    if agent is None or agent.user_id != user["id"] or not set(QUEUES) <= set(agent.queues):
        _, token = await store.endpoint_vend(user["id"], name="demo agents", agent_id=DEMO_AGENT_ID,
                                             queues=list(QUEUES), scope=list(VERBS))
    data.update(username=username, password=password, token=token)
    state.save()
    return Credentials(username, password, token, user["id"])
