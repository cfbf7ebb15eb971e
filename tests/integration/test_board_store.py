"""The store paths the Board's forms use: a human's add through their own live endpoint, and
a bulk action as the single action's transitions, each scoped to the caller."""

from __future__ import annotations

import pytest

from board.errors import Forbidden, Unavailable
from tests.conftest import make_agent, make_user


async def test_a_human_adds_only_through_their_own_live_endpoint_granted_the_queue(store):
    ada, bob = await make_user(store, "ada"), await make_user(store, "bob")
    first = await make_agent(store, user=ada, agent_id="first", queues=("builds",))
    second = await make_agent(store, user=ada, agent_id="second", queues=("builds", "docs"))
    revoked = await make_agent(store, user=ada, agent_id="revoked", queues=("old",))
    await store.endpoint_revoke(revoked.endpoint_id, user_id=ada.user_id)
    bobs = await make_agent(store, user=bob, agent_id="bobs", queues=("builds",))
    oldest = await store.todo_add(ada, queue="builds", title="to the oldest", payload={"k": 1}, max_attempts=2)
    named = await store.todo_add(ada, queue="builds", title="to the named", endpoint_id=second.endpoint_id)
    assert (oldest["state"], oldest["payload"], oldest["max_attempts"]) == ("pending", {"k": 1}, 2)
    listed = {t["id"]: t["endpoint_id"] for t in (await store.todo_list(ada))["todos"]}
    assert listed == {oldest["id"]: first.endpoint_id, named["id"]: second.endpoint_id}
    assert (await store.todo_claim_next(first))["todo"]["id"] == oldest["id"]  # the endpoint's agent sees it
    for queue, endpoint_id in (("docs", first.endpoint_id), ("builds", bobs.endpoint_id), ("nope", None),
                               ("old", None), ("builds", "not-a-uuid")):
        with pytest.raises(Forbidden) as e:
            await store.todo_add(ada, queue=queue, title="refused", endpoint_id=endpoint_id)
        assert e.value.argument == "queue"
    assert (await store.todo_list(bob))["todos"] == []


async def test_a_bulk_action_runs_each_single_transition_and_skips_what_it_cannot_change(store):
    ada, bob = await make_user(store, "ada"), await make_user(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w1")
    bobs = await make_agent(store, user=bob, agent_id="w2")
    held = []
    for i in range(7):
        t = await store.todo_add(agent, queue="q", title=f"held {i}")
        await store.todo_claim(agent, t["id"], claimant=f"run-{i}", require_fence=True)
        held.append(t["id"])
    pending = (await store.todo_add(agent, queue="q", title="pending"))["id"]
    theirs = (await store.todo_add(bobs, queue="q", title="theirs"))["id"]
    await store.todo_claim(bobs, theirs)
    seen = []
    store.observers.append(lambda t: seen.append((t.kind, t.todo_id)))
    counts = await store.todos_bulk(ada, "release", [*held, pending, theirs, "no-such-id", held[0]], batch=3,
                                    concurrency=2)
    assert counts == {"changed": 7, "skipped": 3, "not_tried": 0}
    assert sorted(seen) == sorted(("released", i) for i in held)
    for i in held:  # the Board is exempt from the fence, as in the single action
        got = await store.todo_get(ada, i)
        assert got["state"] == "pending" and got["attempts"][0]["outcome"] == "released"
    assert (await store.todo_get(bob, theirs))["state"] == "claimed"
    with pytest.raises(Forbidden):
        await store.todos_bulk(agent, "release", held)


async def test_a_bulk_action_stops_after_its_batch_when_the_database_goes_away(store, monkeypatch):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    ids = []
    for i in range(5):
        t = await store.todo_add(agent, queue="q", title=f"t{i}")
        ids.append(t["id"])
    real = store.todo_cancel
    calls = []

    async def flaky(caller, todo_id, **kw):
        calls.append(todo_id)
        if todo_id == ids[1]:
            raise Unavailable()
        return await real(caller, todo_id, **kw)

    monkeypatch.setattr(store, "todo_cancel", flaky)
    counts = await store.todos_bulk(ada, "cancel", ids, batch=2, concurrency=1)
    assert counts == {"changed": 1, "skipped": 0, "not_tried": 4}
    assert calls == ids[:2]
