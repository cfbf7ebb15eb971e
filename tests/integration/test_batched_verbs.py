"""The batched verbs against Postgres: add_todos (many todos in one statement, all or nothing)
and claim_next with a limit (many claims in one statement, each with its own attempt and
lease token), with real parallel connections where they race."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from board.errors import Conflict, Forbidden, Invalid, NotFound
from board.store.vocabulary import NOTIFY_CHANNEL
from tests.conftest import RULE_BREAKERS, make_agent, make_user, sql_rows, watch

T0 = datetime(2026, 11, 30, 14, 0, tzinfo=timezone.utc)


def items(n: int, queue: str = "q", **extra) -> list[dict]:
    return [{"queue": queue, "title": f"job {i}", **extra} for i in range(n)]


async def count(db_url, sql="SELECT count(*) AS n FROM todos") -> int:
    return (await sql_rows(db_url, sql))[0]["n"]


# -- add_todos -------------------------------------------------------------------------------

@pytest.mark.parametrize("bad, field, error", [
    ({"queue": "no spaces", "title": "x"}, "queue", Invalid),
    ({"queue": "other", "title": "x"}, "queue", Forbidden),
    ({"queue": "q", "title": ""}, "title", Invalid),
    ({"queue": "q", "title": "nul\x00"}, "title", Invalid),
    ({"queue": "q", "title": "x", "payload": [1]}, "payload", Invalid),
    ({"queue": "q", "title": "x", "routing": "r"}, "routing", Invalid),
    ({"queue": "q", "title": "x", "max_attempts": 0}, "max_attempts", Invalid),
    ({"queue": "q", "title": "x", "continues": ""}, "continues", Invalid),
    ({"queue": "q", "title": "x", "colour": "red"}, "colour", Invalid),
])
async def test_a_bad_item_at_index_k_writes_nothing_and_names_k(store, agent, db_url, bad, field, error):
    todos = items(40)
    todos[17] = bad
    with pytest.raises(error) as caught:
        await store.todos_add(agent, todos)
    assert caught.value.argument == f"todos[17].{field}"
    assert caught.value.message.startswith("todos[17]"), caught.value.message
    assert await count(db_url) == 0


@pytest.mark.parametrize("todos", [[], items(1001), "not a list", [None]])
async def test_an_empty_or_oversized_or_malformed_batch_is_refused(store, agent, db_url, todos):
    with pytest.raises(Invalid) as caught:
        await store.todos_add(agent, todos)
    assert caught.value.argument in ("todos", "todos[0]")
    assert await count(db_url) == 0


async def test_a_thousand_todos_in_one_call_are_added_in_order_with_one_notification_each(store, agent, db_url):
    await watch(store, agent.user_id)
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as listener:
        await listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        out = await store.todos_add(agent, items(1000, payload={"k": 1}, max_attempts=3))
        heard = []
        async with asyncio.timeout(10):
            async for n in listener.notifies():
                heard.append(n.payload)
                if len(heard) == 1000:
                    break
    assert [t["title"] for t in out["todos"]] == [f"job {i}" for i in range(1000)]
    assert all(t["state"] == "pending" and t["max_attempts"] == 3 and t["payload"] == {"k": 1} for t in out["todos"])
    assert len({t["id"] for t in out["todos"]}) == 1000
    assert sum('"kind" : "added"' in h for h in heard) == 1000
    assert await count(db_url) == 1000
    # The order given is the order claimed.
    first = await store.todo_claim_next(agent, limit=50)
    assert [c["todo"]["title"] for c in first["claims"]] == [f"job {i}" for i in range(50)]


async def test_a_batch_continuing_a_live_todo_adds_nothing_and_names_the_item(store, agent, db_url):
    ended = await store.todo_add(agent, queue="q", title="ended")
    await store.todo_cancel(agent, ended["id"])
    live = await store.todo_add(agent, queue="q", title="live")
    todos = items(5)
    todos[1]["continues"] = ended["id"]
    todos[3]["continues"] = live["id"]
    with pytest.raises(Conflict) as caught:
        await store.todos_add(agent, todos)
    assert caught.value.argument == "todos[3].continues" and "still live" in caught.value.message
    assert await count(db_url) == 2
    assert await count(db_url, "SELECT count(*) AS n FROM todo_successors") == 0
    # Without the bad item the continuation goes through, on the predecessor's link.
    del todos[3]
    out = await store.todos_add(agent, todos)
    assert out["todos"][1]["continues_id"] == ended["id"] and "continues_id" not in out["todos"][0]
    assert await count(db_url) == 6


async def test_a_batch_continuing_a_todo_twice_or_an_unknown_one_is_refused(store, agent, db_url):
    ended = await store.todo_add(agent, queue="q", title="ended")
    await store.todo_cancel(agent, ended["id"])
    with pytest.raises(Conflict) as caught:
        await store.todos_add(agent, [{"queue": "q", "title": "a", "continues": ended["id"]},
                                      {"queue": "q", "title": "b", "continues": ended["id"]}])
    assert caught.value.argument == "todos[1].continues"
    with pytest.raises(NotFound) as caught:
        await store.todos_add(agent, [{"queue": "q", "title": "a"}, {"queue": "q", "title": "b", "continues": "nope"}])
    assert caught.value.argument == "todos[1].continues"
    assert await count(db_url) == 1


async def test_add_todos_is_granted_with_add_todo_only(store, db_url):
    producer = await make_agent(store, agent_id="producer", scope=("add_todo",))
    worker = await make_agent(store, agent_id="worker", scope=("claim_next", "complete"))
    assert producer.allows("add_todos") and not worker.allows("add_todos")
    assert len((await store.todos_add(producer, items(3)))["todos"]) == 3
    with pytest.raises(Forbidden):
        await store.todos_add(worker, items(3))
    assert await count(db_url) == 3


# -- claim_next with a limit -----------------------------------------------------------------

async def test_claim_next_without_a_limit_keeps_its_shape(store, agent):
    await store.todos_add(agent, items(3))
    one = await store.todo_claim_next(agent)
    also_one = await store.todo_claim_next(agent, limit=1)
    assert "claims" not in one and "claims" not in also_one
    assert one["todo"]["title"] == "job 0" and also_one["todo"]["title"] == "job 1"


@pytest.mark.parametrize("limit", [0, 51, "5", True, 2.5])
async def test_a_limit_outside_1_to_50_is_refused(store, agent, limit):
    with pytest.raises(Invalid) as caught:
        await store.todo_claim_next(agent, limit=limit)
    assert caught.value.argument == "limit"


async def test_a_batched_claim_opens_one_attempt_per_todo_oldest_first(store, agent, db_url):
    await store.todos_add(agent, items(7))
    out = await store.todo_claim_next(agent, limit=5)
    assert [c["todo"]["title"] for c in out["claims"]] == [f"job {i}" for i in range(5)]
    assert out["todo"] == out["claims"][0]["todo"] and out["attempt_seq"] == 1
    assert all(c["todo"]["state"] == "claimed" and c["attempt_seq"] == 1 and "lease_token" not in c
               for c in out["claims"])
    rest = await store.todo_claim_next(agent, limit=5)
    assert [c["todo"]["title"] for c in rest["claims"]] == ["job 5", "job 6"]
    empty = await store.todo_claim_next(agent, limit=5)
    assert empty == {"todo": None, "claims": []}
    rows = await sql_rows(db_url, "SELECT todo_id, count(*) AS n FROM attempts WHERE ended_at IS NULL GROUP BY 1")
    assert len(rows) == 7 and all(r["n"] == 1 for r in rows)
    assert await sql_rows(db_url, RULE_BREAKERS) == []


async def test_a_batched_claim_leaves_paused_and_other_queues_alone(store, db_url):
    user = await make_user(store)
    agent = await make_agent(store, user=user, queues=("q", "p", "r"))
    await store.todos_add(agent, items(3, "p") + items(3, "q") + items(3, "r"))
    await store.queue_pause(user, "p")
    out = await store.todo_claim_next(agent, limit=10, queue="q")
    assert [c["todo"]["queue"] for c in out["claims"]] == ["q"] * 3
    out = await store.todo_claim_next(agent, limit=10)
    assert [c["todo"]["queue"] for c in out["claims"]] == ["r"] * 3


async def test_a_batched_claim_takes_over_lapsed_leases_and_prunes_capped_histories(store, agent, db_url, settings):
    lapsing = (await store.todos_add(agent, items(2)))["todos"]
    for t in lapsing:
        await store.todo_claim(agent, t["id"], lease_seconds=1, now=T0)
    capped = await store.todo_add(agent, queue="q", title="capped", max_attempts=1000)
    cap = max(5, settings.attempt_history_max_per_todo)
    for _ in range(cap):
        await store.todo_claim(agent, capped["id"])
        await store.todo_release(agent, capped["id"])
    later = T0 + timedelta(minutes=5)
    out = await store.todo_claim_next(agent, limit=10, now=later)
    titles = [c["todo"]["title"] for c in out["claims"]]
    assert titles[0] == "capped" and sorted(titles[1:]) == ["job 0", "job 1"]
    capped_claim = out["claims"][0]
    assert capped_claim["attempt_seq"] == cap + 1 and capped_claim["todo"]["attempts_pruned"] == 1
    for c in out["claims"][1:]:
        assert c["attempt_seq"] == 2 and c["prior_attempts"][0]["outcome"] == "lease_expired"
    rows = await sql_rows(db_url, "SELECT todo_id, count(*) AS n FROM attempts WHERE ended_at IS NULL GROUP BY 1")
    assert len(rows) == 3 and all(r["n"] == 1 for r in rows)
    assert await sql_rows(db_url, RULE_BREAKERS) == []


async def test_fenced_batched_claims_get_distinct_tokens_each_fencing_its_own_attempt(store, agent, db_url):
    await store.todos_add(agent, items(6))
    out = await store.todo_claim_next(agent, limit=6, require_fence=True)
    tokens = [c["lease_token"] for c in out["claims"]]
    assert len(set(tokens)) == 6 and out["lease_token"] == tokens[0]
    ids = [c["todo"]["id"] for c in out["claims"]]
    # Each token closes its own attempt and no other's.
    with pytest.raises(Conflict):
        await store.todo_complete(agent, ids[0], lease_token=tokens[1])
    with pytest.raises(Conflict):
        await store.todo_complete(agent, ids[1])  # a fenced attempt needs its token
    for todo_id, token in zip(ids, tokens):
        done = await store.todo_complete(agent, todo_id, lease_token=token)
        assert done["state"] == "done"
    assert await count(db_url, "SELECT count(*) AS n FROM todos WHERE state = 'done'") == 6


async def test_concurrent_batched_claims_never_claim_one_todo_twice(store, agent, db_url):
    total = 600
    await store.todos_add(agent, items(total))

    async def worker(i: int) -> list[str]:
        me = agent.on_session(f"w{i}")
        got = []
        while True:
            out = await store.todo_claim_next(me, limit=7 + i % 3, require_fence=i % 2 == 0)
            if not out["claims"]:
                return got
            got += [c["todo"]["id"] for c in out["claims"]]

    claimed = [todo_id for ids in await asyncio.gather(*(worker(i) for i in range(8))) for todo_id in ids]
    assert len(claimed) == total and len(set(claimed)) == total
    rows = await sql_rows(db_url, "SELECT todo_id, count(*) AS n, count(*) FILTER (WHERE ended_at IS NULL) AS open"
                                  " FROM attempts GROUP BY 1")
    assert len(rows) == total and all(r["n"] == 1 and r["open"] == 1 for r in rows)
    assert await count(db_url, "SELECT count(*) AS n FROM todos WHERE state <> 'claimed'") == 0


async def test_the_batched_claims_reach_rows_by_key_past_a_big_backlog(store, agent, db_url):
    """The pool plans generically, where a LIMIT taken from a parameter is guessed at a tenth
    of the rows: without a bound the batched claims joined todos and attempts by hashing
    whole tables once the backlog was big."""
    from tests.integration.test_plans import generic_plan, seed_history, unkeyed_scans
    from board.store.queries import QUERIES
    await seed_history(store, db_url)  # finished todos with their attempts, some claimed
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("INSERT INTO todos (endpoint_id, queue, title, created_at) SELECT %s, 'q', 'job ' || g, "
                           "now() + g * interval '1 us' FROM generate_series(1, 30000) g", (agent.endpoint_id,))
        await conn.execute("VACUUM ANALYZE")
        for name in ("todo_claim_fast", "todo_claim", "todos_add", "todos_complete",
                     "todos_complete_closable", "attempts_fence_lookup_many"):
            plan = await generic_plan(conn, QUERIES[name].sql)
            assert unkeyed_scans(plan) == [], (name, "\n".join(plan))


# -- complete_todos ----------------------------------------------------------------------------

async def claimed(store, agent, n: int, **kw) -> list[dict]:
    await store.todos_add(agent, items(n))
    return (await store.todo_claim_next(agent, limit=n, **kw))["claims"]


async def test_a_batch_of_completes_closes_every_attempt_with_what_each_reported(store, agent, db_url):
    claims = await claimed(store, agent, 5)
    out = await store.todos_complete(agent, [
        {"id": c["todo"]["id"], "result": {"n": i} if i % 2 else None, "summary": f"did {i}",
         "usage": {"input_tokens": i, "cost_usd": 0.25}} for i, c in enumerate(claims)])
    assert [t["id"] for t in out["todos"]] == [c["todo"]["id"] for c in claims]
    assert all(t["state"] == "done" and t["closed_attempt"]["outcome"] == "completed" for t in out["todos"])
    assert [t["result"] for t in out["todos"]] == [None, {"n": 1}, None, {"n": 3}, None]
    rows = await sql_rows(db_url, "SELECT t.title, t.result, a.summary, a.input_tokens, a.cost_usd::float8 AS cost, "
                                  "a.outcome::text AS outcome FROM attempts a JOIN todos t ON t.id = a.todo_id "
                                  "ORDER BY t.created_at")
    assert [(r["summary"], r["input_tokens"], r["cost"], r["outcome"]) for r in rows] == [
        (f"did {i}", i, 0.25, "completed") for i in range(5)]
    assert rows[0]["result"] is None and rows[1]["result"] == {"n": 1}
    assert await sql_rows(db_url, RULE_BREAKERS) == []


async def test_a_batch_of_completes_with_one_not_held_changes_nothing_and_names_it(store, agent, db_url):
    claims = await claimed(store, agent, 4)
    other = await store.todo_add(agent, queue="q", title="never claimed")
    todos = [{"id": c["todo"]["id"]} for c in claims]
    todos.insert(2, {"id": other["id"]})
    with pytest.raises(Conflict) as caught:
        await store.todos_complete(agent, todos)
    assert caught.value.argument == "todos[2].id" and "pending" in caught.value.message
    assert await count(db_url, "SELECT count(*) AS n FROM attempts WHERE ended_at IS NULL") == 4
    with pytest.raises(NotFound) as caught:
        await store.todos_complete(agent, [{"id": claims[0]["todo"]["id"]}, {"id": "never-minted"}])
    assert caught.value.argument == "todos[1].id"
    assert await count(db_url, "SELECT count(*) AS n FROM todos WHERE state = 'done'") == 0


@pytest.mark.parametrize("bad, field, error", [
    ({"summary": 5}, "summary", Invalid),
    ({"artifact": "ftp://x"}, "artifact", Invalid),
    ({"usage": {"input_tokens": -1}}, "usage", Invalid),
    ({"lease_token": 7}, "lease_token", Invalid),
    ({"colour": "red"}, "colour", Invalid),
])
async def test_a_bad_completion_at_index_k_changes_nothing_and_names_k(store, agent, db_url, bad, field, error):
    claims = await claimed(store, agent, 4)
    todos = [{"id": c["todo"]["id"]} for c in claims]
    todos[3].update(bad)
    with pytest.raises(error) as caught:
        await store.todos_complete(agent, todos)
    assert caught.value.argument == f"todos[3].{field}" and caught.value.message.startswith("todos[3]")
    assert await count(db_url, "SELECT count(*) AS n FROM todos WHERE state = 'done'") == 0


async def test_fenced_completes_need_each_its_own_token(store, agent, db_url):
    claims = await claimed(store, agent, 3, require_fence=True)
    ids, tokens = [c["todo"]["id"] for c in claims], [c["lease_token"] for c in claims]
    for swapped in ([tokens[0], tokens[2], tokens[1]], [tokens[0], None, tokens[2]]):
        with pytest.raises(Conflict) as caught:
            await store.todos_complete(agent, [{"id": i, "lease_token": t} for i, t in zip(ids, swapped)])
        assert caught.value.argument.startswith("todos[1].")
        assert await count(db_url, "SELECT count(*) AS n FROM todos WHERE state = 'done'") == 0
    out = await store.todos_complete(agent, [{"id": i, "lease_token": t} for i, t in zip(ids, tokens)])
    assert [t["state"] for t in out["todos"]] == ["done"] * 3
    # A token presented for an unfenced attempt matches nothing, as complete's does.
    plain = await claimed(store, agent, 2)
    with pytest.raises(Conflict) as caught:
        await store.todos_complete(agent, [{"id": plain[0]["todo"]["id"]},
                                           {"id": plain[1]["todo"]["id"], "lease_token": tokens[0]}])
    assert caught.value.argument == "todos[1].lease_token"
    assert await count(db_url, "SELECT count(*) AS n FROM todos WHERE state = 'done'") == 3


async def test_a_repeated_id_or_an_oversized_batch_is_refused(store, agent):
    claims = await claimed(store, agent, 2)
    with pytest.raises(Invalid) as caught:
        await store.todos_complete(agent, [{"id": claims[0]["todo"]["id"]}, {"id": claims[0]["todo"]["id"]}])
    assert caught.value.argument == "todos[1].id"
    for todos in ([], [{"id": "x"}] * 51, "x"):
        with pytest.raises(Invalid) as caught:
            await store.todos_complete(agent, todos)
        assert caught.value.argument == "todos"


async def test_concurrent_batched_drains_complete_every_todo_exactly_once(store, agent, db_url):
    total = 400
    await store.todos_add(agent, items(total))

    async def worker(i: int) -> int:
        me = agent.on_session(f"w{i}")
        done = 0
        while True:
            claims = (await store.todo_claim_next(me, limit=10, require_fence=i % 2 == 1))["claims"]
            if not claims:
                return done
            out = await store.todos_complete(me, [{"id": c["todo"]["id"], "lease_token": c.get("lease_token")}
                                                  for c in claims])
            done += len(out["todos"])

    assert sum(await asyncio.gather(*(worker(i) for i in range(8)))) == total
    rows = await sql_rows(db_url, "SELECT count(*) AS n, count(*) FILTER (WHERE outcome = 'completed') AS completed "
                                  "FROM attempts")
    assert rows == [{"n": total, "completed": total}]
    assert await count(db_url, "SELECT count(*) AS n FROM todos WHERE state = 'done'") == total


async def test_each_todo_of_a_batch_writes_its_ready_hook_event(store, agent, db_url):
    from tests.integration.test_hooks import hooked
    out = await hooked(store).todos_add(agent, items(30))
    rows = await sql_rows(db_url, "SELECT todo_id, event FROM hook_events ORDER BY todo_id")
    assert sorted(r["todo_id"] for r in rows) == sorted(t["id"] for t in out["todos"])
    assert {r["event"] for r in rows} == {"todo.ready"}
