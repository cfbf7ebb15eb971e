"""The todos table refuses rows that break SPEC-0003's lifecycle rules, whoever writes them.
The rules are two row triggers (0002) instead of the CHECK constraints the table had before
SPEC-0034 (REQ-18: a CHECK is planned again on every statement). These tests hold the
triggers to what the CHECKs did: the same rows accepted and refused, with the same SQLSTATE
and constraint names, on INSERT and UPDATE. Raw SQL, so the store's own validation is not
what is being tested."""

from __future__ import annotations

import itertools

import psycopg
import pytest

from board.store import store as st
from board.store.base import _translate
from board.store.db import migrate
from tests.conftest import create_database, drop_database, sql_rows

STATES = ("pending", "claimed", "input_required", "auth_required", "done", "failed", "canceled")

# The system before SPEC-0034 (0001, CHECK constraints) with SPEC-0034's two counters added
# as CHECKs too: the rules as constraints, for the triggers to be compared with.
AS_CHECKS = """
ALTER TABLE todos
  ADD COLUMN attempts_total  integer NOT NULL DEFAULT 0 CONSTRAINT todos_attempts_total_check CHECK (attempts_total >= 0),
  ADD COLUMN attempts_pruned integer NOT NULL DEFAULT 0 CONSTRAINT todos_attempts_pruned_check CHECK (attempts_pruned >= 0)
"""

# One column set away from a valid pending todo, and the rule (constraint name) that refuses it.
BROKEN_FIELDS = {
    "a queue with a space": ("queue", "bad queue", "todos_queue_check"),
    "an empty queue": ("queue", "", "todos_queue_check"),
    "a queue of 65 characters": ("queue", "q" * 65, "todos_queue_check"),
    "an empty title": ("title", "", "todos_title_check"),
    "a title of 501 characters": ("title", "t" * 501, "todos_title_check"),
    "max_attempts 0": ("max_attempts", 0, "todos_max_attempts_check"),
    "max_attempts 1001": ("max_attempts", 1001, "todos_max_attempts_check"),
    "a negative attempt": ("attempt", -1, "todos_attempt_check"),
    "a negative attempts_total": ("attempts_total", -1, "todos_attempts_total_check"),
    "a negative attempts_pruned": ("attempts_pruned", -1, "todos_attempts_pruned_check"),
    "an owner on a pending todo": ("owner", "agent:x", "todos_holder_matches_state"),
    "a retry time on a pending todo": ("next_retry_at", "2026-01-01T00:00:00Z", "todos_retry_only_when_failed"),
}
AT_THE_LIMITS = {"queue": "Q" * 64, "title": "t" * 500, "max_attempts": 1000}

_INSERT = ("INSERT INTO todos (endpoint_id, queue, title, state, owner, lease_expires_at, next_retry_at, attempt,"
           " max_attempts, attempts_total, attempts_pruned)"
           " SELECT e.id, %(queue)s, %(title)s, %(state)s, %(owner)s, %(lease_expires_at)s, %(next_retry_at)s,"
           " %(attempt)s, %(max_attempts)s, %(attempts_total)s, %(attempts_pruned)s FROM endpoints e LIMIT 1"
           " RETURNING id")
VALID = dict(queue="q", title="a todo", state="pending", owner=None, lease_expires_at=None, next_retry_at=None,
             attempt=0, max_attempts=5, attempts_total=0, attempts_pruned=0)


async def _seed_endpoint(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("INSERT INTO users (username, password_hash) VALUES ('rules', 'x')")
        await conn.execute("INSERT INTO endpoints (user_id, name, agent_id, token_hash, scope, queues)"
                           " SELECT id, 'rules', 'rules', '\\x00', '{}', '{q}' FROM users")


async def _insert(url: str, **over) -> str | None:
    """Insert a todo; its id, or the constraint name that refused it."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        try:
            return (await (await conn.execute(_INSERT, dict(VALID, **over))).fetchone())[0]
        except psycopg.errors.CheckViolation as refused:
            return "refused by " + refused.diag.constraint_name


async def _update(url: str, todo_id: str, **sets) -> str:
    """Update a todo inside a transaction that is then rolled back: 'accepted' or the rule."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        assignments = ", ".join(f"{column} = %({column})s" for column in sets)
        try:
            await conn.execute(f"UPDATE todos SET {assignments} WHERE id = %(id)s", dict(sets, id=todo_id))
            return "accepted"
        except psycopg.errors.CheckViolation as refused:
            return "refused by " + refused.diag.constraint_name
        finally:
            await conn.rollback()


@pytest.fixture
async def todo_id(db_url):
    await _seed_endpoint(db_url)
    return await _insert(db_url)


@pytest.mark.parametrize("case", list(BROKEN_FIELDS))
async def test_the_database_refuses_a_todo_that_breaks_a_rule(db_url, todo_id, case):
    column, value, rule = BROKEN_FIELDS[case]
    assert await _insert(db_url, **{column: value}) == f"refused by {rule}"
    assert await _update(db_url, todo_id, **{column: value}) == f"refused by {rule}"
    rows = await sql_rows(db_url, "SELECT id, queue, title, state::text AS state, owner, attempt FROM todos")
    assert rows == [dict(id=todo_id, queue="q", title="a todo", state="pending", owner=None, attempt=0)]


async def test_the_refusal_reads_like_a_check_constraint(db_url, todo_id):
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.CheckViolation) as refused:
            await conn.execute("UPDATE todos SET state = 'claimed' WHERE id = %s", (todo_id,))
    diag = refused.value.diag
    assert (diag.sqlstate, diag.constraint_name, diag.table_name) == ("23514", "todos_holder_matches_state", "todos")
    assert diag.message_primary == 'new row for relation "todos" violates check constraint "todos_holder_matches_state"'
    assert "owner must be set" in diag.message_detail


async def test_a_null_in_a_required_column_is_still_a_not_null_violation(db_url, todo_id):
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.NotNullViolation):
            await conn.execute("UPDATE todos SET attempt = NULL WHERE id = %s", (todo_id,))


async def test_the_database_accepts_todos_at_the_limits(db_url, todo_id):
    for column, value in AT_THE_LIMITS.items():
        assert not (await _insert(db_url, **{column: value})).startswith("refused"), column
        assert await _update(db_url, todo_id, **{column: value}) == "accepted", column
    assert await _update(db_url, todo_id, max_attempts=1) == "accepted"


async def test_the_store_reports_a_refused_field_as_invalid_naming_it(db_url, todo_id):
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        for column, value in (("queue", "bad queue"), ("title", ""), ("max_attempts", 0)):
            with pytest.raises(psycopg.errors.CheckViolation) as refused:
                await conn.execute(f"UPDATE todos SET {column} = %s WHERE id = %s", (value, todo_id))
            err = _translate(refused.value, "add_todo", todo_id)
            assert (err.code, err.argument) == ("invalid", column)


async def test_the_triggers_accept_and_refuse_the_rows_the_checks_did(pg_admin_url):
    """Every combination of state, owner, lease and retry time, inserted and set by UPDATE,
    against a database with the CHECK constraints (0001 and AS_CHECKS) and one migrated to the end."""
    names, outcomes = [], []
    try:
        for target in (1, None):
            name, url = create_database(pg_admin_url, template=None)
            names.append(name)
            await migrate(url, target=target)
            if target == 1:
                async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                    await conn.execute(AS_CHECKS)
            await _seed_endpoint(url)
            pending = await _insert(url)
            seen = []
            for state, owner, lease, retry in itertools.product(STATES, (None, "agent:x"),
                                                                (None, "2026-01-01T00:00:00Z"),
                                                                (None, "2026-01-01T00:00:00Z")):
                row = dict(state=state, owner=owner, lease_expires_at=lease, next_retry_at=retry)
                inserted = await _insert(url, **row)
                seen.append(("insert", state, owner, lease, retry,
                             inserted if inserted.startswith("refused") else "accepted"))
                seen.append(("update", state, owner, lease, retry, await _update(url, pending, **row)))
            for column, value, _ in BROKEN_FIELDS.values():
                seen.append(("field", column, value, await _insert(url, **{column: value})))
            outcomes.append(seen)
    finally:
        for name in names:
            drop_database(pg_admin_url, name)
    checks, triggers = outcomes

    def accepted(seen):
        return [row[:-1] + (not row[-1].startswith("refused"),) for row in seen]

    assert accepted(triggers) == accepted(checks)
    assert sum(1 for row in accepted(triggers) if row[-1]) > 20  # the grid holds valid rows too
    # A row that breaks one rule is refused under that rule's name, as before.
    single = [(c, t) for c, t in zip(checks, triggers) if c[-1].startswith("refused") and c[0] == "field"]
    assert single and all(c == t for c, t in single)
