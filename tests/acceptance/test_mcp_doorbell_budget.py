"""The doorbell's budget over real MCP connections of both generations: a ready todo wakes
1 + SWITCHBOARD_DOORBELL_RING_MARGIN of the agents listening on its endpoint, not all of
them; while it stays pending the next ones are rung in turn, so no ready todo waits while
an agent listens; as many todos as agents wake every agent."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from tests.acceptance.mcp_helpers import Inbox, call, connect, doorbell, vend, wait_until
from tests.conftest import run_server

TODOS = "switchboard://todos"
GENERATIONS = ("legacy", "modern")


def uri(todo_id: str) -> str:
    return f"{TODOS}/{todo_id}"


@contextlib.asynccontextmanager
async def listeners(server, token: str, endpoint_id: str, generation: str, n: int, clients: list | None = None):
    """n agents of one endpoint listening for the collection; yields each one's rings (and
    appends each one's client to `clients` when given)."""
    async with contextlib.AsyncExitStack() as stack:
        heard: list[list[str]] = []
        for _ in range(n):
            before = doorbell(server).live_doorways(endpoint_id)
            if generation == "legacy":
                inbox = Inbox()
                client = await stack.enter_async_context(connect(server, token, "legacy", inbox=inbox))
                heard.append(inbox.uris)
            else:
                client = await stack.enter_async_context(connect(server, token, "modern"))
                sub = await stack.enter_async_context(client.listen(resource_subscriptions=[TODOS]))
                rings: list[str] = []

                async def collect(sub=sub, rings=rings):
                    async for event in sub:
                        rings.append(event.uri)

                task = asyncio.create_task(collect())
                stack.callback(task.cancel)
                heard.append(rings)
            if clients is not None:
                clients.append(client)
            await wait_until(lambda: doorbell(server).live_doorways(endpoint_id) > before)
        yield heard


def rung(heard: list[list[str]], todo_uri: str) -> int:
    return sum(todo_uri in rings for rings in heard)


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_one_ready_todo_wakes_one_plus_the_margin_of_the_listening_agents(server_settings, generation):
    settings = server_settings.with_(doorbell_ring_margin=1, doorbell_rering_seconds=60)
    async with run_server(settings) as server:
        ep = await vend(server.store)
        agent = await server.store.endpoint_authenticate(ep.token)
        async with listeners(server, ep.token, ep.endpoint_id, generation, 5) as heard:
            bell = doorbell(server)
            seen = bell.considered
            todo = await server.store.todo_add(agent, queue="q", title="one for five")
            await wait_until(lambda: bell.considered > seen and rung(heard, uri(todo["id"])) >= 2)
            await asyncio.sleep(0.3)  # a third ring, were there one, would have arrived by now
            assert rung(heard, uri(todo["id"])) == 2


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_todo_the_rung_agents_leave_pending_rings_the_next_until_every_agent_heard_it(
        server_settings, generation):
    settings = server_settings.with_(doorbell_ring_margin=0, doorbell_rering_seconds=0.2)
    async with run_server(settings) as server:
        ep = await vend(server.store)
        agent = await server.store.endpoint_authenticate(ep.token)
        async with listeners(server, ep.token, ep.endpoint_id, generation, 4) as heard:
            todo = await server.store.todo_add(agent, queue="q", title="nobody claims me at first")
            await wait_until(lambda: rung(heard, uri(todo["id"])) == 4, timeout=10)
            assert [rings.count(uri(todo["id"])) for rings in heard] == [1, 1, 1, 1]  # each once, in turn


async def test_a_claimed_todo_is_not_rung_again(server_settings):
    # A re-ring period longer than the test, and the pass run here as if it were due: a claim
    # slowed by a loaded machine cannot lose a race with the period.
    settings = server_settings.with_(doorbell_ring_margin=0, doorbell_rering_seconds=60)
    async with run_server(settings) as server:
        ep = await vend(server.store)
        async with listeners(server, ep.token, ep.endpoint_id, "modern", 3) as heard:
            async with connect(server, ep.token, "modern") as worker:
                claimed = await call(worker, "add_todo", {"queue": "q", "title": "claimed at once"})
                left = await call(worker, "add_todo", {"queue": "q", "title": "left pending"})
                await wait_until(lambda: rung(heard, uri(claimed["id"])) == 1 and rung(heard, uri(left["id"])) == 1)
                await call(worker, "claim", {"id": claimed["id"]})
                bell = doorbell(server)
                assert await bell.rering_due(now=time.monotonic() + 61) == 1  # the pending one's next agent
                await wait_until(lambda: rung(heard, uri(left["id"])) == 2)
                assert rung(heard, uri(claimed["id"])) == 1
                assert claimed["id"] not in bell._rerings


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_as_many_ready_todos_as_listening_agents_wake_every_agent(server_settings, generation):
    settings = server_settings.with_(doorbell_ring_margin=0, doorbell_rering_seconds=60)
    async with run_server(settings) as server:
        ep = await vend(server.store)
        agent = await server.store.endpoint_authenticate(ep.token)
        async with listeners(server, ep.token, ep.endpoint_id, generation, 4) as heard:
            added = await server.store.todos_add(agent, [{"queue": "q", "title": f"job {i}"} for i in range(4)])
            uris = {uri(t["id"]) for t in added["todos"]}
            await wait_until(lambda: all(set(rings) & uris for rings in heard))
            assert sorted(len(set(rings) & uris) for rings in heard) == [1, 1, 1, 1]


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_todos_the_first_rung_agents_are_too_busy_for_are_claimed_by_the_next(server_settings, generation):
    """Agents that claim when rung, two of four too busy to answer: every todo ends claimed,
    and by the agents that answered."""
    settings = server_settings.with_(doorbell_ring_margin=0, doorbell_rering_seconds=0.2)
    async with run_server(settings) as server:
        ep = await vend(server.store)
        agent = await server.store.endpoint_authenticate(ep.token)
        clients: list = []
        async with contextlib.AsyncExitStack() as stack:
            heard = await stack.enter_async_context(listeners(server, ep.token, ep.endpoint_id, generation, 4, clients))
            claimed: dict[int, list[str]] = {0: [], 1: [], 2: [], 3: []}

            async def work(i: int) -> None:
                seen = 0
                while True:
                    await asyncio.sleep(0.02)
                    if len(heard[i]) > seen and i % 2 == 1:  # agents 1 and 3 claim; 0 and 2 are busy
                        seen = len(heard[i])
                        got = (await call(clients[i], "claim_next"))["todo"]
                        if got:
                            claimed[i].append(got["id"])

            for i in range(4):
                task = asyncio.create_task(work(i))
                stack.callback(task.cancel)
            added = [await server.store.todo_add(agent, queue="q", title=f"job {n}") for n in range(3)]
            ids = {t["id"] for t in added}
            await wait_until(lambda: set(claimed[1] + claimed[3]) == ids, timeout=10)
            assert claimed[0] == claimed[2] == []
            for todo_id in ids:
                assert (await server.store.todo_get(agent, todo_id))["state"] == "claimed"


async def test_typescript_sdk_agents_are_rung_one_at_a_time_in_turn(server_settings):
    """Three TypeScript SDK clients (2025-11-25, the GET stream) listening: a pending todo
    rings one, then the next one each re-ring, until each heard it once."""
    from tests.acceptance.third_party import ts_client

    settings = server_settings.with_(doorbell_ring_margin=0, doorbell_rering_seconds=1.0)
    async with run_server(settings) as server:
        ep = await vend(server.store)
        agent = await server.store.endpoint_authenticate(ep.token)
        async with contextlib.AsyncExitStack() as stack:
            clients = []
            for _ in range(3):
                before = doorbell(server).live_doorways(ep.endpoint_id)
                client = await stack.enter_async_context(ts_client(server, ep.token, list_tools=False))
                await wait_until(lambda: doorbell(server).live_doorways(ep.endpoint_id) > before)  # its GET stream
                await client.request("subscribe", uri=TODOS)
                clients.append(client)
            todo = await server.store.todo_add(agent, queue="q", title="for one of three")

            async def counts() -> list[int]:
                return [(await c.request("updated")).count(uri(todo["id"])) for c in clients]

            history = []
            for _ in range(400):
                history.append(sum(await counts()))
                if history[-1] == 3:
                    break
                await asyncio.sleep(0.02)
            assert await counts() == [1, 1, 1]
            # One at a time, not all at once: a second apart, so a loaded machine's slow poll
            # still sees fewer than three at first.
            assert history[0] < 3
