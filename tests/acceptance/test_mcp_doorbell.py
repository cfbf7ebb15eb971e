"""The doorbell (SPEC-0011, SPEC-0034 REQ-16) over real MCP connections of both generations:
a ready todo rings its own endpoint's live sessions whose queues include it, never another
endpoint's, under the per-todo gate that a retry-scheduler re-queue clears."""

from __future__ import annotations

import asyncio
import json
import contextlib
from datetime import datetime, timedelta, timezone

import pytest

from tests.conftest import LOAD_SLACK_SECONDS
from tests.acceptance.mcp_helpers import CREDENTIALS, Inbox, call, connect, credential, doorbell, vend, wait_until

TODOS = "switchboard://todos"


def uri(todo_id: str) -> str:
    return f"{TODOS}/{todo_id}"


@pytest.fixture
def server_settings(server_settings):
    # A gate long enough to matter inside a test, and the retry scheduler left to the tests
    # (they drive it with sweep_retry(now=...)), so no minute-long waits.
    return server_settings.with_(doorbell_gate_seconds=30, retry_interval_seconds=0, retry_base_seconds=10)


@contextlib.asynccontextmanager
async def legacy_session(server, token, endpoint_id):
    """A 2025-11-25 session whose GET stream is open (so it can be rung)."""
    inbox = Inbox()
    before = doorbell(server).live_doorways(endpoint_id)
    async with connect(server, token, "legacy", inbox=inbox) as client:
        await wait_until(lambda: doorbell(server).live_doorways(endpoint_id) > before)
        yield client, inbox


@contextlib.asynccontextmanager
async def listening(server, token, *, uris=(TODOS,)):
    """A 2026-07-28 client with an open subscriptions/listen stream; yields (client, rings)."""
    rings: list[str] = []
    async with connect(server, token, "modern") as client:
        async with client.listen(resource_subscriptions=list(uris)) as sub:
            async def collect():
                async for event in sub:
                    rings.append(event.uri)
            task = asyncio.create_task(collect())
            try:
                yield client, rings, sub
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


@contextlib.asynccontextmanager
async def rung(server, ep, generation: str):
    """A client of either generation that can be rung: a legacy session with its GET stream, or
    a modern client listening on switchboard://todos; yields (client, the URIs rung so far)."""
    if generation == "legacy":
        async with legacy_session(server, ep.token, ep.endpoint_id) as (client, inbox):
            yield client, inbox.uris
    else:
        async with listening(server, ep.token) as (client, rings, _):
            yield client, rings


@pytest.mark.parametrize("kind", CREDENTIALS)
async def test_an_added_todo_rings_the_endpoints_legacy_session(live_server, kind):
    ep = await credential(live_server, kind)
    async with legacy_session(live_server, ep.token, ep.endpoint_id) as (client, inbox):
        todo = await call(client, "add_todo", {"queue": "q", "title": "ring me"})
        await inbox.wait_for(uri(todo["id"]))


@pytest.mark.parametrize("kind", CREDENTIALS)
async def test_an_added_todo_rings_a_sessionless_listen_stream(live_server, kind):
    ep = await credential(live_server, kind)
    async with listening(live_server, ep.token) as (client, rings, sub):
        assert sub.honored.resource_subscriptions == [TODOS]
        todo = await call(client, "add_todo", {"queue": "q", "title": "ring me"})
        await wait_until(lambda: uri(todo["id"]) in rings)


async def test_another_endpoints_session_is_never_rung(live_server):
    store = live_server.store
    mine = await vend(store)
    theirs = await vend(store, user_id=mine.user_id, agent_id="other")  # same human, same queue name
    async with legacy_session(live_server, theirs.token, theirs.endpoint_id) as (their_client, their_inbox):
        async with listening(live_server, theirs.token) as (_, their_rings, _sub):
            async with legacy_session(live_server, mine.token, mine.endpoint_id) as (client, my_inbox):
                todo = await call(client, "add_todo", {"queue": "q", "title": "mine only"})
                await my_inbox.wait_for(uri(todo["id"]))
            # Rings reach a doorway in order: once their own later todo has rung both of their
            # doorways, a ring for mine would have arrived before it.
            marker = await call(their_client, "add_todo", {"queue": "q", "title": "theirs"})
            await their_inbox.wait_for(uri(marker["id"]))
            await wait_until(lambda: uri(marker["id"]) in their_rings)
    assert their_inbox.uris == [uri(marker["id"])] and their_rings == [uri(marker["id"])]


async def test_a_session_whose_scope_may_not_drain_is_not_rung(live_server):
    store = live_server.store
    bell = doorbell(live_server)
    user = (await store.user_insert("qowner", "x"))["id"]
    producer = await vend(store, user_id=user, agent_id="producer", scope=("add_todo", "list_todos"))
    async with legacy_session(live_server, producer.token, producer.endpoint_id) as (client, inbox):
        async with listening(live_server, producer.token) as (_, rings, _sub):
            await wait_until(lambda: bell.live_doorways(producer.endpoint_id) == 2)  # both can be rung now
            seen = bell.considered
            todo = await call(client, "add_todo", {"queue": "q", "title": "for someone who drains"})
            await wait_until(lambda: bell.considered > seen)  # the doorbell has decided on the add
            assert todo["id"] not in bell.gate, "the doorbell rang a session that may not drain"
            assert rings == [] and inbox.uris == [] and todo["state"] == "pending"


async def test_a_release_inside_the_gate_does_not_ring_twice(live_server):
    ep = await vend(live_server.store)
    async with legacy_session(live_server, ep.token, ep.endpoint_id) as (client, inbox):
        todo = await call(client, "add_todo", {"queue": "q", "title": "gated"})
        await inbox.wait_for(uri(todo["id"]))
        await call(client, "claim", {"id": todo["id"]})
        await call(client, "release", {"id": todo["id"]})
        marker = await call(client, "add_todo", {"queue": "q", "title": "marker"})
        await inbox.wait_for(uri(marker["id"]))  # rings are in order, so the release's ring would be here by now
        assert inbox.uris.count(uri(todo["id"])) == 1


@pytest.mark.parametrize("generation", ["legacy", "modern"])
async def test_retry_rings_again(live_server, generation):
    """REQ-16: WHEN a failed todo's backoff elapses and the retry scheduler re-queues it,
    THEN an in-scope live session receives a doorbell for it."""
    store = live_server.store
    ep = await vend(store)
    async with rung(live_server, ep, generation) as (client, rings):
        todo = await call(client, "add_todo", {"queue": "q", "title": "flaky"})
        await wait_until(lambda: uri(todo["id"]) in rings)
        await call(client, "claim", {"id": todo["id"]})
        failed = await call(client, "fail", {"id": todo["id"], "summary": "tests red"})
        assert failed["next_retry_at"] is not None and failed["dead_letter"] is False
        due = datetime.fromisoformat(failed["next_retry_at"]) + timedelta(seconds=1)
        assert await store.sweep_retry(now=due) == 1
        await wait_until(lambda: rings.count(uri(todo["id"])) == 2)


@pytest.mark.parametrize("generation", ["legacy", "modern"])
async def test_a_scheduled_todo_rings_when_it_falls_due_not_on_its_add_and_again_after_a_snooze(live_server,
                                                                                               generation):
    """A todo added with delay_seconds rings when the due timer makes it claimable, not
    before; snoozed by a release with delay_seconds (inside the gate), it rings again when it
    falls due again."""
    store = live_server.store
    ep = await vend(store)
    async with rung(live_server, ep, generation) as (client, rings):
        async def quiet_until_marked(todo_id: str, rung: int) -> None:
            marker = await call(client, "add_todo", {"queue": "q", "title": "marker"})
            await wait_until(lambda: uri(marker["id"]) in rings)  # rings are in order
            assert rings.count(uri(todo_id)) == rung

        todo = await call(client, "add_todo", {"queue": "q", "title": "later", "delay_seconds": 3600})
        await quiet_until_marked(todo["id"], 0)
        await store.sweep_due(now=datetime.fromisoformat(todo["run_at"]) + timedelta(seconds=1))
        await wait_until(lambda: uri(todo["id"]) in rings)
        await call(client, "claim", {"id": todo["id"]})
        snoozed = await call(client, "release", {"id": todo["id"], "delay_seconds": 3600})
        await quiet_until_marked(todo["id"], 1)
        await store.sweep_due(now=datetime.fromisoformat(snoozed["run_at"]) + timedelta(seconds=1))
        await wait_until(lambda: rings.count(uri(todo["id"])) == 2)


async def test_a_quick_failure_is_not_swallowed_by_the_gate(live_server):
    """REQ-16: GIVEN a todo rung at creation, claimed, and failed 5 seconds later, WHEN the
    retry scheduler re-queues it 30 seconds after that, inside the gate's window, THEN an
    in-scope live session receives a doorbell for the re-queue, without waiting for the
    doorbell heartbeat (which is off here)."""
    store = live_server.store
    assert live_server.settings.doorbell_heartbeat_seconds == 0
    ep = await vend(store)
    agent = await store.endpoint_authenticate(ep.token)
    t0 = datetime.now(timezone.utc)
    async with legacy_session(live_server, ep.token, ep.endpoint_id) as (client, inbox):
        todo = await call(client, "add_todo", {"queue": "q", "title": "quick failure"})
        await inbox.wait_for(uri(todo["id"]))
        await store.todo_claim(agent, todo["id"], now=t0)
        await store.todo_fail(agent, todo["id"], summary="red", now=t0 + timedelta(seconds=5))
        # 35 s of database time later, but well inside the 30 s gate of wall-clock time:
        assert await store.sweep_retry(now=t0 + timedelta(seconds=35)) == 1
        await wait_until(lambda: inbox.uris.count(uri(todo["id"])) == 2)


async def test_a_todo_reaped_back_to_pending_rings(live_server):
    store = live_server.store
    ep = await vend(store)
    agent = await store.endpoint_authenticate(ep.token)
    async with listening(live_server, ep.token) as (client, rings, _):
        todo = await call(client, "add_todo", {"queue": "q", "title": "dies"})
        await wait_until(lambda: uri(todo["id"]) in rings)
        t0 = datetime.now(timezone.utc)
        # A lease the server's own reaper (real time) cannot end during the test; the sweep
        # here runs on the injected clock past it.
        await store.todo_claim(agent, todo["id"], lease_seconds=600, now=t0)
        doorbell(live_server).gate.clear()  # past the gate window, as if a minute went by
        assert await store.sweep_reap(now=t0 + timedelta(seconds=605)) == 1
        await wait_until(lambda: rings.count(uri(todo["id"])) == 2)


async def test_a_listen_stream_for_one_todo_hears_only_that_todo(live_server):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token, "modern") as client:
        first = await call(client, "add_todo", {"queue": "q", "title": "watched"})
        await call(client, "claim", {"id": first["id"]})
        async with listening(live_server, ep.token, uris=(uri(first["id"]),)) as (_, rings, sub):
            assert sub.honored.resource_subscriptions == [uri(first["id"])]
            other = await call(client, "add_todo", {"queue": "q", "title": "not watched"})
            doorbell(live_server).gate.clear()
            await call(client, "release", {"id": first["id"]})
            await wait_until(lambda: uri(first["id"]) in rings)
            assert uri(other["id"]) not in rings


@pytest.fixture
def heartbeat_settings(server_settings):
    return server_settings.with_(doorbell_heartbeat_seconds=0.2, doorbell_gate_seconds=0.1)


async def test_the_doorbell_heartbeat_rings_pending_todos_nobody_claimed(heartbeat_settings):
    from tests.conftest import run_server

    async with run_server(heartbeat_settings) as server:
        store = server.store
        ep = await vend(store)
        agent = await store.endpoint_authenticate(ep.token)
        waiting = await store.todo_add(agent, queue="q", title="added before anyone listened")
        held = await store.todo_add(agent, queue="q", title="claimed")
        await store.todo_claim(agent, held["id"])
        async with legacy_session(server, ep.token, ep.endpoint_id) as (_, inbox):
            await inbox.wait_for(uri(waiting["id"]))
            await wait_until(lambda: inbox.uris.count(uri(waiting["id"])) >= 2)  # again, next heartbeat
            assert uri(held["id"]) not in inbox.uris


async def test_a_revoked_endpoint_stops_hearing_the_doorbell(server_settings):
    from mcp.client.subscriptions import SubscriptionLost

    from tests.conftest import run_server

    async with run_server(server_settings.with_(mcp_auth_recheck_seconds=0.1)) as server:
        store = server.store
        ep = await vend(store)
        async with legacy_session(server, ep.token, ep.endpoint_id):
            async with connect(server, ep.token, "modern") as client:
                async with client.listen(resource_subscriptions=[TODOS]) as sub:
                    assert doorbell(server).live_doorways(ep.endpoint_id) == 2
                    await store.endpoint_revoke(ep.endpoint_id)
                    with pytest.raises(SubscriptionLost):
                        async for _ in sub:
                            pass
                await wait_until(lambda: doorbell(server).live_doorways(ep.endpoint_id) == 0)


@pytest.mark.parametrize("generation", ["legacy", "modern"])
async def test_a_rung_uri_reads_as_the_todo_and_a_foreign_one_as_not_found(live_server, generation):
    from mcp.shared.exceptions import MCPError

    store = live_server.store
    mine = await vend(store)
    theirs = await vend(store)
    async with connect(live_server, theirs.token) as other:
        foreign = await call(other, "add_todo", {"queue": "q", "title": "theirs"})
    async with connect(live_server, mine.token, generation) as client:
        listed = [str(r.uri) for r in (await client.list_resources()).resources]
        assert listed == [TODOS, "ui://switchboard/todo"]  # the doorbell's collection and the MCP App
        todo = await call(client, "add_todo", {"queue": "q", "title": "mine"})
        read = await client.read_resource(uri(todo["id"]))
        body = json.loads(read.contents[0].text)
        assert body["id"] == todo["id"] and body["attempts"] == []
        errors = []
        for todo_id in (foreign["id"], "never-minted"):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri(todo_id))
            errors.append(caught.value.error.model_dump_json())
        assert errors[0] == errors[1] and foreign["id"] not in errors[0]


async def test_a_todo_added_through_another_process_rings_a_listener_here_and_nobody_listening_notifies_nobody(
        server_settings, db_url):
    """Presence across processes: the second server has no listener of its own, and its add
    still notifies, because the first recorded one for the endpoint's human. Once that
    listener is gone (a heartbeat later), the same add notifies nobody."""
    import psycopg

    from board.store.vocabulary import NOTIFY_CHANNEL
    from tests.conftest import run_server, sql_rows
    async with run_server(server_settings) as here, run_server(server_settings) as there:
        ep = await credential(here, "vended")
        agent = await there.store.endpoint_authenticate(ep.token)
        async with listening(here, ep.token) as (_, rings, __):
            todo = await there.store.todo_add(agent, queue="q", title="from elsewhere")
            await wait_until(lambda: uri(todo["id"]) in rings, timeout=10)
        here.runtime.fanout.presence.beat_now()  # drops the released human now, not in 10 s
        for _ in range(500):
            if not await sql_rows(db_url, "SELECT 1 FROM watchers WHERE user_id = %s", (agent.user_id,)):
                break
            await asyncio.sleep(0.02)
        async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as listener:
            await listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
            await there.store.todo_add(agent, queue="q", title="nobody listens")
            await listener.execute("SELECT 1")  # a round trip: a notification sent by then has arrived
            assert [n async for n in listener.notifies(timeout=0.5)] == []


DUE_RING_BOUND = 1.0  # a listening agent hears a scheduled todo within a second of its run_at


async def _rung_at(rings: list[str], todo_id: str, timeout: float) -> datetime:
    await wait_until(lambda: uri(todo_id) in rings, timeout=timeout, interval=0.005)
    return datetime.now(timezone.utc)


@pytest.mark.parametrize("generation", ["legacy", "modern"])
async def test_a_scheduled_todo_rings_a_listening_agent_within_a_second_of_falling_due(live_server, generation):
    store = live_server.store
    ep = await vend(store)
    agent = await store.endpoint_authenticate(ep.token)
    async with contextlib.AsyncExitStack() as stack:
        if generation == "legacy":
            _, inbox = await stack.enter_async_context(legacy_session(live_server, ep.token, ep.endpoint_id))
            rings = inbox.uris
        else:
            _, rings, _ = await stack.enter_async_context(listening(live_server, ep.token))
        await wait_until(lambda: doorbell(live_server).live_doorways(ep.endpoint_id) >= 1)
        todo = await store.todo_add(agent, queue="q", title="at its time", delay_seconds=1.5)
        rung = await _rung_at(rings, todo["id"], timeout=1.5 + DUE_RING_BOUND + LOAD_SLACK_SECONDS)
        late = (rung - todo["run_at"]).total_seconds()
        print(f"rung {late:.3f} s after its run_at ({generation})")
        assert late >= 0, "a scheduled todo rang before its run_at"
        assert late <= DUE_RING_BOUND + LOAD_SLACK_SECONDS
        assert rings.count(uri(todo["id"])) == 1


async def test_a_snoozed_todo_rings_again_when_it_falls_due_inside_the_gate(live_server):
    store = live_server.store
    ep = await vend(store)
    async with listening(live_server, ep.token) as (client, rings, _):
        todo = await call(client, "add_todo", {"queue": "q", "title": "not yet"})
        await wait_until(lambda: uri(todo["id"]) in rings)
        agent = await store.endpoint_authenticate(ep.token)
        await store.todo_claim(agent, todo["id"])
        snoozed = await store.todo_release(agent, todo["id"], delay_seconds=1)
        await wait_until(lambda: rings.count(uri(todo["id"])) == 2,
                         timeout=1 + DUE_RING_BOUND + LOAD_SLACK_SECONDS, interval=0.005)
        late = (datetime.now(timezone.utc) - snoozed["run_at"]).total_seconds()
        print(f"the snoozed todo rang again {late:.3f} s after its run_at, inside the gate's 30 s")
        assert late >= 0, "the snooze itself rang"
        assert late <= DUE_RING_BOUND + LOAD_SLACK_SECONDS


UNBLOCKED_RING_BOUND = 1.0  # a listening agent hears a waiting todo within a second of its last dependency's complete


@pytest.mark.parametrize("generation", ["legacy", "modern"])
async def test_a_waiting_todo_rings_a_listening_agent_when_its_last_dependency_completes(live_server, generation):
    """A todo added with after does not ring on its add, nor when one of its two dependencies
    completes; when another session completes the last one, the listening agent is rung for
    it within a second."""
    store = live_server.store
    ep = await vend(store)
    async with rung(live_server, ep, generation) as (client, rings), connect(live_server, ep.token) as other:
        async def quiet_until_marked(todo_id: str) -> None:
            marker = await call(client, "add_todo", {"queue": "q", "title": "marker"})
            await wait_until(lambda: uri(marker["id"]) in rings)  # rings are in order
            assert uri(todo_id) not in rings

        first = await call(other, "add_todo", {"queue": "q", "title": "first"})
        last = await call(other, "add_todo", {"queue": "q", "title": "last"})
        waiting = await call(client, "add_todo", {"queue": "q", "title": "after both",
                                                  "after": [first["id"], last["id"]]})
        await quiet_until_marked(waiting["id"])
        for dependency in (first, last):
            await call(other, "claim", {"id": dependency["id"]})
        await call(other, "complete", {"id": first["id"]})
        await quiet_until_marked(waiting["id"])

        done = await call(other, "complete", {"id": last["id"]})
        await wait_until(lambda: uri(waiting["id"]) in rings,
                         timeout=UNBLOCKED_RING_BOUND + LOAD_SLACK_SECONDS, interval=0.005)
        late = (datetime.now(timezone.utc) - datetime.fromisoformat(done["updated_at"])).total_seconds()
        print(f"rung {late:.3f} s after the last dependency completed ({generation})")
        assert late <= UNBLOCKED_RING_BOUND + LOAD_SLACK_SECONDS
        assert rings.count(uri(waiting["id"])) == 1
        assert (await call(other, "claim", {"id": waiting["id"]}))["todo"]["id"] == waiting["id"]
