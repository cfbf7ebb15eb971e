"""/healthz and /readyz through a real running server, as a load balancer or an
orchestrator probes them: no session, no token, nothing revealed but ready or not."""

from __future__ import annotations

import time

import httpx
import psycopg
from psycopg import sql

import board.app
from board.config import Settings
from board.store.db import migrate
from board.ops.health import READY_TIMEOUT_SECONDS, RETRY_AFTER_SECONDS
from tests.conftest import LOAD_SLACK_SECONDS, run_server

# docs/reliability.md: once Postgres is back, the first call succeeds within 1 s.
FIRST_CALL_AFTER_BACK_SECONDS = 1.0


def settings_for(url: str) -> Settings:
    return Settings(database_url=url, secret_key="test-secret-key-0123456789", retention_interval_seconds=0,
                    doorbell_heartbeat_seconds=0)


async def probe(server, path: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.url, timeout=30, follow_redirects=False) as client:
        return await client.get(path)


def assert_ready(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.content == b"ready\n" and "set-cookie" not in response.headers


def assert_not_ready(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.content == b"not ready\n"  # no version, no error text
    assert response.headers["retry-after"] == str(RETRY_AFTER_SECONDS)
    assert "set-cookie" not in response.headers


async def test_healthz_and_readyz_answer_200_without_a_session_on_a_migrated_database(live_server):
    health = await probe(live_server, "/healthz")
    assert health.status_code == 200 and health.content == b"ok\n"
    assert "set-cookie" not in health.headers and health.headers["cache-control"] == "no-store"
    assert_ready(await probe(live_server, "/readyz"))
    assert (await probe(live_server, "/")).status_code == 303  # the Board itself still wants a sign-in


async def test_readyz_is_503_when_the_database_lacks_a_migration_this_build_knows(empty_db_url, monkeypatch):
    await migrate(empty_db_url, target=1)
    # A server whose own startup migration stopped short: the database stays at version 1.
    monkeypatch.setattr(board.app, "migrate", lambda url: migrate(url, target=1))
    async with run_server(settings_for(empty_db_url)) as server:
        assert_not_ready(await probe(server, "/readyz"))
        assert (await probe(server, "/healthz")).status_code == 200
    await migrate(empty_db_url)
    async with run_server(settings_for(empty_db_url)) as server:
        assert_ready(await probe(server, "/readyz"))


async def _set_reachable(admin_url: str, dbname: str, reachable: bool) -> None:
    """Open or close the database to every new connection; closing also ends the open ones
    (the server's pool and LISTEN connection), as a Postgres going away does."""
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS {}").format(
            sql.Identifier(dbname), sql.SQL("true" if reachable else "false")))
        if not reachable:
            await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE datname = %s AND pid <> pg_backend_pid()", (dbname,))


async def test_readyz_is_503_while_the_database_cannot_be_reached_and_200_once_it_is_back(db_url, pg_admin_url):
    dbname = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
    async with run_server(settings_for(db_url)) as server:
        assert_ready(await probe(server, "/readyz"))
        await _set_reachable(pg_admin_url, dbname, False)
        try:
            for _ in range(2):  # a dead pooled connection first, then no connection at all
                started = time.monotonic()
                assert_not_ready(await probe(server, "/readyz"))
                seconds = time.monotonic() - started
                print(f"/readyz answered 503 in {seconds:.2f} s with the database unreachable")
                # board/ops/health.py: "not ready" unless Postgres answers within READY_TIMEOUT_SECONDS
                assert seconds < READY_TIMEOUT_SECONDS + LOAD_SLACK_SECONDS, f"503 only after {seconds:.2f} s"
            assert (await probe(server, "/healthz")).status_code == 200  # the process is still up
        finally:
            await _set_reachable(pg_admin_url, dbname, True)
        started = time.monotonic()
        bound = FIRST_CALL_AFTER_BACK_SECONDS + LOAD_SLACK_SECONDS
        while (response := await probe(server, "/readyz")).status_code != 200:
            assert_not_ready(response)
            assert time.monotonic() - started < bound, f"/readyz still 503 {bound} s after the database was back"
        seconds = time.monotonic() - started
        print(f"/readyz answered 200 again {seconds:.2f} s after the database was back")
        assert seconds < bound, f"/readyz answered 200 again only {seconds:.2f} s after the database was back"
