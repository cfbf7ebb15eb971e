"""A transition's response shows the todo exactly as a read right after it does.

Claims and the lean closes (complete, cancel) do not send back the columns the transition
fixes (state, holder, lease or retry time, dead_letter; CLAIM_KNOWN and CLOSE_KNOWN in the
store): the store fills them in. These scenarios hold every such response, and the attempt it
reports, to get_todo and the attempts table, for agents and for the Board, on the fast and
the full claim paths."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tests.conftest import make_agent, make_user, sql_rows

T0 = datetime(2026, 11, 30, 14, 0, tzinfo=timezone.utc)


async def fresh(store, caller, todo_id):
    got = await store.todo_get(caller, todo_id)
    for extra in ("attempts", "attempt_outcomes", "endpoint_id",
                  "continues_id", "continued_by_id", "a2a", "chain", "chain_truncated", "usage", "waiting_for", "blocking",
                  "plan"):
        got.pop(extra, None)
    return got


async def attempt_row(db_url, todo_id, seq):
    rows = await sql_rows(db_url, "SELECT seq, attempt, outcome::text AS outcome, disposition::text AS disposition "
                                  "FROM attempts WHERE todo_id = %s AND seq = %s", (todo_id, seq))
    return rows[0]


async def assert_closed_as_stored(db_url, out):
    closed = dict(out["closed_attempt"])
    died = closed.pop("died")
    assert closed == await attempt_row(db_url, out["id"], closed["seq"])
    assert died == (closed["outcome"] in ("lease_expired", "reaped"))


async def test_claim_and_complete_responses_match_a_fresh_read(store, db_url):
    agent = await make_agent(store, queues=("q",))
    todo = await store.todo_add(agent, queue="q", title="build", payload={"k": 1}, max_attempts=3)

    claimed = await store.todo_claim_next(agent, claimant="run-1", now=T0)
    assert claimed["todo"] == await fresh(store, agent, todo["id"])
    assert claimed["todo"]["state"] == "claimed" and claimed["todo"]["owner"] == agent.owner
    assert claimed["attempt_seq"] == claimed["attempts_total"] == 1

    done = await store.todo_complete(agent, todo["id"], result={"ok": True}, summary="green", now=T0)
    closed_attempt = done.pop("closed_attempt")
    assert done == await fresh(store, agent, todo["id"])
    assert done["state"] == "done" and done["owner"] is None and done["lease_expires_at"] is None
    assert done["dead_letter"] is False and done["next_retry_at"] is None
    assert closed_attempt == {"seq": 1, "attempt": 1, "outcome": "completed", "disposition": "done", "died": False}
    await assert_closed_as_stored(db_url, dict(done, closed_attempt=closed_attempt))


async def test_takeover_and_retried_claim_responses_match_a_fresh_read(store, db_url):
    agent = await make_agent(store, queues=("q",))
    todo = await store.todo_add(agent, queue="q", title="flaky", max_attempts=5)
    await store.todo_claim(agent, todo["id"], lease_seconds=60, now=T0)

    # the full claim statement: it takes over the lapsed lease (closing that attempt)
    later = T0 + timedelta(minutes=5)
    taken = await store.todo_claim_next(agent, now=later)
    assert taken["todo"] == await fresh(store, agent, todo["id"])
    assert taken["attempt_seq"] == taken["attempts_total"] == 2
    assert [a["outcome"] for a in taken["prior_attempts"]] == ["lease_expired"]

    # a failed todo's retry: its claim sees a todo that had a retry time and a result
    failed = await store.todo_fail(agent, todo["id"], result={"err": "red"}, now=later)
    assert failed["next_retry_at"] is not None
    await store.sweep_retry(now=later + timedelta(hours=2))
    again = await store.todo_claim(agent, todo["id"], now=later + timedelta(hours=2))
    assert again["todo"] == await fresh(store, agent, todo["id"])
    assert again["todo"]["next_retry_at"] is None and again["todo"]["result"] == {"err": "red"}
    assert again["attempt_seq"] == 3


async def test_board_claim_complete_and_cancel_responses_match_a_fresh_read(store, db_url):
    human = await make_user(store)
    agent = await make_agent(store, user=human, queues=("q",))
    first = await store.todo_add(agent, queue="q", title="by hand")
    second = await store.todo_add(agent, queue="q", title="to cancel")

    mine = await store.todo_claim(human, first["id"], now=T0)
    assert mine["todo"] == await fresh(store, human, first["id"])
    assert mine["todo"]["owner"] == human.owner

    done = await store.todo_complete(human, first["id"], now=T0)
    await assert_closed_as_stored(db_url, done)
    done.pop("closed_attempt")
    assert done == await fresh(store, human, first["id"])

    await store.todo_claim(agent, second["id"], now=T0)
    canceled = await store.todo_cancel(human, second["id"], now=T0)
    await assert_closed_as_stored(db_url, canceled)
    assert canceled["closed_attempt"]["outcome"] == "canceled"
    canceled.pop("closed_attempt")
    assert canceled == await fresh(store, human, second["id"])
    assert canceled["state"] == "canceled" and canceled["owner"] is None


async def test_agent_cancel_fail_and_release_responses_match_a_fresh_read(store, db_url):
    agent = await make_agent(store, queues=("q",))
    for verb, state in (("cancel", "canceled"), ("fail", "failed"), ("release", "pending")):
        todo = await store.todo_add(agent, queue="q", title=verb, max_attempts=1)
        await store.todo_claim(agent, todo["id"], now=T0)
        out = await getattr(store, f"todo_{verb}")(agent, todo["id"], now=T0)
        await assert_closed_as_stored(db_url, out)
        out.pop("closed_attempt")
        assert out == await fresh(store, agent, todo["id"]), verb
        assert out["state"] == state
