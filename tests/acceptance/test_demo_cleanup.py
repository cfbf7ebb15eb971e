"""The demo deletes only what it added. Its planner's cleanup pass (`Planner.make_room`, run
here directly against a live server rather than by waiting for the demo to fill up) removes
the demo's own oldest finished todos to stay under its bound on todos in all, and never a todo
the person added themselves: on the Board (signed in as the demo user, so on the demo
endpoint) or through an endpoint of their own, finished long before any of the demo's. The
ids the demo added live in demo.json, so a second run on the same data dir cleans what the
first one added, and still leaves the person's alone."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from switchboard_worker import Worker

from board.demo import QUEUES, Demo, Limits
from board.demo.planner import Planner
from board.demo.seeding import ensure_credentials
from board.errors import NotFound
from board.store.store import Human
from tests.conftest import make_agent


async def demo_on(server, limits: Limits) -> Demo:
    """A Demo whose planner talks to `server` (its own server and Postgres are not started)."""
    demo = Demo(server.settings, host="127.0.0.1", port=0, duration=None, limits=limits)
    demo.store, demo.local_url = server.store, server.url
    demo.creds = await ensure_credentials(demo.store, demo.state)
    demo.token = demo.creds.token
    return demo


async def cleanup_pass(demo: Demo, want: int) -> tuple[int, int]:
    planner = Planner(demo, "planner")
    async with Worker(demo.local_url, demo.token) as worker:
        planner.worker = worker
        return await planner.make_room(want)


async def test_demo_cleanup_deletes_only_the_finished_todos_it_added(live_server, tmp_path, monkeypatch):
    monkeypatch.setenv("SWITCHBOARD_DATA_DIR", str(tmp_path))
    store = live_server.store
    seeds = QUEUES["builds"]  # five
    demo = await demo_on(live_server, Limits(live_todos=10, max_todos=len(seeds)))
    person = Human(demo.creds.user_id, demo.creds.username)
    an_hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)

    # The person's own, finished an hour ago: one added on the Board (the demo endpoint), one
    # through an endpoint of their own, claimed and completed there.
    on_board = await store.todo_add(person, queue="builds", title="My own todo from the Board")
    await store.todo_cancel(person, on_board["id"], now=an_hour_ago)
    mine = await make_agent(store, user=person, agent_id="my-agent", queues=("builds",))
    by_agent = await store.todo_add(mine, queue="builds", title="My own agent's todo")
    await store.todo_claim(mine, by_agent["id"], now=an_hour_ago)
    await store.todo_complete(mine, by_agent["id"], now=an_hour_ago)

    # The demo's own, added by its planner and finished now, oldest first.
    planner = Planner(demo, "planner")
    async with Worker(demo.local_url, demo.token) as worker:
        planner.worker = worker
        added = [await planner.add("builds", seed, 1) for seed in seeds]
    for todo in added:
        await store.todo_cancel(person, todo["id"])
    assert demo.state.added() == [t["id"] for t in added]

    # Two new todos must fit under a bound of five in all: the demo's two oldest go.
    assert await cleanup_pass(demo, want=2) == (2, 2)
    for todo in added[:2]:
        with pytest.raises(NotFound):
            await store.todo_get(person, todo["id"])
    for todo in added[2:]:
        assert (await store.todo_get(person, todo["id"]))["state"] == "canceled"
    assert demo.state.added() == [t["id"] for t in added[2:]]

    # A second run on the same data dir, with a bound of one, cleans the rest of the demo's.
    again = await demo_on(live_server, Limits(live_todos=1, max_todos=1))
    assert again.state.added() == [t["id"] for t in added[2:]]
    assert await cleanup_pass(again, want=1) == (1, 3)
    assert await cleanup_pass(again, want=1) == (1, 0)  # nothing of its own left to delete
    for todo in added:
        with pytest.raises(NotFound):
            await store.todo_get(person, todo["id"])
    assert again.state.added() == []

    # The person's own survive every pass, whoever added them.
    assert (await store.todo_get(person, on_board["id"]))["state"] == "canceled"
    assert (await store.todo_get(person, by_agent["id"]))["state"] == "done"
