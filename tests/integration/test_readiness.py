"""The store's readiness check (behind /readyz): ready only when Postgres answers within
the bound and every migration this build knows is applied; an unreachable or silent
Postgres is "not ready" within the bound, never an exception or a hang."""

from __future__ import annotations

import socket
import time

import psycopg
from psycopg_pool import AsyncConnectionPool

from board.store.db import load_migrations, migrate, open_pool
from board.store.store import Store
from tests.conftest import LOAD_SLACK_SECONDS, free_port

KNOWN = load_migrations()[-1].version
PREVIOUS = load_migrations()[-2].version
BOUND = 1.0  # the timeout these tests give schema_ready: "not ready" within it, never a hang


async def test_a_migrated_database_is_ready(store):
    assert await store.schema_ready(KNOWN, timeout=2.0) is True


async def test_a_database_without_the_newest_migration_is_not_ready(empty_db_url, settings):
    await migrate(empty_db_url, target=PREVIOUS)
    pool = await open_pool(empty_db_url, min_size=1, max_size=2)
    try:
        store = Store(pool, settings)
        assert await store.schema_ready(KNOWN, timeout=2.0) is False
        assert await store.schema_ready(PREVIOUS, timeout=2.0) is True
    finally:
        await pool.close()


async def _not_ready_within_the_bound(url: str, settings) -> None:
    pool = AsyncConnectionPool(url, min_size=1, max_size=2, open=False)
    await pool.open(wait=False)
    try:
        started = time.monotonic()
        assert await Store(pool, settings).schema_ready(KNOWN, timeout=BOUND) is False
        seconds = time.monotonic() - started
        print(f"not ready after {seconds:.2f} s")
        assert seconds < BOUND + LOAD_SLACK_SECONDS, f"not ready only after {seconds:.2f} s (bound {BOUND} s)"
    finally:
        await pool.close(timeout=1)


async def test_a_postgres_on_a_wrong_port_is_not_ready_within_the_bound(db_url, settings):
    info = psycopg.conninfo.conninfo_to_dict(db_url)
    info.update(host="127.0.0.1", port=str(free_port()))  # nothing listens there
    await _not_ready_within_the_bound(psycopg.conninfo.make_conninfo(**info), settings)


async def test_a_postgres_that_accepts_but_never_answers_is_not_ready_within_the_bound(db_url, settings):
    with socket.socket() as silent:  # the kernel completes the handshake; nobody ever replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        info = psycopg.conninfo.conninfo_to_dict(db_url)
        info.update(host="127.0.0.1", port=str(silent.getsockname()[1]))
        await _not_ready_within_the_bound(psycopg.conninfo.make_conninfo(**info), settings)
