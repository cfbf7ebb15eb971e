"""Test fixtures: one Postgres per test session (embedded unless DATABASE_URL is set),
migrated once into a template database that every test clones into its own database."""

from __future__ import annotations

import contextlib
import itertools
import os
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from board.store import store as st
from board.store import vocabulary
from board.config import Settings
from board.store.db import EmbeddedPostgres, migrate, open_pool

ROOT = Path(__file__).resolve().parent.parent
# One template per pytest process, so concurrent test runs on one server never collide.
TEMPLATE = f"sb_template_{os.getpid()}"
_counter = itertools.count()
# The one allowance a timed bound gets for a loaded machine (other suites share its two
# cores): a test asserts the bound the README promises plus this, never a looser bound.
LOAD_SLACK_SECONDS = 1.0
# What a call may take past SWITCHBOARD_DB_WAIT_SECONDS while Postgres is away (docs/mcp.md):
# answering, once the one deadline its token lookup and statements share has passed.
CALL_MARGIN_SECONDS = 0.25


def pytest_addoption(parser):
    # e2e/conftest.py re-exports this module's names, this hook among them: add the option once.
    with contextlib.suppress(ValueError):
        parser.addoption("--long", action="store_true", default=False,
                         help="run tests/faults at its full size (the same as SWITCHBOARD_FAULTS_LONG=1)")


def _with_db(url: str, name: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info)


@pytest.fixture(scope="session")
def pg_admin_url():
    url = os.environ.get("DATABASE_URL")
    server = None
    if not url:
        server = EmbeddedPostgres(Path(os.environ.get("SWITCHBOARD_TEST_DATA_DIR", ROOT / ".switchboard" / "test")))
        url = server.start()
        # Throwaway test data: durability buys nothing here, and commits are most of a
        # test's time on a slow disk. Never done to a DATABASE_URL the user supplied.
        with psycopg.connect(url, autocommit=True) as conn:
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(sql.SQL("ALTER SYSTEM SET {} = off").format(sql.Identifier(setting)))
            conn.execute("SELECT pg_reload_conf()")
    yield url
    if server is not None:
        server.stop()


@pytest.fixture(scope="session")
async def template_url(pg_admin_url):
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(TEMPLATE)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))
    url = _with_db(pg_admin_url, TEMPLATE)
    await migrate(url)
    yield url
    drop_database(pg_admin_url, TEMPLATE)


def create_database(admin_url: str, template: str | None = TEMPLATE) -> tuple[str, str]:
    name = f"sb_test_{os.getpid()}_{next(_counter)}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if template:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template)))
        else:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name, _with_db(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
async def db_url(pg_admin_url, template_url):
    name, url = create_database(pg_admin_url)
    yield url
    drop_database(pg_admin_url, name)


@pytest.fixture
async def empty_db_url(pg_admin_url):
    name, url = create_database(pg_admin_url, template=None)
    yield url
    drop_database(pg_admin_url, name)


@pytest.fixture
def settings():
    return Settings(retry_base_seconds=10, retry_max_seconds=3600)


@pytest.fixture
async def pool(db_url):
    p = await open_pool(db_url, min_size=1, max_size=40)
    yield p
    await p.close()


@pytest.fixture
async def store(pool, settings):
    return st.Store(pool, settings)


_user_counter = itertools.count(1)


async def make_user(store: st.Store, name: str | None = None) -> st.Human:
    name = name or f"user{next(_user_counter)}"
    row = await store.user_insert(name, "not-a-real-hash")
    return st.Human(row["id"], row["username"])


async def make_agent(store: st.Store, *, user: st.Human | None = None, agent_id: str = "worker",
                     queues=("q",), scope=vocabulary.VERBS, session_id: str | None = None) -> st.Agent:
    user = user or await make_user(store)
    row, token = await store.endpoint_vend(user.user_id, name=agent_id, agent_id=agent_id, queues=list(queues),
                                           scope=list(scope))
    agent = await store.endpoint_authenticate(token)
    return agent.on_session(session_id)


@pytest.fixture
async def agent(store):
    return await make_agent(store)


@contextlib.asynccontextmanager
async def watchers_lent(url: str):
    """Today's statements on an older build's database (an upgrade test's setup): they read
    migration 0011's watchers table, call migration 0014's caller rules and read and write
    migrations 0015's to 0019's columns, so those are there for the block and gone before
    the upgrade that adds them."""
    migrations = Path(__file__).resolve().parent.parent / "migrations"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for name in ("0011_watchers.sql", "0014_caller_rules.sql", "0015_claim_order.sql", "0016_plans.sql",
                     "0017_schedules.sql", "0018_teams.sql", "0019_a2a.sql"):
            await conn.execute((migrations / name).read_text())
    try:
        yield
    finally:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("ALTER TABLE todos DROP COLUMN a2a_client, DROP COLUMN a2a_context")
            await conn.execute("DROP TABLE audit_records, team_members")
            await conn.execute("DROP TYPE audit_source, team_role")
            await conn.execute("DROP INDEX endpoints_team_space")
            await conn.execute("ALTER TABLE endpoints DROP CONSTRAINT endpoints_kind_check, DROP COLUMN space_id,"
                               " DROP CONSTRAINT endpoints_queues_check,"
                               " ADD CONSTRAINT endpoints_queues_check CHECK (cardinality(queues) > 0)")
            await conn.execute("ALTER TABLE endpoints ADD CONSTRAINT endpoints_kind_check CHECK ("
                               "(kind = 'vended' AND token_hash IS NOT NULL AND client_id IS NULL) OR (kind = 'oauth'"
                               " AND token_hash IS NULL AND client_id IS NOT NULL AND client_name IS NOT NULL))")
            await conn.execute("ALTER TABLE users DROP COLUMN kind")
            await conn.execute("ALTER TABLE todos DROP CONSTRAINT todos_schedule_id_fkey")
            await conn.execute("DROP TABLE watchers, queue_limits, todo_deps, schedules")
            await conn.execute("DROP FUNCTION todo_in_scope, user_endpoints, todo_held_by, lease_fence_holds, hook_rows,"
                               " todo_notify, queue_room, queue_held, todo_release_dependents")
            await conn.execute("ALTER TABLE todos DROP COLUMN priority, DROP COLUMN run_at, DROP COLUMN scheduled,"
                               " DROP COLUMN key, DROP COLUMN waits, DROP COLUMN after, DROP COLUMN waited_on,"
                               " DROP COLUMN schedule_id")
            await conn.execute("CREATE INDEX todos_pending_idx ON todos (endpoint_id, created_at, id)"
                               " WHERE state = 'pending'")


async def watch(store: st.Store, user_id: int) -> str:
    """Record a listener for the human's todos, as a server process's presence does
    (board/live/presence.py), so that their transitions notify; returns its process id."""
    process = str(uuid.uuid4())
    await store.watchers_hold(process, [user_id], 60)
    return process


# The cross-column rules (REQ-1, REQ-4): ended_at, outcome and disposition are null together
# or set together; claimer_endpoint_id is set exactly for an endpoint's claim; a died attempt
# (lease_expired, reaped) reports no summary and no artifact. The store holds them; this
# query finds the rows that break one, and the tests expect none.
RULE_BREAKERS = """
SELECT todo_id, seq, outcome::text AS outcome FROM attempts
 WHERE NOT ((ended_at IS NULL) = (outcome IS NULL) AND (outcome IS NULL) = (disposition IS NULL)
            AND (claimer_kind = 'endpoint') = (claimer_endpoint_id IS NOT NULL)
            AND (outcome IS NULL OR outcome NOT IN ('lease_expired', 'reaped')
                 OR (summary IS NULL AND artifact IS NULL)))"""


async def sql_rows(url_or_pool, query: str, params=None) -> list[dict]:
    """Read raw rows for assertions (tests may look at the tables directly)."""
    from psycopg.rows import dict_row
    async with await psycopg.AsyncConnection.connect(url_or_pool, row_factory=dict_row, autocommit=True) as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall()


# -- a real server, in-process, on a free port -------------------------------------------

import asyncio
import sys
import socket
import time
from dataclasses import dataclass


async def until(predicate, what: str, timeout: float = 10.0) -> None:
    """Wait for predicate() to hold (an event another task or process brings about), or fail
    naming what did not happen."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        await asyncio.sleep(0.01)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveServer:
    url: str
    app: object
    settings: Settings

    @property
    def runtime(self):
        return self.app.state.runtime

    @property
    def store(self) -> st.Store:
        return self.runtime.store


@contextlib.asynccontextmanager
async def run_server(settings: Settings):
    import uvicorn

    from board.app import create_app

    port = free_port()
    app = create_app(settings)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(300):
        if server.started:
            break
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    else:
        raise RuntimeError("server did not start")
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", app, settings)
    finally:
        server.should_exit = True
        done, _ = await asyncio.wait({task}, timeout=15)
        if not done:  # name what the stopping server still waits on, then give up on it
            for other in asyncio.all_tasks():
                other.print_stack(limit=6, file=sys.stderr)
            task.cancel()
            raise AssertionError("the server did not stop within 15 s (task stacks on stderr)")
        task.result()


@pytest.fixture
def server_settings(db_url):
    return Settings(database_url=db_url, secret_key="test-secret-key-0123456789", reaper_interval_seconds=0.2,
                    retry_interval_seconds=0.2, retention_interval_seconds=0, doorbell_heartbeat_seconds=0)


@pytest.fixture
async def live_server(server_settings):
    async with run_server(server_settings) as srv:
        yield srv
