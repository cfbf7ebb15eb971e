"""Exact attempt counts across pruning (REQ-11): an attempt of any outcome that can close
while its todo lives on (failed, released, lease_expired, reaped, revoked) is deleted by the
per-todo cap and still counted, by outcome, in get_todo's attempt_outcomes and the attempt
summary's by_outcome. completed and canceled end their todo for good, so no later claim
prunes them. Time moves by the store's injectable clock, never by sleeping."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from board.store import store as st
from tests.conftest import make_agent, make_user

T0 = datetime(2026, 11, 30, 14, 0, tzinfo=timezone.utc)
CAP = 5  # the smallest per-todo cap the store allows
LEASE = 60
RETRY_WAIT = 3600  # the settings fixture's retry_max_seconds: every backoff is due by then


class Clock:
    """The one time every call of a test is given, moved forward by hand."""

    def __init__(self):
        self.now = T0

    def tick(self, seconds: float = 1) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def capped(store):
    return st.Store(store.pool, store.settings.with_(attempt_history_max_per_todo=CAP))


async def claim(s, caller, todo_id, clock):
    return await s.todo_claim(caller, todo_id, lease_seconds=LEASE, now=clock.tick())


# Each closes the attempt just claimed with one outcome and leaves the todo claimable.
async def close_released(s, caller, todo_id, clock):
    await s.todo_release(caller, todo_id, now=clock.tick())


async def close_failed(s, caller, todo_id, clock):
    t = await s.todo_fail(caller, todo_id, now=clock.tick())
    assert t["next_retry_at"] is not None  # a retry, not a dead letter
    assert await s.sweep_retry(now=clock.tick(RETRY_WAIT)) == 1


async def close_lease_expired(s, caller, todo_id, clock):
    clock.tick(LEASE)  # the lease lapses; the next claim takes it over and closes it lease_expired


async def close_reaped(s, caller, todo_id, clock):
    assert await s.sweep_reap(now=clock.tick(LEASE)) == 1


async def push_out(s, caller, todo_id, clock):
    """CAP - 1 released attempts and an open one: every older attempt is pruned."""
    for _ in range(CAP - 1):
        await claim(s, caller, todo_id, clock)
        await close_released(s, caller, todo_id, clock)
    await claim(s, caller, todo_id, clock)


async def assert_counts(s, caller, todo_id, *, by_outcome, total):
    """The counts through both public reads; the history kept is only what push_out left,
    so every other outcome counted is a pruned attempt's."""
    got = await s.todo_get(caller, todo_id, attempts_limit=50)
    assert [a["outcome"] for a in got["attempts"]] == [None] + ["released"] * (CAP - 1)
    assert got["attempts_total"] == total and got["attempts_pruned"] == total - CAP
    assert got["attempt_outcomes"] == by_outcome
    summary = await s.todo_attempt_summary(todo_id)
    assert summary["total"] == total and summary["by_outcome"] == by_outcome


async def test_pruned_lease_expired_attempts_stay_counted(capped):
    clock = Clock()
    agent = await make_agent(capped)
    todo = await capped.todo_add(agent, queue="q", title="lapses", max_attempts=100, now=clock.now)
    for _ in range(3):  # each lapsed lease is taken over by the next claim
        await claim(capped, agent, todo["id"], clock)
        await close_lease_expired(capped, agent, todo["id"], clock)
    await push_out(capped, agent, todo["id"], clock)
    await assert_counts(capped, agent, todo["id"], total=8,
                        by_outcome={"lease_expired": 3, "released": CAP - 1})


async def test_pruned_reaped_attempts_stay_counted_requeued_and_dead_lettered(capped):
    clock = Clock()
    agent = await make_agent(capped)
    todo = await capped.todo_add(agent, queue="q", title="reaped", max_attempts=3, now=clock.now)
    for _ in range(3):  # requeued twice, then dead-lettered at max_attempts
        await claim(capped, agent, todo["id"], clock)
        await close_reaped(capped, agent, todo["id"], clock)
    got = await capped.todo_get(agent, todo["id"])
    assert got["dead_letter"] and [a["disposition"] for a in got["attempts"]] == [
        "dead_lettered", "requeued", "requeued"]
    await capped.todo_retry(agent, todo["id"], now=clock.tick())
    await push_out(capped, agent, todo["id"], clock)
    await assert_counts(capped, agent, todo["id"], total=8, by_outcome={"reaped": 3, "released": CAP - 1})


async def test_a_pruned_revoked_attempt_stays_counted(capped):
    clock = Clock()
    human = await make_user(capped)
    agent = await make_agent(capped, user=human)
    todo = await capped.todo_add(agent, queue="q", title="revoked", max_attempts=100, now=clock.now)
    await claim(capped, agent, todo["id"], clock)
    assert await capped.endpoint_revoke(agent.endpoint_id, now=clock.tick()) == 1
    # The endpoint is gone: its human retries the dead letter and works it from the Board.
    await capped.todo_retry(human, todo["id"], now=clock.tick())
    await push_out(capped, human, todo["id"], clock)
    await assert_counts(capped, human, todo["id"], total=6, by_outcome={"revoked": 1, "released": CAP - 1})


async def test_every_prunable_outcome_stays_counted_across_many_prunes(capped):
    """All five outcomes in one history, pruned a few at a time by successive claims, so each
    prune adds to counts an earlier prune left (of the same outcome and of others)."""
    clock = Clock()
    human = await make_user(capped)
    agent = await make_agent(capped, user=human)
    todo = await capped.todo_add(agent, queue="q", title="everything", max_attempts=1000, now=clock.now)
    closes = (close_failed, close_released, close_lease_expired, close_reaped)
    for _ in range(2):
        for close in closes:
            await claim(capped, agent, todo["id"], clock)
            await close(capped, agent, todo["id"], clock)
    await claim(capped, agent, todo["id"], clock)
    assert await capped.endpoint_revoke(agent.endpoint_id, now=clock.tick()) == 1
    await capped.todo_retry(human, todo["id"], now=clock.tick())
    for close in closes:
        await claim(capped, human, todo["id"], clock)
        await close(capped, human, todo["id"], clock)
    await push_out(capped, human, todo["id"], clock)
    await assert_counts(capped, human, todo["id"], total=18, by_outcome={
        "failed": 3, "released": 3 + CAP - 1, "lease_expired": 3, "reaped": 3, "revoked": 1})
