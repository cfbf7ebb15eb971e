"""The attempt record's invariants (REQ-1, REQ-4, REQ-5, REQ-11). The per-column bounds are the
database's: it refuses a row that breaks one, whoever writes it (raw SQL here, so the store's
own validation is not what is tested). The three cross-column rules are the store's (a
PL/pgSQL trigger cost REQ-18 too much): every transition that writes an
attempt is driven through the store and every row it leaves is held to them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from board.store import store as st
from tests.conftest import RULE_BREAKERS, make_agent, make_user, sql_rows

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
}


@pytest.mark.parametrize("case", list(BROKEN))
async def test_the_database_refuses_an_attempt_that_breaks_a_bound(db_url, todo_id, case):
    with pytest.raises(psycopg.errors.CheckViolation):
        await _insert(db_url, todo_id, **BROKEN[case])
    assert await sql_rows(db_url, "SELECT 1 FROM attempts WHERE todo_id = %s", (todo_id,)) == []


# A close written by hand is held to the same bounds as an insert; the row stays open.
BROKEN_CLOSE = {
    "summary over 2048 bytes": "ended_at = now(), outcome = 'failed', disposition = 'retry_scheduled', "
                               "summary = repeat('x', 2049)",
    "artifact over 512 bytes": "ended_at = now(), outcome = 'failed', disposition = 'retry_scheduled', "
                               "artifact = 'https://example.com/' || repeat('a', 493)",
    "attempt below 1": "attempt = 0",
}


@pytest.mark.parametrize("case", list(BROKEN_CLOSE))
async def test_the_database_refuses_an_update_that_breaks_a_bound(db_url, todo_id, case):
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


async def test_every_transition_that_writes_an_attempt_keeps_the_rules(db_url, store):
    """Each way an attempt is opened or closed, by an agent, the Board and the sweeps, with a
    summary and an artifact wherever the call takes one: no row breaks a rule."""
    t0 = datetime.now(timezone.utc)
    user = await make_user(store)
    human = st.Human(user.user_id, user.username)
    agent = (await make_agent(store, user=user)).on_session("session-1")
    said = dict(summary="tried the obvious fix", artifact="https://example.com/run/1")

    other = (await make_agent(store, user=user, agent_id="other")).on_session("session-3")
    revoked = (await store.todo_add(other, queue="q", title="revoked", now=t0))["id"]
    names = ("done", "failed", "released", "lapsed", "reaped", "canceled", "board")
    done, failed, released, lapsed, reaped, canceled, board = [  # added in this order
        (await store.todo_add(agent, queue="q", title=name, max_attempts=2 if name == "failed" else 3,
                              now=t0 - timedelta(seconds=len(names) - i)))["id"]
        for i, name in enumerate(names)]

    # agent: claim_next, heartbeat, interrupt and resume on the open attempt, complete
    claimed = await store.todo_claim_next(agent, claimant="harness/box/run-1", now=t0)
    assert claimed["todo"]["id"] == done
    await store.todo_heartbeat(agent, done, now=t0)
    await store.todo_interrupt(agent, done, now=t0)
    await store.todo_resume(agent, done, now=t0)
    await store.todo_complete(agent, done, result={"ok": True}, **said, now=t0)
    # agent: fail with a retry, the retry sweep, a fenced claim, fail into the dead letter,
    # the manual retry, and a claim after it
    await store.todo_claim(agent, failed, now=t0)
    await store.todo_fail(agent, failed, **said, now=t0)
    await store.sweep_retry(now=t0 + timedelta(hours=2))
    fenced = await store.todo_claim(agent, failed, require_fence=True, now=t0 + timedelta(hours=2))
    await store.todo_fail(agent, failed, lease_token=fenced["lease_token"], **said, now=t0 + timedelta(hours=2))
    await store.todo_retry(human, failed, now=t0 + timedelta(hours=2))
    await store.todo_claim(agent, failed, now=t0 + timedelta(hours=2))
    # agent: release
    await store.todo_claim(agent, released, now=t0)
    await store.todo_release(agent, released, **said, now=t0)
    # a lapsed lease taken over by another claimant, and one the reaper closes
    await store.todo_claim(agent, lapsed, lease_seconds=30, now=t0)
    await store.todo_claim(agent.on_session("session-2"), lapsed, claimant="second", now=t0 + timedelta(minutes=5))
    await store.todo_claim(agent, reaped, lease_seconds=30, now=t0)
    await store.sweep_reap(now=t0 + timedelta(minutes=5))
    # cancel of a held todo; the Board's claim, fail and complete; revocation of a holder
    await store.todo_claim(agent, canceled, now=t0)
    await store.todo_cancel(agent, canceled, now=t0)
    await store.todo_claim(human, board, now=t0)
    await store.todo_fail(human, board, **said, now=t0)
    await store.sweep_retry(now=t0 + timedelta(hours=2))
    await store.todo_claim(human, board, now=t0 + timedelta(hours=2))
    await store.todo_complete(human, board, **said, now=t0 + timedelta(hours=2))
    await store.todo_claim(other, revoked, now=t0)
    await store.endpoint_revoke(other.endpoint_id, now=t0)

    assert await sql_rows(db_url, RULE_BREAKERS) == []
    # and the rows cover what the rules are about, so the check above is not vacuous
    rows = await sql_rows(db_url, "SELECT outcome::text AS outcome, claimer_kind::text AS kind,"
                                  " summary IS NOT NULL AS said FROM attempts")
    assert {r["outcome"] for r in rows} == {None, "completed", "failed", "released", "lease_expired", "reaped",
                                            "canceled", "revoked"}
    assert {r["kind"] for r in rows} == {"endpoint", "owner"}
    assert any(r["said"] for r in rows)


async def test_the_rule_check_finds_a_row_that_breaks_a_rule(db_url, todo_id):
    """The query the test above relies on, held to rows the database now lets in."""
    for seq, over in enumerate([dict(ended=True), dict(endpoint=False),
                                dict(ended=True, outcome="reaped", disposition="requeued", summary="hi")], start=1):
        await _insert(db_url, todo_id, seq=seq, **over)
    assert sorted(r["seq"] for r in await sql_rows(db_url, RULE_BREAKERS)) == [1, 2, 3]
