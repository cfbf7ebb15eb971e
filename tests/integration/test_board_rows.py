"""The Board's rows pushed by one consumer of todos' notifications per process
(board/web/events.py BoardRows), against a real fan-out, presence and Postgres: a change
reaches its own human's streams with its frame ready, rendered for each stream's filters
and drawer, and no other human's; a stream ends up showing a todo's latest state; a
consumer that falls behind has its streams refresh fully; a database away ends them."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from types import SimpleNamespace

from litestar.datastructures import State

from board.live.fanout import RESYNC, Fanout
from board.live.presence import Presence
from board.store import store as st
from board.store.db import open_pool
from board.web.context import Filters
from board.web.events import ROW, ROW_UNAVAILABLE, BoardRows, RowStream
from tests.conftest import make_agent, make_user


@contextlib.asynccontextmanager
async def board_rows(store, db_url, settings, rows_store=None):
    fanout = Fanout(db_url)
    presence = Presence(store, fanout)
    fanout.presence = presence
    await fanout.start()
    presence.start()
    rows = BoardRows(SimpleNamespace(state=State({"settings": settings})), rows_store or store, fanout)
    rows.start()
    try:
        yield fanout, presence, rows
    finally:
        await rows.stop()
        await presence.stop()
        await fanout.stop()


def stream_of(rows: BoardRows, fanout: Fanout, human, query: dict | None = None, watching=None) -> RowStream:
    """What /events registers: a subscription that hears no todo notification itself."""
    me = RowStream(human, Filters.of(query or {}), watching, fanout.subscribe(todos=False))
    rows.add(me)
    return me


async def next_event(me: RowStream):
    return await asyncio.wait_for(me.sub.get(), 10)


class CountingReads:
    """The store, counting its row reads."""

    def __init__(self, store):
        self.store, self.reads = store, 0

    def __getattr__(self, name):
        return getattr(self.store, name)

    async def todo_list_row(self, *args, **kwargs):
        self.reads += 1
        return await self.store.todo_list_row(*args, **kwargs)


def nothing_waiting(me: RowStream) -> bool:
    return me.sub._events is None


async def test_a_change_reaches_its_own_humans_streams_ready_and_never_another_humans(store, db_url, settings):
    alice, bob = await make_user(store), await make_user(store)
    agent = await make_agent(store, user=alice)
    todo = await store.todo_add(agent, queue="q", title="Write the quarterly report")
    async with board_rows(store, db_url, settings) as (fanout, presence, rows), \
            presence.listening(alice.user_id, 10), presence.listening(bob.user_id, 10):
        listing = stream_of(rows, fanout, alice)
        drawer = stream_of(rows, fanout, alice, watching=todo["id"])
        done_only = stream_of(rows, fanout, alice, {"state": "done"})
        bobs = stream_of(rows, fanout, bob)
        await store.todo_claim(agent, todo["id"], claimant="claude")

        row = await next_event(listing)
        assert row["kind"] == ROW and row["todo"] == todo["id"] and row["watched"] is False
        assert row["encoded"].data["matches"] is True and "Write the quarterly report" in row["encoded"].data["row"]
        assert "drawer" not in row["encoded"].data

        opened = await next_event(drawer)
        assert opened["watched"] is True and "claude" in opened["encoded"].data["drawer"]

        assert (await next_event(done_only))["encoded"].data["matches"] is False  # rendered for its filters
        # Alice's streams were handed their frames together; Bob's was handed none.
        assert nothing_waiting(bobs)
        for me in (listing, drawer, done_only):
            assert nothing_waiting(me)


async def test_a_stream_ends_showing_the_todos_latest_state_when_an_earlier_read_returns_last(store, db_url,
                                                                                             settings):
    """Each change's read starts at once, but one endpoint's frames are handed over in the
    order of its notifications: when the first change's read comes back after the second's,
    the stream still ends with the second's."""

    class FirstReadSlow(CountingReads):
        """The store, except that the first row read comes back late, with what it read."""

        async def todo_list_row(self, *args, **kwargs):
            row = await super().todo_list_row(*args, **kwargs)
            if self.reads == 1:
                await asyncio.sleep(0.3)
            return row

    human = await make_user(store)
    agent = await make_agent(store, user=human)
    todo = await store.todo_add(agent, queue="q", title="Ship the release")
    slow = FirstReadSlow(store)
    async with board_rows(store, db_url, settings, rows_store=slow) as (fanout, presence, rows), \
            presence.listening(human.user_id, 10):
        me = stream_of(rows, fanout, human)
        await store.todo_claim(agent, todo["id"])
        while slow.reads < 1:  # the claim's read has begun (and read the claimed row)
            await asyncio.sleep(0.01)
        await store.todo_complete(agent, todo["id"], summary="shipped")
        frames = [await next_event(me), await next_event(me)]
        assert slow.reads == 2
        assert 'class="state state-claimed"' in frames[0]["encoded"].data["row"]
        assert 'class="state state-done"' in frames[1]["encoded"].data["row"]


async def test_a_consumer_that_falls_behind_has_its_streams_refresh_fully(store, db_url, settings):
    human = await make_user(store)
    async with board_rows(store, db_url, settings) as (fanout, presence, rows):
        me = stream_of(rows, fanout, human)
        for n in range(1001):  # more than its subscription holds, before it can take one
            fanout.publish({"kind": "claimed", "todo": f"t{n}", "endpoint": "e"})
        assert await next_event(me) is RESYNC


async def test_a_change_read_while_the_database_is_away_ends_the_streams(store, db_url, settings):
    """The streams end as unavailable (each tells its browser, which comes back): the
    owner's lookup, on a store whose pool is gone, cannot say whose the change is."""
    human = await make_user(store)
    agent = await make_agent(store, user=human)
    pool = await open_pool(db_url, min_size=1, max_size=1)
    away = st.Store(pool, settings)
    await pool.close()
    async with board_rows(store, db_url, settings, rows_store=away) as (fanout, presence, rows), \
            presence.listening(human.user_id, 10):
        me = stream_of(rows, fanout, human)
        await store.todo_add(agent, queue="q", title="Heard while away")
        assert await next_event(me) is ROW_UNAVAILABLE


async def test_a_delivery_that_fails_unexpectedly_is_logged_once_and_the_next_change_still_arrives(
        store, db_url, settings, caplog):
    class OwnerLookupBreaksOnce:
        """The store, except that the first owner lookup fails as no database error does."""

        def __init__(self):
            self.lookups = 0

        def __getattr__(self, name):
            return getattr(store, name)

        async def endpoint_owner(self, endpoint_id):
            self.lookups += 1
            if self.lookups == 1:
                raise RuntimeError("a fault of ours")
            return await store.endpoint_owner(endpoint_id)

    human = await make_user(store)
    agent = await make_agent(store, user=human)
    loop = asyncio.get_running_loop()
    unretrieved = []
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))
    try:
        with caplog.at_level(logging.ERROR):
            async with board_rows(store, db_url, settings, rows_store=OwnerLookupBreaksOnce()) as (
                    fanout, presence, rows), presence.listening(human.user_id, 10):
                me = stream_of(rows, fanout, human)
                await store.todo_add(agent, queue="q", title="Lost to the fault")
                # The next change after the fault: a change heard while the failing lookup is
                # still running shares its outcome (one lookup per endpoint at a time).
                for _ in range(1000):
                    if any(r.levelno >= logging.ERROR for r in caplog.records):
                        break
                    await asyncio.sleep(0.01)
                second = await store.todo_add(agent, queue="q", title="Heard after it")
                frame = await next_event(me)
                assert frame["todo"] == second["id"]
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(before)
    assert unretrieved == []
    failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert failures == ["an endpoint's owner read failed: RuntimeError"]


async def test_a_team_change_is_read_once_for_every_members_stream_and_rendered_for_each(store, db_url, settings):
    """A team's streams are keyed by its space: a change of its todos reaches each member's
    stream, from one read of the row per view, not one per member; each member is handed a
    frame rendered for them (the person and their role)."""

    ada, bob, zed = await make_user(store, "ada"), await make_user(store, "bob"), await make_user(store, "zed")
    team = await store.team_create("ops", owner="ada")
    await store.team_member_set(await store.team_space("ops"), "bob", "viewer")
    ada_in, bob_in = await store.human_in(ada, team["id"]), await store.human_in(bob, team["id"])
    agent = await make_agent(store, user=await store.team_space("ops"), agent_id="deployer")
    counting = CountingReads(store)
    async with board_rows(store, db_url, settings, rows_store=counting) as (fanout, presence, rows), \
            presence.listening(team["id"], 10), presence.listening(zed.user_id, 10):
        ada_stream, bob_stream = stream_of(rows, fanout, ada_in), stream_of(rows, fanout, bob_in)
        zeds = stream_of(rows, fanout, zed)
        todo = await store.todo_add(agent, queue="q", title="Deploy the API")
        ada_frame, bob_frame = await next_event(ada_stream), await next_event(bob_stream)
        for frame in (ada_frame, bob_frame):
            assert frame["todo"] == todo["id"] and "Deploy the API" in frame["encoded"].data["row"]
        assert counting.reads == 1
        assert ada_frame["encoded"] is not bob_frame["encoded"]  # rendered for each viewer
        assert nothing_waiting(zeds)
