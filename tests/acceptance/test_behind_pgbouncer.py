"""A `switchboard serve` process whose statements go through Debian's PgBouncer in
transaction mode, with docs/scaling.md's configuration, and whose LISTEN connection is
direct (SWITCHBOARD_LISTEN_DATABASE_URL): migrations run directly, agents drain over MCP,
and the Board's live stream shows their changes. Skips, naming the package, where PgBouncer
is not installed."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import psycopg
import pytest
from psycopg import sql

from tests import realparts
from tests.acceptance.mcp_helpers import call, connect, vend
from tests.acceptance.test_board_auth import make_human, sign_in
from tests.acceptance.test_board_live import open_stream
from tests.conftest import ROOT, create_database, drop_database, sql_rows
from board.config import Settings
from board.store import store as st
from board.store.db import open_pool
from tests.faults.harness import ServerProcess

DEADLINE = 20.0
CYCLES = 12  # past psycopg's prepare threshold (5 runs of a statement) on every statement of the cycle


@pytest.fixture(scope="module")
async def pooled(pg_admin_url, tmp_path_factory):
    """An empty database migrated directly by `switchboard migrate`, then a serve process on
    it through PgBouncer; yields the server, the direct URL and a store on it."""
    realparts.require("pgbouncer")
    folder = tmp_path_factory.mktemp("pgbouncer")
    name, direct = create_database(pg_admin_url, template=None)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")} | {"DATABASE_URL": direct}
    migrated = subprocess.run([sys.executable, "-m", "board", "migrate"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
    assert migrated.returncode == 0, migrated.stderr
    with psycopg.connect(direct, autocommit=True) as conn:  # what the pool's startup options would set
        conn.execute(sql.SQL("ALTER DATABASE {} SET plan_cache_mode = force_generic_plan")
                     .format(sql.Identifier(name)))
    pool = await open_pool(direct, min_size=1, max_size=4)
    try:
        with realparts.pgbouncer(pg_admin_url, folder) as bouncer:
            # An older PgBouncer (Debian 12 has 1.18) cannot carry prepared statements: turn them off.
            prepared = {} if bouncer.prepared_statements else {"SWITCHBOARD_PREPARED_STATEMENTS": "off"}
            server = ServerProcess(bouncer.url(name), folder / "serve.log", SWITCHBOARD_LISTEN_DATABASE_URL=direct,
                                   **prepared)
            await server.start()
            try:
                yield server, direct, st.Store(pool, Settings()), bouncer
            finally:
                await server.stop()
    finally:
        await pool.close()
        drop_database(pg_admin_url, name)


async def test_migrations_ran_directly_and_the_server_uses_the_pooler_for_its_statements(pooled):
    server, direct, _, bouncer = pooled
    rows = await sql_rows(direct, "SELECT count(*) AS n FROM schema_migrations")
    assert rows[0]["n"] == len(list((ROOT / "migrations").glob("[0-9]*.sql")))
    async with httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http:
        assert (await http.get("/readyz")).status_code == 200
    # The pool logged in through PgBouncer; the LISTEN is a direct session of its own.
    dbname = psycopg.conninfo.conninfo_to_dict(direct)["dbname"]
    assert f"login attempt: db={dbname} " in bouncer.log_text()
    listeners = await sql_rows(direct, "SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE 'LISTEN%%'"
                                       " AND datname = current_database()")
    assert listeners[0]["n"] == 1


async def test_agents_drain_over_mcp_through_the_pooler_and_a_board_watches_live(pooled):
    server, _, store, _ = pooled
    human = await make_human(store, "pooled-ada")
    ep = await vend(store, user_id=human.user_id, agent_id="pooled")
    async with httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as board:
        await sign_in(board, "pooled-ada")
        async with open_stream(board) as stream, connect(server, ep.token) as client:
            for i in range(CYCLES):
                added = await call(client, "add_todo", {"queue": "q", "title": f"pooled {i}"})
                seen = await stream.next_todo(added["id"], timeout=DEADLINE)  # LISTEN, on the direct connection
                assert f"pooled {i}" in seen["row"]
                claimed = await call(client, "claim_next", {"queue": "q", "require_fence": True})
                assert claimed["todo"]["id"] == added["id"]
                await call(client, "heartbeat", {"id": added["id"], "lease_token": claimed["lease_token"]})
                done = await call(client, "complete", {"id": added["id"], "lease_token": claimed["lease_token"],
                                                       "summary": "through the pooler"})
                assert done["state"] == "done"
    rows = await sql_rows(pooled[1], "SELECT count(*) AS n FROM todos WHERE state = 'done'")
    assert rows[0]["n"] == CYCLES
    assert " ERROR " not in server.log_text()  # no statement failed, the sweeps' included
