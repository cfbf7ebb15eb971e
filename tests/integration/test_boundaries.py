"""The edges of the lease and of the attempt cap, each tested on both sides: a lease has
lapsed from the instant it expires (lease_expires_at <= now), and a todo's last allowed
attempt is its max_attempts-th (attempt < max_attempts may go again)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from board.errors import Conflict
from tests.conftest import sql_rows

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
LEASE = 10
EXPIRES = T0 + timedelta(seconds=LEASE)
JUST_BEFORE = EXPIRES - timedelta(microseconds=1)


async def held(store, agent, *, max_attempts=5) -> str:
    todo = await store.todo_add(agent, queue="q", title="edge", max_attempts=max_attempts)
    await store.todo_claim(agent, todo["id"], lease_seconds=LEASE, now=T0)
    return todo["id"]


async def outcomes(db_url, todo_id) -> list:
    rows = await sql_rows(db_url, "SELECT outcome::text AS o FROM attempts WHERE todo_id = %s ORDER BY seq", (todo_id,))
    return [r["o"] for r in rows]


async def test_a_lease_can_be_taken_over_by_id_the_instant_it_expires_and_not_before(store, agent, db_url):
    todo_id = await held(store, agent)
    with pytest.raises(Conflict):
        await store.todo_claim(agent, todo_id, now=JUST_BEFORE)
    taken = await store.todo_claim(agent, todo_id, now=EXPIRES)
    assert taken["attempt_seq"] == 2
    assert await outcomes(db_url, todo_id) == ["lease_expired", None]


async def test_claim_next_takes_over_a_lease_the_instant_it_expires_and_not_before(store, agent, db_url):
    todo_id = await held(store, agent)
    assert (await store.todo_claim_next(agent, now=JUST_BEFORE))["todo"] is None
    assert (await store.todo_claim_next(agent, now=EXPIRES))["todo"]["id"] == todo_id


async def test_the_reaper_reaps_a_lease_the_instant_it_expires_and_not_before(store, agent, db_url):
    todo_id = await held(store, agent)
    assert await store.sweep_reap(now=JUST_BEFORE) == 0
    assert await outcomes(db_url, todo_id) == [None]
    assert await store.sweep_reap(now=EXPIRES) == 1
    assert await outcomes(db_url, todo_id) == ["reaped"]


async def test_a_lapsed_lease_below_the_cap_is_taken_over_and_at_the_cap_it_is_not(store, agent, db_url):
    below = await held(store, agent, max_attempts=2)  # attempt 1 of 2: may go again
    assert (await store.todo_claim(agent, below, now=EXPIRES))["attempt_seq"] == 2
    last = await held(store, agent, max_attempts=1)  # attempt 1 of 1: the reaper dead-letters it
    with pytest.raises(Conflict):
        await store.todo_claim(agent, last, now=EXPIRES)
    assert await outcomes(db_url, last) == [None]


async def test_the_reaper_requeues_below_the_cap_and_dead_letters_at_it(store, agent, db_url):
    below = await held(store, agent, max_attempts=2)
    last = await held(store, agent, max_attempts=1)
    assert await store.sweep_reap(now=EXPIRES) == 2
    rows = {r["id"]: r for r in await sql_rows(db_url, "SELECT id, state::text AS state, next_retry_at FROM todos "
                                                       "WHERE id = ANY(%s)", ([below, last],))}
    assert rows[below]["state"] == "pending"
    assert (rows[last]["state"], rows[last]["next_retry_at"]) == ("failed", None)
    disp = await sql_rows(db_url, "SELECT todo_id, disposition::text AS d FROM attempts WHERE todo_id = ANY(%s)",
                          ([below, last],))
    assert {r["todo_id"]: r["d"] for r in disp} == {below: "requeued", last: "dead_lettered"}


async def test_a_fail_below_the_cap_schedules_a_retry_and_at_it_dead_letters(store, agent, db_url):
    below = await held(store, agent, max_attempts=2)
    last = await held(store, agent, max_attempts=1)
    retried = await store.todo_fail(agent, below, now=T0)
    dead = await store.todo_fail(agent, last, now=T0)
    assert (retried["dead_letter"], retried["next_retry_at"] is not None) == (False, True)
    assert (dead["dead_letter"], dead["next_retry_at"]) == (True, None)
    assert (retried["closed_attempt"]["disposition"], dead["closed_attempt"]["disposition"]) == (
        "retry_scheduled", "dead_lettered")


async def test_a_heartbeat_on_an_interrupted_todo_is_conflict_and_keeps_its_lease(store, agent, db_url):
    todo_id = await held(store, agent)
    await store.todo_interrupt(agent, todo_id, now=T0)
    before = await sql_rows(db_url, "SELECT state::text AS s, lease_expires_at FROM todos WHERE id = %s", (todo_id,))
    with pytest.raises(Conflict):
        await store.todo_heartbeat(agent, todo_id, now=T0 + timedelta(seconds=1))
    after = await sql_rows(db_url, "SELECT state::text AS s, lease_expires_at FROM todos WHERE id = %s", (todo_id,))
    assert after == before and after[0]["s"] == "input_required"
