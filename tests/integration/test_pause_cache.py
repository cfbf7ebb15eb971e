"""A server process's cache of paused queues: claim_next asks only for the open queues
without a look at queue_pauses while the cache vouches for them, a pause made in another
process holds here as soon as its notification arrives, and a missed notification cannot
outlive a LISTEN reconnect (while the connection is down, claims check the table)."""

from __future__ import annotations

import asyncio

from board.store.db import open_pool
from board.live.fanout import Fanout
from board.live.pause_cache import PauseCache
from board.store.store import Store
from tests.conftest import make_agent, make_user, sql_rows, until

# Pauses behind the store's back: no notification, so only a look at the table could tell.
SILENT_PAUSE = "INSERT INTO queue_pauses (user_id, queue) VALUES (%s, %s) RETURNING queue"


async def _server_store(store, db_url):
    """The store as a server process has it: with its pause cache on a LISTEN fan-out."""
    fanout = Fanout(db_url)
    store.use_pause_cache(PauseCache(store, fanout))
    await fanout.start()
    return fanout


async def _queues_with_a_todo_each(store):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, queues=("builds", "docs"))
    build = await store.todo_add(agent, queue="builds", title="build it")
    await store.todo_add(agent, queue="docs", title="write it")
    return ada, agent, build


async def test_while_the_cache_vouches_claim_next_does_not_look_at_queue_pauses(store, db_url):
    fanout = await _server_store(store, db_url)
    try:
        ada, agent, build = await _queues_with_a_todo_each(store)
        assert await store.pauses.paused_queues(ada.user_id) == frozenset()
        await sql_rows(db_url, SILENT_PAUSE, (ada.user_id, "builds"))
        # The table says paused, the cache was never told: the claim went by the cache.
        assert (await store.todo_claim_next(agent, queue="builds"))["todo"]["id"] == build["id"]
    finally:
        await fanout.stop()


async def test_a_pause_made_by_another_process_holds_here_once_its_notification_arrives(store, db_url, settings):
    fanout = await _server_store(store, db_url)
    other_pool = await open_pool(db_url)
    try:
        other = Store(other_pool, settings)  # another process on the same database
        ada, agent, build = await _queues_with_a_todo_each(store)
        assert await store.pauses.paused_queues(ada.user_id) == frozenset()
        async with fanout.subscription() as sub:
            await other.queue_pause(ada, "builds")
            while (await asyncio.wait_for(sub.get(), timeout=10)).get("kind") != "queue_paused":
                pass  # the caches are told before any subscriber
        assert await store.todo_claim_next(agent, queue="builds") == {"todo": None}
        assert (await store.todo_claim_next(agent))["todo"]["queue"] == "docs"
        await other.queue_resume(ada, "builds")
        await until(lambda: ada.user_id not in store.pauses._paused, "the resume's notification")
        assert (await store.todo_claim_next(agent))["todo"]["id"] == build["id"]
    finally:
        await other_pool.close()
        await fanout.stop()


async def test_a_pause_made_here_holds_for_the_next_claim_at_once(store, db_url):
    fanout = await _server_store(store, db_url)
    try:
        ada, agent, _ = await _queues_with_a_todo_each(store)
        assert await store.pauses.paused_queues(ada.user_id) == frozenset()
        await store.queue_pause(ada, "builds")  # no waiting for its notification
        assert await store.todo_claim_next(agent, queue="builds") == {"todo": None}
    finally:
        await fanout.stop()


async def test_while_the_listen_connection_is_down_claim_next_checks_queue_pauses(store, db_url):
    fanout = await _server_store(store, db_url)
    ada, agent, _ = await _queues_with_a_todo_each(store)
    assert await store.pauses.paused_queues(ada.user_id) == frozenset()
    await fanout.stop()  # nothing would announce a pause now
    await sql_rows(db_url, SILENT_PAUSE, (ada.user_id, "builds"))
    assert await store.todo_claim_next(agent, queue="builds") == {"todo": None}


async def test_a_lost_listen_connection_empties_the_cache_on_reconnect(store, db_url):
    fanout = await _server_store(store, db_url)
    try:
        ada, agent, _ = await _queues_with_a_todo_each(store)
        assert await store.pauses.paused_queues(ada.user_id) == frozenset()
        await sql_rows(db_url, SILENT_PAUSE, (ada.user_id, "builds"))
        killed = await sql_rows(db_url, "SELECT pg_terminate_backend(pid) AS k FROM pg_stat_activity "
                                        "WHERE query LIKE 'LISTEN%%' AND datname = current_database()")
        assert killed == [{"k": True}]
        await until(lambda: fanout.reconnects == 1, "the LISTEN reconnect")
        assert await store.todo_claim_next(agent, queue="builds") == {"todo": None}
    finally:
        await fanout.stop()


async def test_a_lookup_overtaken_by_a_pause_is_not_cached(store, db_url):
    fanout = await _server_store(store, db_url)
    try:
        ada, agent, _ = await _queues_with_a_todo_each(store)
        real = store.queues_paused_by

        async def paused_mid_lookup(user_id):
            queues = await real(user_id)  # read before the pause committed
            await store.queue_pause(ada, "builds")
            return queues

        store.queues_paused_by = paused_mid_lookup
        assert await store.pauses.paused_queues(ada.user_id) == frozenset()  # answered as read
        store.queues_paused_by = real
        assert ada.user_id not in store.pauses._paused
        assert await store.todo_claim_next(agent, queue="builds") == {"todo": None}
    finally:
        await fanout.stop()
