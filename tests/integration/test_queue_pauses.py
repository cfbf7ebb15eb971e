"""Pausing a queue (migration 0003) and the Board's overview, through the store: a paused
queue keeps its todos but no agent claims in it, a pause holds for every endpoint of the
human who paused and never for another human's, the sweeps go on, and the overview counts
and charts the human's own todos only."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from board.errors import Conflict, NotFound
from board.web.overview import WINDOWS, overview_data
from tests.conftest import make_agent, make_user


async def test_a_paused_queue_keeps_its_todos_but_agents_claim_nothing_in_it(store):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, queues=("builds", "docs"))
    held_back = await store.todo_add(agent, queue="builds", title="build it")
    other = await store.todo_add(agent, queue="docs", title="write it")

    assert (await store.queue_pause(ada, "builds"))["changed"] is True
    got = await store.todo_claim_next(agent)
    assert got["todo"]["id"] == other["id"]  # the older todo is in the paused queue
    assert await store.todo_claim_next(agent) == {"todo": None}
    assert await store.todo_claim_next(agent, queue="builds") == {"todo": None}
    with pytest.raises(Conflict) as refused:
        await store.todo_claim(agent, held_back["id"])
    assert "queue builds is paused" in refused.value.message
    kept = await store.todo_get(ada, held_back["id"])
    assert kept["state"] == "pending" and kept["attempts_total"] == 0

    assert (await store.queue_resume(ada, "builds"))["changed"] is True
    assert (await store.todo_claim_next(agent))["todo"]["id"] == held_back["id"]


async def test_a_pause_holds_for_every_endpoint_of_its_human_and_never_for_another_humans(store):
    ada, bob = await make_user(store, "ada"), await make_user(store, "bob")
    ada_one = await make_agent(store, user=ada, agent_id="one", queues=("q",))
    ada_two = await make_agent(store, user=ada, agent_id="two", queues=("q",))
    bob_agent = await make_agent(store, user=bob, agent_id="bob", queues=("q",))
    for a in (ada_one, ada_two, bob_agent):
        await store.todo_add(a, queue="q", title="work")

    await store.queue_pause(bob, "q")
    assert (await store.todo_claim_next(ada_one))["todo"] is not None  # Bob's pause is his own
    assert (await store.todo_claim_next(ada_two))["todo"] is not None
    assert (await store.todo_claim_next(bob_agent))["todo"] is None

    await store.todo_add(ada_one, queue="q", title="more")
    await store.todo_add(ada_two, queue="q", title="more")
    await store.queue_pause(ada, "q")
    assert (await store.todo_claim_next(ada_one))["todo"] is None
    assert (await store.todo_claim_next(ada_two))["todo"] is None
    await store.queue_resume(bob, "q")
    assert (await store.todo_claim_next(ada_one))["todo"] is None  # Bob's resume is his own too
    assert (await store.todo_claim_next(bob_agent))["todo"] is not None


async def test_only_a_queue_of_the_humans_endpoints_can_be_paused_and_twice_changes_nothing(store):
    ada, bob = await make_user(store, "ada"), await make_user(store, "bob")
    await make_agent(store, user=ada, queues=("q",))
    with pytest.raises(NotFound):
        await store.queue_pause(bob, "q")  # Bob has no endpoint in q: not his to pause
    with pytest.raises(NotFound):
        await store.queue_resume(bob, "q")
    first = await store.queue_pause(ada, "q", now=datetime(2026, 1, 1, tzinfo=timezone.utc))
    again = await store.queue_pause(ada, "q")
    assert again == {"queue": "q", "paused_at": first["paused_at"], "changed": False}
    assert (await store.queue_resume(ada, "q"))["changed"] is True
    assert (await store.queue_resume(ada, "q"))["changed"] is False


async def test_the_reaper_and_the_retry_scheduler_run_on_in_a_paused_queue(store):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, queues=("q",))
    t0 = datetime.now(timezone.utc)
    lapsing = await store.todo_add(agent, queue="q", title="lease lapses")
    failing = await store.todo_add(agent, queue="q", title="fails once")
    await store.todo_claim(agent, lapsing["id"], lease_seconds=60, now=t0)
    await store.todo_claim(agent, failing["id"], now=t0)
    failed = await store.todo_fail(agent, failing["id"], summary="red", now=t0)
    assert failed["next_retry_at"] is not None

    await store.queue_pause(ada, "q")
    later = t0 + timedelta(hours=2)
    with pytest.raises(Conflict) as refused:  # a lapsed lease is not taken over in a paused queue
        await store.todo_claim(agent, lapsing["id"], now=later)
    assert "paused" in refused.value.message
    assert await store.sweep_reap(now=later) == 1
    assert await store.sweep_retry(now=later) == 1
    assert {(await store.todo_get(ada, t["id"]))["state"] for t in (lapsing, failing)} == {"pending"}
    assert (await store.todo_claim_next(agent, now=later))["todo"] is None


async def test_the_owning_human_may_still_claim_by_hand_in_a_paused_queue(store):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, queues=("q",))
    todo = await store.todo_add(agent, queue="q", title="by hand")
    await store.queue_pause(ada, "q")
    got = await store.todo_claim(ada, todo["id"], claimant="board/ada")
    assert got["todo"]["owner"] == f"human:{ada.user_id}"


async def test_the_overview_counts_each_state_of_the_humans_own_queues_only(store):
    ada, bob = await make_user(store, "ada"), await make_user(store, "bob")
    one = await make_agent(store, user=ada, agent_id="one", queues=("builds", "idle"))
    two = await make_agent(store, user=ada, agent_id="two", queues=("builds",))
    bob_agent = await make_agent(store, user=bob, agent_id="bob", queues=("builds",))
    for _ in range(3):
        await store.todo_add(bob_agent, queue="builds", title="bob's")  # never counted for Ada

    async def add(agent, **kw):
        return await store.todo_add(agent, queue="builds", title="t", **kw)

    await add(one)  # pending
    await add(two)  # pending
    claimed = await add(one)
    await store.todo_claim(one, claimed["id"])
    asked = await add(one)
    await store.todo_claim(one, asked["id"])
    await store.todo_interrupt(one, asked["id"])
    auth = await add(two)
    await store.todo_claim(two, auth["id"])
    await store.todo_interrupt(two, auth["id"], state="auth_required")
    retrying = await add(one)
    await store.todo_claim(one, retrying["id"])
    await store.todo_fail(one, retrying["id"])
    dead = await add(two, max_attempts=1)
    await store.todo_claim(two, dead["id"])
    await store.todo_fail(two, dead["id"])
    done = await add(one)
    await store.todo_claim(one, done["id"])
    await store.todo_complete(one, done["id"])
    canceled = await add(two)
    await store.todo_cancel(two, canceled["id"])
    await store.queue_pause(ada, "idle")

    rows = {r["queue"]: r for r in await store.queue_overview(ada)}
    assert set(rows) == {"builds", "idle"}  # idle: a granted queue with no todos yet
    counts = {k: rows["builds"][k] for k in ("pending", "claimed", "input_required", "auth_required", "retrying",
                                              "dead", "done", "canceled")}
    assert counts == {"pending": 2, "claimed": 1, "input_required": 1, "auth_required": 1, "retrying": 1,
                      "dead": 1, "done": 1, "canceled": 1}
    assert rows["builds"]["paused_at"] is None and rows["idle"]["paused_at"] is not None
    assert sum(rows["idle"][k] for k in counts) == 0
    bob_rows = await store.queue_overview(bob)
    assert [(r["queue"], r["pending"], r["paused_at"]) for r in bob_rows] == [("builds", 3, None)]


async def test_the_chart_counts_the_attempts_closed_in_the_last_hour_by_five_minutes(store):
    ada, bob = await make_user(store, "ada"), await make_user(store, "bob")
    agent = await make_agent(store, user=ada, queues=("q",))
    bob_agent = await make_agent(store, user=bob, agent_id="bob", queues=("q",))
    # Two and a half minutes into a five-minute bucket (the buckets are aligned to UTC)
    t = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    now = t.replace(minute=t.minute - t.minute % 5) + timedelta(seconds=150)

    async def closed(a, how, minutes_ago, **kw):
        at = now - timedelta(minutes=minutes_ago)
        todo = await store.todo_add(a, queue="q", title=how, now=at - timedelta(seconds=2), **kw)
        await store.todo_claim(a, todo["id"], lease_seconds=1, now=at - timedelta(seconds=1))
        if how == "complete":
            await store.todo_complete(a, todo["id"], now=at)
        elif how == "fail":
            await store.todo_fail(a, todo["id"], now=at)
        elif how == "release":
            await store.todo_release(a, todo["id"], now=at)
        else:
            await store.sweep_reap(now=at)

    await closed(agent, "complete", 70)  # before the window
    await closed(agent, "complete", 1)
    await closed(agent, "complete", 2)
    await closed(agent, "fail", 31)
    await closed(agent, "release", 54)  # the oldest bar: 55 to 60 minutes before its end
    await closed(agent, "reap", 12)
    await closed(bob_agent, "complete", 1)  # Bob's: never in Ada's chart

    hour = WINDOWS["hour"]
    rows = await store.queue_outcomes(ada, buckets=hour.buckets, bucket_seconds=hour.bucket_seconds, now=now)
    assert sorted((r["outcome"], r["bucket"], r["n"]) for r in rows) == [
        ("completed", 0, 2), ("failed", 6, 1), ("reaped", 2, 1), ("released", 11, 1)]

    data = await overview_data(store, ada, now=now)
    [q] = data["queues"]
    assert q["totals"] == {"completed": 2, "released": 1, "failed": 1, "died": 1}
    assert q["summary"] == "2 completed, 1 released, 1 failed, 1 died"
    assert {bar["outcome"] for bar in q["bars"]} == {"completed", "released", "failed", "died"}
    newest = [bar for bar in q["bars"] if bar["outcome"] == "completed"]
    assert len(newest) == 1 and newest[0]["x"] == 111  # the newest bucket is the rightmost bar

    day = await overview_data(store, ada, now=now, window=WINDOWS["day"])
    assert day["queues"][0]["totals"] == {"completed": 3, "released": 1, "failed": 1, "died": 1}  # 70 minutes ago too
