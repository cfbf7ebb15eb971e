"""The claim decides by more than age (migration 0015), on Postgres through the store: the
priority first and the oldest within it, a time to start, a snooze, one live todo per key
under racing adds, and a queue's limit on held todos under concurrent claims, with the
attempt history written as before."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from board.errors import Conflict, Invalid
from tests.conftest import make_agent, make_user, sql_rows

T0 = datetime(2026, 12, 5, 9, 0, tzinfo=timezone.utc)


async def _outcome(coro):
    try:
        return await coro
    except Conflict as e:
        return e


async def test_claim_next_takes_the_most_urgent_first_and_the_oldest_within_a_priority_across_queues(store):
    agent = await make_agent(store, queues=("a", "b"))
    added = []
    for queue, priority, title in [("a", 2, "old P2"), ("b", 3, "P3"), ("b", 2, "newer P2"), ("a", 0, "P0"),
                                   ("b", 0, "newer P0"), ("a", 4, "P4"), ("b", None, "default P2")]:
        todo = await store.todo_add(agent, queue=queue, title=title, priority=priority)
        added.append(todo)
    assert added[-1]["priority"] == 2
    order = [(await store.todo_claim_next(agent))["todo"]["title"] for _ in added]
    assert order == ["P0", "newer P0", "old P2", "newer P2", "default P2", "P3", "P4"]


async def test_claim_next_with_a_queue_and_a_batch_keep_the_same_order(store):
    agent = await make_agent(store, queues=("a", "b"))
    for queue, priority, title in [("a", 3, "a3"), ("b", 0, "b0"), ("a", 1, "a1"), ("a", 1, "a1 newer"),
                                   ("a", 0, "a0")]:
        await store.todo_add(agent, queue=queue, title=title, priority=priority)
    only_a = await store.todo_claim_next(agent, queue="a")
    assert only_a["todo"]["title"] == "a0"
    batch = await store.todo_claim_next(agent, limit=3)
    assert [c["todo"]["title"] for c in batch["claims"]] == ["b0", "a1", "a1 newer"]
    assert [c["todo"]["priority"] for c in batch["claims"]] == [0, 1, 1]


async def test_a_scheduled_todo_is_not_claimable_before_its_run_at_and_is_after_it_falls_due(store, db_url):
    agent = await make_agent(store)
    later = await store.todo_add(agent, queue="q", title="at nine", run_at="2026-12-05T09:00:00+00:00",
                                 now=T0 - timedelta(hours=3))
    assert later["run_at"] == T0 and later["state"] == "pending"
    assert (await store.todo_claim_next(agent, now=T0 - timedelta(hours=1)))["todo"] is None
    with pytest.raises(Conflict, match="scheduled to start at 2026-12-05T09:00:00"):
        await store.todo_claim(agent, later["id"], now=T0 - timedelta(hours=1))
    assert await store.sweep_due(now=T0 - timedelta(seconds=1)) == 0  # not yet
    assert await store.next_due() == T0
    assert await store.sweep_due(now=T0) == 1
    assert await store.next_due() is None
    claimed = await store.todo_claim_next(agent, now=T0)
    assert claimed["todo"]["id"] == later["id"] and claimed["todo"]["run_at"] == T0
    rows = await sql_rows(db_url, "SELECT scheduled FROM todos WHERE id = %s", (later["id"],))
    assert rows == [{"scheduled": False}]


async def test_a_scheduled_todo_can_be_claimed_by_id_once_its_time_has_come_before_the_timer_runs(store):
    agent = await make_agent(store)
    todo = await store.todo_add(agent, queue="q", title="soon", delay_seconds=60, now=T0)
    assert todo["run_at"] == T0 + timedelta(seconds=60)
    claimed = await store.todo_claim(agent, todo["id"], now=T0 + timedelta(seconds=61))
    assert claimed["todo"]["state"] == "claimed"


async def test_a_run_at_in_the_past_or_a_zero_delay_is_claimable_at_once(store):
    agent = await make_agent(store)
    past = await store.todo_add(agent, queue="q", title="past", run_at="2020-01-01T00:00:00Z")
    now = await store.todo_add(agent, queue="q", title="now", delay_seconds=0)
    assert now["run_at"] is None
    taken = {(await store.todo_claim_next(agent))["todo"]["id"] for _ in range(2)}
    assert taken == {past["id"], now["id"]}


@pytest.mark.parametrize("args, argument", [
    ({"priority": 7}, "priority"), ({"priority": -1}, "priority"), ({"priority": True}, "priority"),
    ({"run_at": "2026-12-05T09:00:00"}, "run_at"), ({"run_at": "tomorrow"}, "run_at"),
    ({"run_at": "2026-12-05T09:00:00Z", "delay_seconds": 5}, "run_at"),
    ({"delay_seconds": -1}, "delay_seconds"), ({"delay_seconds": 31 * 86400 + 1}, "delay_seconds"),
    ({"key": "k" * 201}, "key"), ({"key": "é" * 101}, "key"), ({"key": ""}, "key"), ({"key": 5}, "key"),
])
async def test_a_bad_order_argument_is_invalid_naming_it_and_adds_nothing(store, db_url, args, argument):
    agent = await make_agent(store)
    with pytest.raises(Invalid) as caught:
        await store.todo_add(agent, queue="q", title="bad", **args)
    assert caught.value.argument == argument
    assert await sql_rows(db_url, "SELECT id FROM todos") == []


async def test_a_release_with_a_delay_snoozes_the_todo_and_closes_its_attempt_released(store, db_url):
    agent = await make_agent(store)
    todo = await store.todo_add(agent, queue="q", title="rate limited")
    await store.todo_claim(agent, todo["id"], now=T0)
    released = await store.todo_release(agent, todo["id"], delay_seconds=600, summary="429 until 09:10", now=T0)
    assert released["state"] == "pending" and released["run_at"] == T0 + timedelta(minutes=10)
    assert released["attempt"] == 1  # a release spends no attempt
    assert (await store.todo_claim_next(agent, now=T0 + timedelta(minutes=5)))["todo"] is None
    assert await store.sweep_due(now=T0 + timedelta(minutes=10)) == 1
    again = await store.todo_claim_next(agent, now=T0 + timedelta(minutes=10))
    assert again["todo"]["id"] == todo["id"]
    assert [(a["outcome"], a["disposition"]) for a in again["prior_attempts"]] == [("released", "requeued")]
    with pytest.raises(Invalid) as caught:
        await store.todo_release(agent, todo["id"], delay_seconds=-5, now=T0 + timedelta(minutes=10))
    assert caught.value.argument == "delay_seconds"
    rows = await sql_rows(db_url, "SELECT seq, outcome FROM attempts WHERE todo_id = %s ORDER BY seq", (todo["id"],))
    assert [(r["seq"], r["outcome"]) for r in rows] == [(1, "released"), (2, None)]


async def test_a_key_under_twenty_concurrent_adds_makes_one_todo_and_nineteen_deduplicated(store, db_url):
    agent = await make_agent(store)
    results = await asyncio.gather(*(store.todo_add(agent, queue="q", title=f"the build is red ({i})",
                                                    key="build-red") for i in range(20)))
    created = [r for r in results if not r["deduplicated"]]
    assert len(created) == 1 and sum(r["deduplicated"] for r in results) == 19
    assert {r["id"] for r in results} == {created[0]["id"]}
    assert all(r["key"] == "build-red" and r["title"] == created[0]["title"] for r in results)
    assert len(await sql_rows(db_url, "SELECT id FROM todos")) == 1


async def test_a_key_is_free_again_once_its_todo_has_ended_and_is_per_queue(store):
    agent = await make_agent(store, queues=("q", "other"))
    first = await store.todo_add(agent, queue="q", title="one", key="k")
    elsewhere = await store.todo_add(agent, queue="other", title="other queue", key="k")
    assert not elsewhere["deduplicated"] and elsewhere["id"] != first["id"]
    await store.todo_claim(agent, first["id"])
    held = await store.todo_add(agent, queue="q", title="while held", key="k")
    assert held["deduplicated"] and held["id"] == first["id"] and held["state"] == "claimed"
    await store.todo_complete(agent, first["id"])
    second = await store.todo_add(agent, queue="q", title="after", key="k")
    assert not second["deduplicated"] and second["id"] != first["id"]


async def test_a_failed_todo_waiting_for_its_retry_still_holds_its_key(store):
    agent = await make_agent(store)
    todo = await store.todo_add(agent, queue="q", title="flaky", key="k", max_attempts=3)
    await store.todo_claim(agent, todo["id"])
    await store.todo_fail(agent, todo["id"])
    again = await store.todo_add(agent, queue="q", title="again", key="k")
    assert again["deduplicated"] and again["id"] == todo["id"] and again["state"] == "failed"


async def test_a_dead_letter_retried_while_its_key_is_taken_is_a_conflict_naming_the_key(store):
    agent = await make_agent(store)
    dead = await store.todo_add(agent, queue="q", title="dies", key="k", max_attempts=1)
    await store.todo_claim(agent, dead["id"])
    await store.todo_fail(agent, dead["id"])
    await store.todo_add(agent, queue="q", title="the key again", key="k")
    with pytest.raises(Conflict) as caught:
        await store.todo_retry(agent, dead["id"])
    assert caught.value.argument == "key"


async def test_add_todos_deduplicates_each_item_within_the_batch_and_against_live_todos(store, db_url):
    agent = await make_agent(store)
    live = await store.todo_add(agent, queue="q", title="already there", key="a")
    out = await store.todos_add(agent, [
        {"queue": "q", "title": "dup of live", "key": "a"},
        {"queue": "q", "title": "new b", "key": "b", "priority": 0},
        {"queue": "q", "title": "no key"},
        {"queue": "q", "title": "dup of b in the batch", "key": "b"},
        {"queue": "q", "title": "scheduled", "delay_seconds": 3600},
    ])
    todos = out["todos"]
    assert [t["deduplicated"] for t in todos] == [True, False, False, True, False]
    assert todos[0]["id"] == live["id"] and todos[3]["id"] == todos[1]["id"]
    assert todos[1]["priority"] == 0 and todos[4]["run_at"] is not None
    assert len(await sql_rows(db_url, "SELECT id FROM todos")) == 4
    with pytest.raises(Invalid) as caught:
        await store.todos_add(agent, [{"queue": "q", "title": "x"}, {"queue": "q", "title": "y", "priority": 9}])
    assert caught.value.argument == "todos[1].priority"


async def test_a_queue_at_its_limit_is_passed_over_while_sixteen_connections_claim_at_once(store, db_url):
    user = await make_user(store)
    agent = await make_agent(store, user=user, queues=("models", "cheap"))
    assert await store.queue_limit_set(user.user_id, "models", 4) == 4
    for i in range(40):
        await store.todo_add(agent, queue="models", title=f"expensive {i}", priority=0)
    for i in range(20):
        await store.todo_add(agent, queue="cheap", title=f"cheap {i}", priority=4)
    held_sql = ("SELECT count(*) AS n FROM todos WHERE queue = 'models'"
                " AND state IN ('claimed', 'input_required', 'auth_required')")
    most = 0
    stop = asyncio.Event()

    async def watch():  # the database's count of held todos, read over and over while claims run
        nonlocal most
        while not stop.is_set():
            most = max(most, (await sql_rows(db_url, held_sql))[0]["n"])
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    workers = [agent.on_session(f"w{i}") for i in range(16)]
    claims = await asyncio.gather(*(store.todo_claim_next(w) for w in workers))
    for round_ in range(3):  # more rounds: each completes one model run and claims again
        done = [c for c in claims if c["todo"] is not None and c["todo"]["queue"] == "models"][:2]
        for c in done:
            await store.todo_complete(agent, c["todo"]["id"])
        claims = await asyncio.gather(*(store.todo_claim_next(w) for w in workers))
        assert (await sql_rows(db_url, held_sql))[0]["n"] == 4
    stop.set()
    await watcher
    assert most == 4
    # the queue at its limit: claim_next took the cheap queue's todos instead; by id it is a conflict
    held = await sql_rows(db_url, "SELECT queue, count(*) AS n FROM todos WHERE state = 'claimed' GROUP BY 1")
    assert {r["queue"]: r["n"] for r in held}["models"] == 4
    pending = await sql_rows(db_url, "SELECT id FROM todos WHERE queue = 'models' AND state = 'pending' LIMIT 1")
    with pytest.raises(Conflict, match="at its limit of 4 held todos"):
        await store.todo_claim(user, pending[0]["id"])
    # every claim opened exactly one attempt; nothing else was written
    rows = await sql_rows(db_url, "SELECT count(*) AS n, count(*) FILTER (WHERE outcome IS NULL) AS open"
                                  " FROM attempts")
    live = await sql_rows(db_url, "SELECT count(*) AS n FROM todos WHERE state = 'claimed'")
    assert rows[0]["open"] == live[0]["n"]


async def test_a_batch_claim_takes_no_more_of_a_limited_queue_than_its_room(store, db_url):
    user = await make_user(store)
    agent = await make_agent(store, user=user, queues=("models", "cheap"))
    await store.queue_limit_set(user.user_id, "models", 3)
    for i in range(10):
        await store.todo_add(agent, queue="models", title=f"m{i}", priority=0)
        await store.todo_add(agent, queue="cheap", title=f"c{i}", priority=1)
    first = await store.todo_claim_next(agent, queue="models")
    batch = await store.todo_claim_next(agent, limit=10)
    queues = [c["todo"]["queue"] for c in batch["claims"]]
    assert queues.count("models") == 2  # 3 less the one held already
    held = await sql_rows(db_url, "SELECT count(*) AS n FROM todos WHERE queue = 'models' AND state = 'claimed'")
    assert held[0]["n"] == 3 and first["todo"]["queue"] == "models"


async def test_removing_a_limit_frees_the_queue_and_a_limit_of_minus_one_is_invalid(store):
    user = await make_user(store)
    agent = await make_agent(store, user=user, queues=("q",))
    await store.queue_limit_set(user.user_id, "q", 1)
    for i in range(3):
        await store.todo_add(agent, queue="q", title=f"t{i}")
    assert (await store.todo_claim_next(agent))["todo"] is not None
    assert (await store.todo_claim_next(agent))["todo"] is None
    assert await store.queue_limit_set(user.user_id, "q", 0) is None
    assert (await store.todo_claim_next(agent))["todo"] is not None
    with pytest.raises(Invalid) as caught:
        await store.queue_limit_set(user.user_id, "q", -1)
    assert caught.value.argument == "limit"


async def test_a_takeover_of_a_lapsed_lease_in_a_full_queue_is_not_held_back(store):
    user = await make_user(store)
    agent = await make_agent(store, user=user, queues=("q",))
    await store.queue_limit_set(user.user_id, "q", 1)
    todo = await store.todo_add(agent, queue="q", title="lapses")
    await store.todo_claim(agent, todo["id"], lease_seconds=1, now=T0)
    taken = await store.todo_claim_next(agent.on_session("other"), now=T0 + timedelta(minutes=1))
    assert taken["todo"]["id"] == todo["id"] and taken["attempts_total"] == 2


async def test_the_human_changes_priorities_and_starts_a_scheduled_todo_now(store, db_url):
    user = await make_user(store)
    agent = await make_agent(store, user=user)
    low = await store.todo_add(agent, queue="q", title="low", priority=4)
    other = await store.todo_add(agent, queue="q", title="other")
    later = await store.todo_add(agent, queue="q", title="later", delay_seconds=86400)
    held = await store.todo_add(agent, queue="q", title="held")
    await store.todo_claim(agent, held["id"])
    changed = await store.todos_set_priority(user, [low["id"], held["id"], other["id"]], 0)
    assert sorted(changed) == sorted([low["id"], other["id"]])  # a held todo keeps its priority
    with pytest.raises(Invalid):
        await store.todos_set_priority(user, [low["id"]], 5)
    started = await store.todo_start_now(user, later["id"])
    assert started["id"] == later["id"]
    with pytest.raises(Conflict, match="not scheduled"):
        await store.todo_start_now(user, later["id"])
    order = [(await store.todo_claim_next(agent))["todo"]["title"] for _ in range(3)]
    assert order == ["low", "other", "later"]
    stranger = await make_user(store)
    assert await store.todos_set_priority(stranger, [low["id"]], 3) == []


async def test_the_order_is_carried_by_get_list_and_hooks(store, db_url):
    from board.config import Settings
    from board.store.store import Store
    hooked = Store(store.pool, Settings(hook_urls=("https://example.test/hook",)))
    user = await make_user(hooked)
    agent = await make_agent(hooked, user=user)
    todo = await hooked.todo_add(agent, queue="q", title="urgent", priority=0, key="page-1")
    got = await hooked.todo_get(agent, todo["id"])
    assert (got["priority"], got["key"], got["run_at"]) == (0, "page-1", None)
    listed = await hooked.todo_list(agent, priority=0)
    assert [t["id"] for t in listed["todos"]] == [todo["id"]]
    assert (await hooked.todo_list(agent, priority=1))["todos"] == []
    assert [t["id"] for t in (await hooked.todo_list(agent, key="page-1"))["todos"]] == [todo["id"]]
    scheduled = await hooked.todo_add(agent, queue="q", title="later", delay_seconds=3600)
    rows = await sql_rows(db_url, "SELECT todo_id, event, payload FROM hook_events ORDER BY created_at")
    assert [(r["todo_id"], r["event"]) for r in rows] == [(todo["id"], "todo.ready")]  # none for the scheduled one
    assert rows[0]["payload"]["todo"]["priority"] == 0
    await hooked.todo_start_now(user, scheduled["id"])
    rows = await sql_rows(db_url, "SELECT todo_id, event FROM hook_events ORDER BY created_at")
    assert rows[-1]["todo_id"] == scheduled["id"] and rows[-1]["event"] == "todo.ready"

