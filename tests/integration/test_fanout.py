"""The LISTEN fan-out: committed changes reach every subscriber, and a dropped database
connection ends in a resync (a full refresh) and then live events again."""

from __future__ import annotations

import asyncio

from board.live.fanout import RESYNC, Fanout
from board.live.presence import Presence
from tests.conftest import sql_rows


async def next_event(sub, timeout=10):
    return await asyncio.wait_for(sub.get(), timeout)


async def test_a_dropped_listen_connection_resyncs_and_resumes(store, agent, db_url):
    fanout = Fanout(db_url)
    presence = Presence(store, fanout)
    await fanout.start()
    presence.start()
    try:
        async with fanout.subscription() as a, fanout.subscription() as b, presence.listening(agent.user_id, 10):
            todo = await store.todo_add(agent, queue="q", title="t")
            for sub in (a, b):
                event = await next_event(sub)
                assert (event["todo"], event["kind"]) == (todo["id"], "added")
            killed = await sql_rows(db_url, "SELECT pg_terminate_backend(pid) AS k FROM pg_stat_activity "
                                            "WHERE query LIKE 'LISTEN%%' AND datname = current_database()")
            assert killed == [{"k": True}]
            assert await next_event(a) is RESYNC and await next_event(b) is RESYNC
            assert fanout.reconnects == 1
            await store.todo_claim(agent, todo["id"])
            event = await next_event(a)
            assert (event["todo"], event["kind"], event["state"]) == (todo["id"], "claimed", "claimed")
    finally:
        await presence.stop()
        await fanout.stop()
    assert fanout.subscriber_count == 0
