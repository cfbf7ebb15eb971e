"""The attempts table refuses rows that break its invariants, whoever writes them (REQ-1, REQ-4,
REQ-5, REQ-11): the store validates first, the database is the last line. Raw SQL, so the
store's own validation is not what is being tested."""

from __future__ import annotations

import psycopg
import pytest

from tests.conftest import sql_rows

OPEN = dict(seq=1, attempt=1, claimer_kind="endpoint", endpoint=True, claimant=None, summary=None, artifact=None,
            token_hash=None, ended=False, outcome=None, disposition=None)


async def _insert(db_url: str, todo_id: str, **over) -> None:
    row = dict(OPEN, **over)
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, owner, claimant,"
            " claimed_at, lease_expires_at, ended_at, outcome, disposition, summary, artifact, lease_token_hash)"
            " SELECT t.id, %(seq)s, %(attempt)s, %(claimer_kind)s, CASE WHEN %(endpoint)s THEN t.endpoint_id END,"
            " 'agent:x', %(claimant)s, now(), now(), CASE WHEN %(ended)s THEN now() END, %(outcome)s,"
            " %(disposition)s, %(summary)s, %(artifact)s, %(token_hash)s FROM todos t WHERE t.id = %(id)s",
            dict(row, id=todo_id))


@pytest.fixture
async def todo_id(store, agent):
    return (await store.todo_add(agent, queue="q", title="held to its rules"))["id"]


BROKEN = {
    "seq below 1": dict(seq=0),
    "attempt below 1": dict(attempt=0),
    "claimant over 128 bytes": dict(claimant="é" * 65),
    "summary over 2048 bytes": dict(summary="x" * 2049),
    "artifact over 512 bytes": dict(artifact="https://example.com/" + "a" * 493),
    "lease token hash not a SHA-256": dict(token_hash=b"\x00" * 31),
    "ended without an outcome": dict(ended=True),
    "an outcome while open": dict(outcome="completed", disposition="done"),
    "an outcome without a disposition": dict(ended=True, outcome="failed"),
    "an endpoint claim without its endpoint": dict(endpoint=False),
    "an owner claim naming an endpoint": dict(claimer_kind="owner"),
    "a died attempt with a summary": dict(ended=True, outcome="reaped", disposition="requeued", summary="hi"),
    "a died attempt with an artifact": dict(ended=True, outcome="lease_expired", disposition="requeued",
                                            artifact="https://example.com/a"),
}


# The cross-column rules (a trigger since 0006) report the rule they enforce by name.
CROSS_COLUMN = {"ended without an outcome", "an outcome while open", "an outcome without a disposition",
                "an endpoint claim without its endpoint", "an owner claim naming an endpoint",
                "a died attempt with a summary", "a died attempt with an artifact"}


@pytest.mark.parametrize("case", list(BROKEN))
async def test_the_database_refuses_an_attempt_that_breaks_a_rule(db_url, todo_id, case):
    with pytest.raises(psycopg.errors.CheckViolation) as refused:
        await _insert(db_url, todo_id, **BROKEN[case])
    if case in CROSS_COLUMN:
        assert refused.value.diag.constraint_name == "attempts_consistent"
    assert await sql_rows(db_url, "SELECT 1 FROM attempts WHERE todo_id = %s", (todo_id,)) == []


# A close written by hand is held to the same rules as an insert; the row stays open.
BROKEN_CLOSE = {
    "closed without a disposition": "ended_at = now(), outcome = 'completed'",
    "an outcome without ended_at": "outcome = 'failed', disposition = 'retry_scheduled'",
    "reaped with a summary": "ended_at = now(), outcome = 'reaped', disposition = 'requeued', summary = 'hi'",
    "the endpoint dropped from an endpoint claim": "claimer_endpoint_id = NULL",
    "summary over 2048 bytes": "ended_at = now(), outcome = 'failed', disposition = 'retry_scheduled', "
                               "summary = repeat('x', 2049)",
}


@pytest.mark.parametrize("case", list(BROKEN_CLOSE))
async def test_the_database_refuses_an_update_that_breaks_a_rule(db_url, todo_id, case):
    await _insert(db_url, todo_id)
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.CheckViolation):
            await conn.execute(f"UPDATE attempts SET {BROKEN_CLOSE[case]} WHERE todo_id = %s", (todo_id,))
    rows = await sql_rows(db_url, "SELECT ended_at, outcome, summary, claimer_endpoint_id IS NOT NULL AS ep"
                                  " FROM attempts WHERE todo_id = %s", (todo_id,))
    assert rows == [{"ended_at": None, "outcome": None, "summary": None, "ep": True}]


async def test_the_database_accepts_attempts_at_the_limits(db_url, todo_id):
    await _insert(db_url, todo_id, seq=1, claimant="é" * 64, summary="x" * 2048,
                  artifact="https://example.com/" + "a" * 492, token_hash=b"\x00" * 32,
                  ended=True, outcome="failed", disposition="retry_scheduled")
    await _insert(db_url, todo_id, seq=2, attempt=2, ended=True, outcome="reaped", disposition="dead_lettered")
    await _insert(db_url, todo_id, seq=3, attempt=1, claimer_kind="owner", endpoint=False)
    rows = await sql_rows(db_url, "SELECT seq, outcome FROM attempts WHERE todo_id = %s ORDER BY seq", (todo_id,))
    assert [(r["seq"], r["outcome"]) for r in rows] == [(1, "failed"), (2, "reaped"), (3, None)]


# The rule trigger runs only for statements that set a column its rules read (0010): a
# heartbeat's update (last_heartbeat_at, lease_expires_at) does not call it, a close does.
# Counted with the function-call statistics of the same transaction; setting
# track_functions needs a superuser, so on a server where the tests are not one the
# trigger's column list is read from the catalog instead.
RULE_COLUMNS = {"ended_at", "outcome", "disposition", "summary", "artifact", "claimer_kind", "claimer_endpoint_id"}


async def _trigger_calls(db_url: str, todo_id: str, set_clause: str) -> int | None:
    """How many times one UPDATE calls the rule trigger; None where that cannot be counted."""
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        try:
            await conn.execute("SET track_functions = 'pl'")
        except psycopg.errors.InsufficientPrivilege:
            return None
        await conn.execute(f"UPDATE attempts SET {set_clause} WHERE todo_id = %s", (todo_id,))
        cur = await conn.execute("SELECT coalesce(pg_stat_get_xact_function_calls('attempts_consistent'::regproc), 0)")
        (calls,) = await cur.fetchone()
        await conn.rollback()
        return calls


async def test_a_heartbeat_does_not_run_the_rule_trigger_and_a_close_does(db_url, todo_id):
    await _insert(db_url, todo_id)
    heartbeat = "last_heartbeat_at = now(), lease_expires_at = now() + interval '1 minute'"
    calls = await _trigger_calls(db_url, todo_id, heartbeat)
    if calls is None:  # not a superuser: read the trigger's column list instead
        rows = await sql_rows(db_url, "SELECT a.attname::text AS col FROM pg_trigger g JOIN pg_attribute a"
                                      " ON a.attrelid = g.tgrelid AND a.attnum = ANY(g.tgattr)"
                                      " WHERE g.tgname = 'attempts_consistent'")
        assert {r["col"] for r in rows} == RULE_COLUMNS
        return
    assert calls == 0
    closing = "ended_at = now(), outcome = 'completed', disposition = 'done'"
    assert await _trigger_calls(db_url, todo_id, closing) == 1
    assert await _trigger_calls(db_url, todo_id, "summary = 'noted'") == 1
