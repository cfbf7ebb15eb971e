"""Presence (migration 0011, board/live/presence.py): a transition notifies only when some
process has a live listener for its human, and a listener that opens while transitions are
committing still hears every change after its snapshot."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time

import psycopg

from board.live.fanout import RESYNC, Fanout
from board.live.presence import Presence
from board.store.vocabulary import NOTIFY_CHANNEL
from tests.conftest import ROOT, make_agent, make_user, sql_rows, watch


async def rows_until(db_url: str, sql: str, check, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check(await sql_rows(db_url, sql)):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        await asyncio.sleep(0.02)


async def heard_within(listener, seconds: float) -> list[dict]:
    out = []
    try:
        async with asyncio.timeout(seconds):
            async for n in listener.notifies():
                out.append(json.loads(n.payload))
    except TimeoutError:
        pass
    return out


async def test_only_the_transitions_of_a_watched_human_notify_and_pauses_always_do(store, db_url):
    ada, bob = await make_user(store, "ada"), await make_user(store, "bob")
    adas, bobs = await make_agent(store, user=ada, agent_id="a"), await make_agent(store, user=bob, agent_id="b")
    await watch(store, bob.user_id)
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as listener:
        await listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        for agent in (adas, bobs):
            todo = await store.todo_add(agent, queue="q", title="t")
            await store.todo_claim(agent, todo["id"])
            await store.todo_complete(agent, todo["id"])
        await store.queue_pause(ada, "q")
        heard = await heard_within(listener, 1.0)
    assert [(e["endpoint"], e["kind"]) for e in heard if "todo" in e] == [
        (bobs.endpoint_id, "added"), (bobs.endpoint_id, "claimed"), (bobs.endpoint_id, "completed")]
    assert [e["kind"] for e in heard if "todo" not in e] == ["queue_paused"]


async def test_a_human_stops_notifying_a_heartbeat_after_their_last_listener_closes(store, agent, db_url):
    fanout = Fanout(db_url)
    presence = Presence(store, fanout, heartbeat_seconds=0.05)
    presence.start()
    rows = "SELECT user_id FROM watchers"
    try:
        async with presence.listening(agent.user_id, 10), presence.listening(agent.user_id, 10):
            assert await sql_rows(db_url, rows) == [{"user_id": agent.user_id}]
        await rows_until(db_url, rows, lambda got: got == [], "the row's drop")
        async with presence.listening(agent.user_id, 10):  # held again: recorded again
            assert await sql_rows(db_url, rows) == [{"user_id": agent.user_id}]
    finally:
        await presence.stop()
    assert await sql_rows(db_url, rows) == []  # a stopping process drops its rows


async def test_a_row_lost_while_cut_off_is_recorded_again_and_every_subscriber_resyncs(store, agent, db_url):
    fanout = Fanout(db_url)
    presence = Presence(store, fanout, heartbeat_seconds=0.05)
    presence.start()
    try:
        async with fanout.subscription() as sub, presence.listening(agent.user_id, 10):
            # Another process's sweep dropped the row (this one had not renewed it in time).
            await sql_rows(db_url, "DELETE FROM watchers RETURNING user_id")
            assert await asyncio.wait_for(sub.get(), 10) is RESYNC
            assert await sql_rows(db_url, "SELECT user_id FROM watchers") == [{"user_id": agent.user_id}]
    finally:
        await presence.stop()


async def test_the_rows_of_a_process_that_stopped_renewing_them_are_dropped(store, agent, db_url):
    await sql_rows(db_url, "INSERT INTO watchers VALUES (%s, gen_random_uuid(), now() - interval '1 second') "
                           "RETURNING user_id", (agent.user_id,))
    presence = Presence(store, Fanout(db_url), heartbeat_seconds=0.05)
    presence.start()
    try:
        await rows_until(db_url, "SELECT user_id FROM watchers", lambda got: got == [], "the lapsed row's drop")
    finally:
        await presence.stop()


async def test_a_listener_waits_out_a_transaction_that_checked_for_it_before_its_row(store, agent, db_url):
    """The wait that makes a snapshot safe: a transition planned before the row committed (so
    it did not notify) but not yet committed holds the listener's snapshot back until it commits."""
    todo = await store.todo_add(agent, queue="q", title="t")
    presence = Presence(store, Fanout(db_url))
    presence.start()
    try:
        async with await psycopg.AsyncConnection.connect(db_url) as writer:
            claimed = await writer.execute("UPDATE todos SET updated_at = now() WHERE id = %s AND EXISTS "
                                           "(SELECT FROM watchers) RETURNING id", (todo["id"],))
            assert await claimed.fetchall() == []  # checked: nobody listens yet; not committed
            presence.hold(agent.user_id)
            ready = asyncio.create_task(presence.ready(agent.user_id, 10))
            await rows_until(db_url, "SELECT user_id FROM watchers", lambda got: len(got) == 1, "the row")
            await asyncio.sleep(0.3)
            assert not ready.done()  # the row is committed, the checker is still running
            await writer.commit()
            await asyncio.wait_for(ready, 5)
    finally:
        await presence.stop()


WRITER = textwrap.dedent("""
    import asyncio, sys, time
    sys.path.insert(0, sys.argv[1])
    from board.config import Settings
    from board.store.db import open_pool
    from board.store.store import Store

    async def main(url, token, seconds):
        pool = await open_pool(url, min_size=1, max_size=2)
        store = Store(pool, Settings())
        agent = await store.endpoint_authenticate(token)
        end, n = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            todo = await store.todo_add(agent, queue="q", title="race")
            if n % 3:
                await store.todo_claim(agent, todo["id"])
            if n % 3 == 2:
                await store.todo_complete(agent, todo["id"])
            n += 1
        await pool.close()
        print(n)

    asyncio.run(main(sys.argv[2], sys.argv[3], float(sys.argv[4])))
""")

VERSIONS = ("SELECT t.id, t.state::text, t.attempts_total, t.updated_at FROM todos t JOIN endpoints e ON e.id = t.endpoint_id "
            "WHERE e.user_id = %s")


async def test_listeners_opening_while_writers_in_other_processes_commit_miss_no_change_after_their_snapshot(
        store, db_url):
    """Two writer processes add, claim and complete one human's todos, each commit held back
    10 ms after its statement (a deferred trigger), so there are always transitions that
    checked for listeners and have not committed. Listeners open and close meanwhile; each
    takes a snapshot of the human's todos once ready, a second one later, and must have heard
    of every todo that differs between the two."""
    human = await make_user(store, "ada")
    _, token = await store.endpoint_vend(human.user_id, name="w", agent_id="w", queues=["q"],
                                         scope=["add_todo", "claim", "complete", "get_todo"])
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS "
                           "$$ BEGIN PERFORM pg_sleep(0.01); RETURN NULL; END $$")
        await conn.execute("CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT OR UPDATE ON todos "
                           "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()")
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(ROOT), db_url, token, "6"],
                                stdout=subprocess.PIPE, text=True) for _ in range(2)]
    fanout = Fanout(db_url)
    await fanout.start()
    rounds, missed, changed = 0, [], 0
    try:
        await rows_until(db_url, "SELECT count(*) AS n FROM todos", lambda got: got[0]["n"] > 20, "the writers' todos")
        # Four seconds of rounds, and at least five however slow a loaded machine makes them.
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline or rounds < 5:
            presence = Presence(store, fanout)  # a fresh process identity: recorded anew each round
            presence.start()
            try:
                async with fanout.subscription() as sub, presence.listening(human.user_id, 10):
                    before = {r["id"]: r for r in await sql_rows(db_url, VERSIONS, (human.user_id,))}
                    await asyncio.sleep(0.1)
                    after = {r["id"]: r for r in await sql_rows(db_url, VERSIONS, (human.user_id,))}
                    # Notifications arrive in commit order: once this one is heard, every
                    # change the second snapshot saw has been heard too.
                    await sql_rows(db_url, "SELECT pg_notify(%s, %s) AS n",
                                   (NOTIFY_CHANNEL, json.dumps({"kind": "sentinel", "round": rounds})))
                    heard = set()
                    while True:
                        event = await asyncio.wait_for(sub.get(), 10)
                        if event.get("kind") == "sentinel" and event.get("round") == rounds:
                            break
                        heard.add(event.get("todo"))
            finally:
                await presence.stop()
            moved = [i for i, r in after.items() if before.get(i) != r]
            changed += len(moved)
            missed += [i for i in moved if i not in heard]
            rounds += 1
    finally:
        await fanout.stop()
        done = [int(w.communicate(timeout=60)[0]) for w in writers]
    assert all(n > 0 for n in done)
    assert rounds >= 5 and changed > rounds  # the race was run, with changes in flight
    assert missed == []
