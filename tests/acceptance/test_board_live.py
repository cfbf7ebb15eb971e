"""Live updates over SSE (/events): the snapshot on connect, fragments rendered from the
store for the human's own todos only, the drawer's attempts for a watched todo, and a full
refresh when the fan-out asks for a resync."""

from __future__ import annotations

import asyncio
import contextlib
import json

from board.live.fanout import RESYNC
from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in
from tests.conftest import make_agent

TIMEOUT = 10


class EventStream:
    """A minimal SSE reader over an httpx streaming response."""

    def __init__(self, response):
        self.response = response
        self._lines = response.aiter_lines()

    async def next(self, timeout: float = TIMEOUT) -> tuple[str, dict]:
        async def read():
            event, data = "message", []
            async for line in self._lines:
                if line == "":
                    if data:
                        return event, json.loads("\n".join(data))
                    event = "message"
                    continue
                if line.startswith(":"):
                    continue
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "event":
                    event = value
                elif field == "data":
                    data.append(value)
            raise EOFError("stream ended")

        return await asyncio.wait_for(read(), timeout)

    async def next_todo(self, todo_id: str, timeout: float = TIMEOUT) -> dict:
        """Skips to the next `todo` event about todo_id."""
        async def find():
            while True:
                event, data = await self.next(timeout)
                if event == "todo" and data["id"] == todo_id:
                    return data
        return await asyncio.wait_for(find(), timeout)


@contextlib.asynccontextmanager
async def open_stream(client, query: str = ""):
    async with client.stream("GET", "/events" + query) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        # Never cached, never buffered by a proxy in front (nginx honours the second).
        assert response.headers["cache-control"] == "no-store" and response.headers["x-accel-buffering"] == "no"
        stream = EventStream(response)
        event, snapshot = await stream.next()
        assert event == "snapshot"
        stream.snapshot = snapshot
        yield stream


async def test_a_subscriber_only_ever_receives_its_own_humans_todos(live_server):
    store = live_server.store
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    ada_agent = await make_agent(store, user=ada, agent_id="ada-worker")
    bob_agent = await make_agent(store, user=bob, agent_id="bob-worker")
    secret = await store.todo_add(ada_agent, queue="q", title="ada's secret title")
    mine = await store.todo_add(bob_agent, queue="q", title="bob's todo")
    async with client_for(live_server) as a, client_for(live_server) as b:
        await sign_in(a, "ada")
        await sign_in(b, "bob")
        # Bob even asks to watch Ada's todo: he gets nothing of it.
        async with open_stream(a) as ada_stream, open_stream(b, f"?todo={secret['id']}") as bob_stream:
            assert "ada&#39;s secret title" in ada_stream.snapshot["rows"]
            # Only his own request is echoed (watched); nothing else names or shows the todo.
            assert secret["id"] not in json.dumps(dict(bob_stream.snapshot, watched=None))
            assert bob_stream.snapshot["drawer"] is None and bob_stream.snapshot["gone"] is True
            assert "bob&#39;s todo" in bob_stream.snapshot["rows"]

            await store.todo_claim(ada_agent, secret["id"], claimant="ada-claimant")
            await store.todo_fail(ada_agent, secret["id"], summary="ada's private summary")
            await store.todo_claim(bob_agent, mine["id"])  # the sentinel: Bob's next event

            seen = await ada_stream.next_todo(secret["id"])
            assert seen["matches"] and "ada&#39;s secret title" in seen["row"]

            event, data = await bob_stream.next()
            # Nothing about Ada's todo arrived on Bob's stream before his own event.
            assert event == "todo" and data["id"] == mine["id"]
            assert "claimed" in data["row"]
            # (not a bare "ada": a random id can hold those letters)
            leaked = json.dumps(data)
            assert secret["id"] not in leaked and "secret" not in leaked and "ada-" not in leaked
            assert "private summary" not in leaked


async def test_the_watched_drawer_receives_the_new_attempt(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="watch me")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        async with open_stream(c, f"?todo={todo['id']}") as stream:
            assert 'id="attempts-list"' in stream.snapshot["drawer"]
            assert 'id="attempt-1"' not in stream.snapshot["drawer"]
            await store.todo_claim(agent, todo["id"], claimant="harness/box/run-7", require_fence=True)
            data = await stream.next_todo(todo["id"])
            assert 'id="attempt-1"' in data["drawer"] and "harness/box/run-7" in data["drawer"]
            assert 'aria-live="polite"' in data["drawer"]
            assert "lease_token" not in data["drawer"] and "session" not in data["drawer"].lower()


async def test_rows_say_whether_they_still_match_the_filters(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="filtered")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        async with open_stream(c, "?state=pending") as stream:
            assert "filtered" in stream.snapshot["rows"]
            await store.todo_claim(agent, todo["id"])
            data = await stream.next_todo(todo["id"])
            assert data["matches"] is False


async def test_a_resync_from_the_fanout_ends_in_a_full_snapshot(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        async with open_stream(c) as stream:
            assert stream.snapshot["rows"] == ""
            # A change that the stream never heard about (as if LISTEN was down), then a resync.
            await store.todo_add(agent, queue="q", title="added while away")
            await stream.next()  # the live event for it
            live_server.runtime.fanout.publish(RESYNC)
            event, data = await stream.next()
            assert event == "snapshot" and "added while away" in data["rows"]


async def test_a_deleted_todo_is_announced_as_gone(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="short-lived")
    await store.todo_cancel(agent, todo["id"])
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        async with open_stream(c) as stream:
            from datetime import datetime, timedelta, timezone
            await store.sweep_retention(now=datetime.now(timezone.utc) + timedelta(days=400))
            data = await stream.next_todo(todo["id"])
            assert data["gone"] is True and "row" not in data


async def test_an_open_drawer_is_re_read_so_liveness_moves_on_without_a_notification(live_server, monkeypatch):
    import board.web.events
    monkeypatch.setattr(board.web.events, "WATCH_REFRESH_SECONDS", 0.2)
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="quietly held")
    await store.todo_claim(agent, todo["id"], lease_seconds=3600)
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        async with open_stream(c, f"?todo={todo['id']}") as stream:
            assert "liveness-live" in stream.snapshot["drawer"]
            data = await stream.next_todo(todo["id"], timeout=3)  # nothing was committed meanwhile
            assert "liveness-live" in data["drawer"] and data["matches"] is True


async def test_two_sessions_watching_one_drawer_each_get_its_forms_with_their_own_csrf_token(live_server):
    """The snapshot and the drawer a change renders are shared by every session of the human
    watching it; each stream's copy carries its own session's form token, so its buttons
    post and the other session's token never reaches it."""
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada)
    todo = await store.todo_add(agent, queue="q", title="watched twice")
    async with client_for(live_server) as a, client_for(live_server) as b:
        token_a, token_b = await sign_in(a, "ada"), await sign_in(b, "ada")
        assert token_a != token_b
        async with open_stream(a, f"?todo={todo['id']}") as sa, open_stream(b, f"?todo={todo['id']}") as sb:
            for snap, mine, theirs in ((sa.snapshot, token_a, token_b), (sb.snapshot, token_b, token_a)):
                for part in (snap["drawer"], snap["overview"]):
                    assert f'name="csrf_token" value="{mine}"' in part and theirs not in part
            await store.todo_claim(agent, todo["id"])
            got_a, got_b = await sa.next_todo(todo["id"]), await sb.next_todo(todo["id"])
        for got, mine, theirs in ((got_a, token_a, token_b), (got_b, token_b, token_a)):
            assert f'name="csrf_token" value="{mine}"' in got["drawer"]
            assert theirs not in got["drawer"] and "csrf_token\" value=\"\"" not in got["drawer"]
        # The token posts: the drawer's form works from the live copy.
        r = await a.post(f"/todos/{todo['id']}/cancel", data={"csrf_token": csrf_of(got_a["drawer"])})
        assert r.status_code == 303, r.text
        assert (await store.todo_get(ada, todo["id"]))["state"] == "canceled"


async def test_a_stream_the_browser_closes_lets_go_of_its_subscription_its_rows_and_its_presence(live_server):
    """A closed tab must not keep costing the server: once the browser goes away, its
    stream is unsubscribed, no longer handed rows, and its human no longer held as
    listening (so their transitions stop notifying once nobody else watches)."""
    store = live_server.store
    ada = await make_human(store, "ada")
    fanout = live_server.runtime.fanout
    rows = live_server.app.state.board_rows

    def counts():
        return fanout.subscriber_count, len(rows._streams.get(ada.user_id, ())), ada.user_id in fanout.presence.held()

    async with client_for(live_server) as a:
        await sign_in(a, "ada")
        async with open_stream(a), open_stream(a, "?state=pending"):
            assert counts() == (2, 2, True)
        for _ in range(200):  # the server hears the connections close
            if counts() == (0, 0, False):
                break
            await asyncio.sleep(0.05)
        assert counts() == (0, 0, False)
