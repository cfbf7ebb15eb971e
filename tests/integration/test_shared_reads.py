"""The live Board's shared reads (one overview read per human, one fragment per notification)
when the database goes away under them: a failure nobody is left to await is taken, never
"Task exception was never retrieved", and the streams that do await it see Unavailable."""

from __future__ import annotations

import asyncio
import gc
import logging
import time

import pytest

from board.errors import Unavailable
from board.live.fanout import Fanout
from board.live.presence import Presence
from board.store import store as st
from board.store.db import open_pool
from board.tasks import FreshReads
from board.web.events import OverviewRenders, SnapshotReads, row_read
from board.web.overview import OverviewReads
from tests.conftest import make_agent, make_user


@pytest.fixture
async def closing_store(db_url, settings):
    """A store on its own pool, which the test closes to take the database away from it."""
    pool = await open_pool(db_url, min_size=1, max_size=2)
    yield st.Store(pool, settings), pool
    await pool.close()


async def _unretrieved_during(action) -> list[dict]:
    loop = asyncio.get_running_loop()
    seen: list[dict] = []
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    try:
        await action()
        gc.collect()  # a dropped future reports its unretrieved exception when it is collected
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(before)
    return seen


async def test_an_overview_read_that_fails_after_its_streams_left_is_taken_not_left_unretrieved(closing_store, caplog):
    store, pool = closing_store
    human = await make_user(store)
    await pool.close()
    reads = OverviewReads()

    async def streams_come_and_go():
        awaited = reads.get(store, human, since=reads.stamp())
        with pytest.raises(Unavailable):
            await asyncio.shield(awaited)  # a stream that stays hears the outage
        # Streams that asked and left before the read ended, each replaced by a newer read.
        for _ in range(3):
            reads.get(store, human, since=reads.stamp())
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)

    with caplog.at_level(logging.ERROR):
        seen = await _unretrieved_during(streams_come_and_go)
    assert [c.get("message") for c in seen] == []
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []  # an outage is expected


async def test_a_shared_fragment_read_that_fails_unexpectedly_is_logged_once_and_never_unretrieved(caplog):
    async def broken():
        raise RuntimeError("the template could not render")

    async def one_stream_leaves():
        row_read(broken)
        await asyncio.sleep(0.05)

    with caplog.at_level(logging.ERROR, logger="switchboard.live"):
        seen = await _unretrieved_during(one_stream_leaves)
    assert [c.get("message") for c in seen] == []
    failures = [r for r in caplog.records if r.name == "switchboard.live" and r.levelno == logging.ERROR]
    assert [r.getMessage() for r in failures] == ["a live update's read failed: RuntimeError"]


async def test_streams_connecting_together_share_one_overview_read_but_never_one_begun_before_they_subscribed(store):
    human = await make_user(store)
    reads = OverviewReads()
    first_subscribed = reads.stamp()
    first = reads.get(store, human, since=first_subscribed)
    second = reads.get(store, human, since=first_subscribed)  # subscribed before the first read began
    assert second is first
    await first
    later_subscribed = reads.stamp()
    third = reads.get(store, human, since=later_subscribed)  # the first read began before it subscribed
    assert third is not first
    assert (await third)["queues"] == (await first)["queues"]


async def test_streams_of_a_session_connecting_together_share_one_snapshot_but_never_one_begun_before_they_subscribed():
    snapshots = SnapshotReads()
    made = []

    async def read(n: int) -> dict:
        made.append(n)
        await asyncio.sleep(0.01)
        return {"rows": f"snapshot {n}"}

    key = (1, "state=pending", None, "csrf", "hour")
    subscribed = snapshots.stamp()
    first = snapshots.get(key, subscribed, lambda: read(1))
    together = [snapshots.get(key, subscribed, lambda: read(2)) for _ in range(50)]
    assert all(f is first for f in together)
    other_view = snapshots.get((1, "state=done", None, "csrf", "hour"), subscribed, lambda: read(3))
    assert other_view is not first
    assert (await first).data["rows"] == "snapshot 1"
    # Encoded for the wire once, whichever of the streams sends it first.
    assert (await first).message("snapshot") is (await together[-1]).message("snapshot")
    assert (await first).message("snapshot").encode().startswith(b"event: snapshot\r\ndata: {")
    later = snapshots.get(key, snapshots.stamp(), lambda: read(4))  # subscribed after the first began
    assert later is not first and (await later).data["rows"] == "snapshot 4"
    await other_view
    assert made == [1, 3, 4]


async def test_a_burst_of_one_humans_requests_shares_one_read_of_the_user_in_flight(store):
    """Every tab's stream reconnecting at once (a restart) looks its human up once, not once
    a stream: reads in flight are shared, and none outlives its read (a later request reads
    anew, so a deleted user is not kept)."""
    from board.web.auth import SessionCodec
    from board.web.context import WebState

    human = await make_user(store, "burst")
    reads = []

    class Counting:
        async def user_by_id(self, user_id):
            reads.append(user_id)
            return await store.user_by_id(user_id)

    state = WebState(SessionCodec("k" * 32))
    users = await asyncio.gather(*(state.user(Counting(), human.user_id) for _ in range(200)))
    assert {u["username"] for u in users} == {"burst"} and reads == [human.user_id]
    assert state.user_reads == {}
    await state.user(Counting(), human.user_id)
    assert reads == [human.user_id, human.user_id]


async def test_the_first_change_a_thousand_streams_hear_looks_its_endpoint_owner_up_once(store, agent):
    """Every stream checks that a change is its own human's by the endpoint's owner: the
    streams that hear an endpoint's first change together share one read of it, and the
    owner is kept (an endpoint never changes owner); an unknown endpoint is not."""
    from board.web.auth import SessionCodec
    from board.web.context import WebState

    reads = []

    class Counting:
        async def endpoint_owner(self, endpoint_id):
            reads.append(endpoint_id)
            return await store.endpoint_owner(endpoint_id)

    state = WebState(SessionCodec("k" * 32))
    owners = await asyncio.gather(*(state.owner_of(Counting(), agent.endpoint_id) for _ in range(1000)))
    assert set(owners) == {agent.user_id} and reads == [agent.endpoint_id]
    assert await state.owner_of(Counting(), agent.endpoint_id) == agent.user_id and len(reads) == 1
    unknown = "00000000-0000-0000-0000-000000000000"
    assert await state.owner_of(Counting(), unknown) is None
    assert await state.owner_of(Counting(), unknown) is None and reads[1:] == [unknown, unknown]


async def test_streams_showing_one_overview_read_share_one_rendering_each_with_its_own_form_token(store):
    """A change the overview shows reaches every stream of the human: the fragment is
    rendered once per read and back link, whatever the session, each session's frame
    carrying its own form token; a newer read renders anew."""
    human = await make_user(store, "ov")
    await store.todo_add(await make_agent(store, user=human), queue="q", title="shown")
    reads, renders = OverviewReads(), OverviewRenders()
    data = await reads.get(store, human)
    first = renders.get(data, "/", True)
    assert renders.get(data, "/", True) is first and renders.get(data, "/?state=done", True) is not first
    assert renders.get(data, "/", False) is not first  # a viewer's has no pause or limit forms
    frame_a, frame_b = first.message("overview", "csrf-a").encode(), first.message("overview", "csrf-b").encode()
    assert b'name=\\"csrf_token\\" value=\\"csrf-a\\"' in frame_a and b"csrf-b" not in frame_a
    assert b'name=\\"csrf_token\\" value=\\"csrf-b\\"' in frame_b and b"csrf-a" not in frame_b
    assert first.message("overview", "csrf-a") is first.message("overview", "csrf-a")  # encoded once a session
    reads.forget(human.user_id)
    newer = await reads.get(store, human)
    assert newer is not data and renders.get(newer, "/", True) is not first


async def test_streams_subscribing_while_a_snapshot_is_read_share_the_next_one_which_begins_after_it():
    """A burst that trickles in (a thousand streams accepted over seconds) reads once per
    session and view at a time: each late stream needs a read begun after it subscribed,
    and they all share the one that begins when the read in flight ends."""
    snapshots = SnapshotReads()
    made, began = [], {}
    release = asyncio.Event()

    async def read(n: int) -> dict:
        made.append(n)
        began[n] = time.monotonic()
        if n == 1:
            await release.wait()
        return {"rows": f"snapshot {n}"}

    key = (1, "", None, "csrf", "hour")
    first = snapshots.get(key, snapshots.stamp(), lambda: read(1))
    await asyncio.sleep(0.01)  # the first read is in flight
    late = []
    for n in range(50):
        stamp = snapshots.stamp()
        late.append((stamp[0], snapshots.get(key, stamp, lambda n=n: read(2 + n))))
    assert all(f is late[0][1] for _, f in late) and late[0][1] is not first
    release.set()
    assert (await late[-1][1]).data["rows"] == "snapshot 2"
    assert made == [1, 2]
    assert began[2] >= max(subscribed for subscribed, _ in late)  # never begun before a sharer subscribed
    await first


async def test_a_stream_shares_a_snapshot_begun_before_it_subscribed_only_while_nothing_was_announced(
        store, agent, db_url):
    """A reconnect storm's streams share the first snapshot of their view even when they
    subscribe after it began, as long as nothing was announced meanwhile: what commits after
    that snapshot's statements is announced after they subscribed, so they are told of it.
    Once a change has been announced, or presence has recorded a human anew (whose changes
    were announced to nobody until then), a stream that subscribes reads afresh."""
    fanout = Fanout(db_url)
    await fanout.start()
    presence = Presence(store, fanout)
    fanout.presence = presence
    presence.start()
    snapshots = SnapshotReads(generation=lambda: fanout.generation)
    made = []

    async def read(n: int) -> dict:
        made.append(n)
        return {"rows": f"snapshot {n}"}

    key = (agent.user_id, "", None, "csrf", "hour")
    try:
        async with fanout.subscription() as first_stream, presence.listening(agent.user_id, 10):
            first = snapshots.get(key, snapshots.stamp(), lambda: read(1))
            await first
            quiet = snapshots.get(key, snapshots.stamp(), lambda: read(2))  # subscribed after it began
            assert quiet is first

            await store.todo_add(agent, queue="q", title="announced")
            heard = await asyncio.wait_for(first_stream.get(), 10)
            assert heard["kind"] == "added"
            after_change = snapshots.get(key, snapshots.stamp(), lambda: read(3))
            assert after_change is not first and (await after_change).data["rows"] == "snapshot 3"

            other = await make_user(store, "newly-watched")
            async with presence.listening(other.user_id, 10):  # recorded anew: the generation moves
                after_record = snapshots.get(key, snapshots.stamp(), lambda: read(4))
                assert after_record is not after_change
                await after_record
        assert made == [1, 3, 4]
    finally:
        await presence.stop()
        await fanout.stop()


async def test_a_finished_snapshot_is_not_shared_past_its_quiet_window():
    """With nothing announced, a snapshot is still shared only for a few seconds after it
    began: what moves with time alone (liveness, the chart) is never older than that."""
    reads = FreshReads(logging.getLogger("test"), "a read", generation=lambda: 7, quiet_seconds=5.0)
    made = []

    async def read(n: int) -> int:
        made.append(n)
        return n

    before = time.monotonic()
    first = reads.get("k", reads.stamp(), lambda: read(1))
    await first
    # Stamps of streams that subscribed 4 s and 6 s after it began, nothing announced since.
    assert reads.get("k", (before + 4.0, 7), lambda: read(2)) is first
    assert await reads.get("k", (before + 6.0, 7), lambda: read(3)) == 3
    assert made == [1, 3]