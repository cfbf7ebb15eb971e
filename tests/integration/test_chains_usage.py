"""Continuation chains and usage per attempt (migration 0004), against real Postgres."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from board.store import store as st
from board.errors import Conflict, Invalid, NotFound
from board.store.vocabulary import CHAIN_MAX
from tests.conftest import make_agent, make_user, sql_rows


async def finished(store, agent, title="review me", **close):
    """A todo of the agent's, claimed and completed."""
    todo = await store.todo_add(agent, queue=agent.queues[0], title=title)
    await store.todo_claim(agent, todo["id"])
    await store.todo_complete(agent, todo["id"], **close)
    return todo


async def _outcome(coro):
    try:
        return await coro
    except (Conflict, NotFound) as e:
        return e


# -- continuation chains ------------------------------------------------------------------

async def test_a_continuation_of_an_ended_todo_records_its_predecessor(store, agent, db_url):
    pred = await finished(store, agent)
    succ = await store.todo_add(agent, queue="q", title="address the review", continues=pred["id"])
    assert succ["continues_id"] == pred["id"] and succ["state"] == "pending"
    rows = await sql_rows(db_url, "SELECT continues_id FROM todos WHERE id = %s", (succ["id"],))
    assert rows[0]["continues_id"] == pred["id"]
    got = await store.todo_get(agent, pred["id"])
    assert got["continues_id"] is None and got["continued_by_id"] == succ["id"]


@pytest.mark.parametrize("state", ["pending", "claimed", "failed with a retry"])
async def test_a_continuation_of_a_live_todo_is_refused_as_still_live(store, agent, db_url, state):
    live = await store.todo_add(agent, queue="q", title="still going")
    if state != "pending":
        await store.todo_claim(agent, live["id"])
    if state == "failed with a retry":
        await store.todo_fail(agent, live["id"])
    with pytest.raises(Conflict) as err:
        await store.todo_add(agent, queue="q", title="too early", continues=live["id"])
    assert "still live" in err.value.message and err.value.argument == "continues"
    assert await sql_rows(db_url, "SELECT id FROM todos WHERE continues_id IS NOT NULL") == []


async def test_canceled_and_dead_lettered_todos_can_be_continued(store, agent):
    canceled = await store.todo_add(agent, queue="q", title="dropped")
    await store.todo_cancel(agent, canceled["id"])
    dead = await store.todo_add(agent, queue="q", title="gave up", max_attempts=1)
    await store.todo_claim(agent, dead["id"])
    await store.todo_fail(agent, dead["id"])
    for pred in (canceled, dead):
        succ = await store.todo_add(agent, queue="q", title="again", continues=pred["id"])
        assert succ["continues_id"] == pred["id"]


async def test_a_second_successor_is_refused_naming_the_first(store, agent, db_url):
    pred = await finished(store, agent)
    first = await store.todo_add(agent, queue="q", title="one", continues=pred["id"])
    with pytest.raises(Conflict) as err:
        await store.todo_add(agent, queue="q", title="two", continues=pred["id"])
    assert first["id"] in err.value.message and err.value.argument == "continues"
    rows = await sql_rows(db_url, "SELECT id FROM todos WHERE continues_id = %s", (pred["id"],))
    assert [r["id"] for r in rows] == [first["id"]]


async def test_two_racing_continuations_one_wins_and_the_other_names_it(store, db_url):
    user = await make_user(store)
    a = await make_agent(store, user=user, agent_id="reviewer", session_id="s-a")
    b = a.on_session("s-b")
    for i in range(30):
        pred = await finished(store, a, title=f"round {i}")
        results = await asyncio.gather(
            _outcome(store.todo_add(a, queue="q", title="fix a", continues=pred["id"])),
            _outcome(store.todo_add(b, queue="q", title="fix b", continues=pred["id"])),
            _outcome(store.todo_add(user, queue="q", title="fix c", continues=pred["id"])))
        wins = [r for r in results if isinstance(r, dict)]
        losses = [r for r in results if not isinstance(r, dict)]
        assert len(wins) == 1, results
        assert all(isinstance(e, Conflict) and wins[0]["id"] in e.message for e in losses), losses
    rows = await sql_rows(db_url, "SELECT continues_id, count(*) AS n FROM todos WHERE continues_id IS NOT NULL "
                                  "GROUP BY 1")
    assert len(rows) == 30 and all(r["n"] == 1 for r in rows)


async def test_a_foreign_predecessor_is_not_found_with_the_body_of_a_random_id(store, agent):
    other = await make_agent(store, agent_id="stranger")
    theirs = await finished(store, other)
    bodies = []
    for continues in (theirs["id"], str(uuid.uuid4()), "x" * 300, "nul\x00id"):
        with pytest.raises(NotFound) as err:
            await store.todo_add(agent, queue="q", title="poach", continues=continues)
        bodies.append(err.value.wire())
    assert all(b == bodies[0] for b in bodies), bodies
    # another human's todo, from the Board, alike
    human = await make_user(store)
    await make_agent(store, user=human, agent_id="mine")
    with pytest.raises(NotFound) as err:
        await store.todo_add(human, queue="q", title="poach", continues=theirs["id"])
    assert err.value.wire() == bodies[0]


async def test_continues_never_changes_after_insert(store, agent, db_url):
    pred = await finished(store, agent)
    other = await finished(store, agent, title="another")
    succ = await store.todo_add(agent, queue="q", title="next", continues=pred["id"])
    import psycopg
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        for value in (other["id"], None):
            with pytest.raises(psycopg.errors.CheckViolation):
                await conn.execute("UPDATE todos SET continues_id = %s WHERE id = %s", (value, succ["id"]))


async def test_retention_deletes_a_continued_todo_with_its_successor_link_and_the_chain_closes_over_it(
        store, agent, db_url):
    """The predecessor goes (retention); its successor stays, still naming it, and reads as
    the root of what is left; a todo may then continue the successor as usual."""
    pred = await finished(store, agent)
    succ = await store.todo_add(agent, queue="q", title="next", continues=pred["id"])
    await store.todo_claim(agent, succ["id"])
    await store.todo_complete(agent, succ["id"])
    await sql_rows(db_url, "UPDATE todos SET updated_at = now() - interval '40 days' WHERE id = %s RETURNING id",
                   (pred["id"],))
    assert await store.sweep_retention() == 1  # the predecessor, past the 30-day bound
    assert await sql_rows(db_url, "SELECT id FROM todos WHERE id = %s", (pred["id"],)) == []
    assert await sql_rows(db_url, "SELECT * FROM todo_successors WHERE todo_id = %s", (pred["id"],)) == []
    got = await store.todo_get(agent, succ["id"])
    assert got["continues_id"] == pred["id"] and [c["id"] for c in got["chain"]] == [succ["id"]]
    third = await store.todo_add(agent, queue="q", title="third", continues=succ["id"])
    assert (await store.todo_get(agent, succ["id"]))["continued_by_id"] == third["id"]


async def test_a_claim_of_a_continuation_returns_what_its_predecessor_ended_with(store, agent):
    pred = await finished(store, agent, result={"verdict": "changes requested"}, summary="two nits in parse()",
                          usage={"input_tokens": 10, "output_tokens": 3})
    succ = await store.todo_add(agent, queue="q", title="fix the nits", continues=pred["id"])
    res = await store.todo_claim(agent, succ["id"])
    c = res["continues"]
    assert c["id"] == pred["id"] and c["state"] == "done" and c["result"] == {"verdict": "changes requested"}
    assert c["attempts_total"] == 1
    last = c["last_attempt"]
    assert last["seq"] == 1 and last["outcome"] == "completed" and last["summary"] == "two nits in parse()"
    assert last["usage"] == {"input_tokens": 10, "output_tokens": 3, "cost_usd": None, "model": None}
    # a todo that continues nothing says nothing about it
    plain = await store.todo_add(agent, queue="q", title="plain")
    assert "continues" not in await store.todo_claim(agent, plain["id"])


async def test_the_chain_reads_root_first_from_any_link(store, agent):
    ids = []
    prev = None
    for i in range(4):
        todo = await store.todo_add(agent, queue="q", title=f"round {i}", continues=prev)
        await store.todo_claim(agent, todo["id"])
        if i < 3:
            await store.todo_complete(agent, todo["id"], summary=f"round {i}:  " + "word " * 40)
        ids.append(todo["id"])
        prev = todo["id"]
    for middle in ids:
        got = await store.todo_get(agent, middle)
        chain = got["chain"]
        assert [link["id"] for link in chain] == ids and not got["chain_truncated"]
    assert [link["last_outcome"] for link in chain] == ["completed"] * 3 + [None]
    assert chain[0]["last_summary"].startswith("round 0: word") and len(chain[0]["last_summary"]) == 80
    assert chain[0]["last_summary_cut"] and chain[3]["last_summary"] is None
    assert chain[3]["state"] == "claimed" and chain[0]["attempts_total"] == 1


async def test_a_chain_longer_than_the_bound_shows_the_links_nearest(store, agent):
    prev = None
    ids = []
    for i in range(CHAIN_MAX + 3):
        todo = await store.todo_add(agent, queue="q", title=f"link {i}", continues=prev)
        await store.todo_cancel(agent, todo["id"])
        ids.append(todo["id"])
        prev = todo["id"]
    got = await store.todo_get(agent, ids[-1])
    assert got["chain_truncated"] and len(got["chain"]) == CHAIN_MAX
    assert [link["id"] for link in got["chain"]] == ids[-CHAIN_MAX:]


# -- usage per attempt --------------------------------------------------------------------

async def test_usage_is_stored_on_the_closing_attempt(store, agent, db_url):
    todo = await store.todo_add(agent, queue="q", title="count me")
    await store.todo_claim(agent, todo["id"])
    await store.todo_release(agent, todo["id"], usage={"input_tokens": 1200, "output_tokens": 80,
                                                       "cost_usd": 0.0123, "model": "m" * 100 + "é" * 20})
    await store.todo_claim(agent, todo["id"])
    await store.todo_complete(agent, todo["id"])
    rows = await sql_rows(db_url, "SELECT seq, input_tokens, output_tokens, cost_usd, model FROM attempts "
                                  "WHERE todo_id = %s ORDER BY seq", (todo["id"],))
    assert rows[0]["input_tokens"] == 1200 and rows[0]["output_tokens"] == 80 and float(rows[0]["cost_usd"]) == 0.0123
    assert rows[0]["model"] == "m" * 100 + "é" * 14 and len(rows[0]["model"].encode()) == 128
    assert rows[1]["input_tokens"] is None and rows[1]["model"] is None
    got = await store.todo_get(agent, todo["id"])
    assert got["attempts"][0]["usage"] is None
    assert got["attempts"][1]["usage"]["input_tokens"] == 1200
    assert got["usage"] == {"input_tokens": 1200, "output_tokens": 80, "cost_usd": 0.0123}


@pytest.mark.parametrize("usage, key", [
    ({"input_tokens": -1}, "input_tokens"), ({"output_tokens": 1.5}, "output_tokens"),
    ({"input_tokens": True}, "input_tokens"), ({"cost_usd": -0.01}, "cost_usd"),
    ({"cost_usd": float("inf")}, "cost_usd"), ({"cost_usd": 2e9}, "cost_usd"),
    ({"input_tokens": 10**13}, "input_tokens"), ({"model": 7}, "model"), ({"tokens": 5}, "tokens"),
    ("lots", None)])
async def test_bad_usage_is_invalid_naming_usage_and_the_key_and_closes_nothing(store, agent, db_url, usage, key):
    todo = await store.todo_add(agent, queue="q", title="count me")
    await store.todo_claim(agent, todo["id"])
    with pytest.raises(Invalid) as err:
        await store.todo_complete(agent, todo["id"], usage=usage)
    assert err.value.argument == "usage" and (key is None or key in err.value.message)
    rows = await sql_rows(db_url, "SELECT outcome FROM attempts WHERE todo_id = %s", (todo["id"],))
    assert rows == [{"outcome": None}]


async def test_usage_totals_stay_exact_across_pruning(store, db_url):
    capped = st.Store(store.pool, store.settings.with_(attempt_history_max_per_todo=5))
    agent = await make_agent(capped)
    todo = await capped.todo_add(agent, queue="q", title="long haul", max_attempts=1000)
    want = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    for i in range(13):
        await capped.todo_claim(agent, todo["id"])
        usage = {"input_tokens": 1000 + i, "cost_usd": 0.000001 * (i + 1)}
        if i % 3:
            usage["output_tokens"] = 7 * i
        want["input_tokens"] += usage["input_tokens"]
        want["output_tokens"] += usage.get("output_tokens", 0)
        want["cost_usd"] += usage["cost_usd"]
        await capped.todo_release(agent, todo["id"], usage=usage)
    await capped.todo_claim(agent, todo["id"])  # this claim prunes too
    got = await capped.todo_get(agent, todo["id"], attempts_limit=50)
    assert got["attempts_pruned"] > 0 and len(got["attempts"]) <= 5
    assert got["usage"]["input_tokens"] == want["input_tokens"]
    assert got["usage"]["output_tokens"] == want["output_tokens"]
    assert got["usage"]["cost_usd"] == pytest.approx(want["cost_usd"], abs=1e-9)
    rows = await sql_rows(db_url, "SELECT pruned_usage FROM todos WHERE id = %s", (todo["id"],))
    assert rows[0]["pruned_usage"] is not None


async def test_a_todo_with_no_usage_reported_has_no_totals(store, agent):
    todo = await finished(store, agent)
    got = await store.todo_get(agent, todo["id"])
    assert got["usage"] is None and got["attempts"][0]["usage"] is None
    assert got["chain"] == [got["chain"][0]] and got["chain"][0]["id"] == todo["id"]


async def test_a_continuation_waiting_on_an_uncommitted_one_loses_to_it_once_it_commits(store, agent, db_url):
    """The race made deterministic: another transaction has inserted a successor and not yet
    committed; the store's add waits on its todo_successors key, then refuses, naming that successor."""
    import psycopg
    pred = await finished(store, agent)
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        cur = await conn.execute(
            "WITH link AS (INSERT INTO todo_successors (todo_id, successor_id) VALUES (%(p)s, gen_random_uuid()::text)"
            " RETURNING successor_id) INSERT INTO todos (id, endpoint_id, queue, title, continues_id)"
            " SELECT link.successor_id, p.endpoint_id, p.queue, 'winner', p.id FROM link, todos p WHERE p.id = %(p)s"
            " RETURNING id", {"p": pred["id"]})
        (winner,) = await cur.fetchone()
        loser = asyncio.create_task(_outcome(store.todo_add(agent, queue="q", title="loser", continues=pred["id"])))
        for _ in range(500):  # until the add is seen waiting on a lock (the winner's key)
            waiting = await sql_rows(db_url, "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                                             "AND wait_event_type = 'Lock'")
            if waiting or loser.done():
                break
            await asyncio.sleep(0.02)
        assert waiting and not loser.done()
        await conn.commit()
    result = await loser
    assert isinstance(result, Conflict) and winner in result.message, result


async def test_the_boards_close_takes_no_usage(store, agent):
    human = await make_user(store)
    mine = await make_agent(store, user=human, agent_id="mine")
    todo = await store.todo_add(mine, queue="q", title="by hand")
    await store.todo_claim(human, todo["id"])
    with pytest.raises(Invalid) as err:
        await store.todo_complete(human, todo["id"], usage={"input_tokens": 1})
    assert err.value.argument == "usage"
    assert (await store.todo_complete(human, todo["id"]))["state"] == "done"
