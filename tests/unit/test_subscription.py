"""A fan-out subscription (board/live/fanout.py): what one live stream's consumer gets."""

from __future__ import annotations

import asyncio

from board.live.fanout import RESYNC, SHUTDOWN, SUBSCRIPTION_MAX, Subscription


async def test_a_waiting_consumer_is_woken_and_gets_every_event_in_order():
    sub = Subscription()
    got = asyncio.create_task(sub.get())
    await asyncio.sleep(0)
    sub.put({"n": 1})
    sub.put({"n": 2})
    assert await asyncio.wait_for(got, 1) == {"n": 1}
    assert await sub.get() == {"n": 2}
    sub.put({"n": 3})
    assert await sub.get() == {"n": 3}


async def test_a_consumer_that_falls_behind_is_told_to_resync_once_and_then_hears_again():
    sub = Subscription()
    for n in range(SUBSCRIPTION_MAX + 5):
        sub.put({"n": n})
    assert await sub.get() is RESYNC  # what was queued is dropped: a full refresh replaces it
    sub.put({"n": "after"})
    assert await sub.get() == {"n": "after"}


async def test_the_shutdown_reaches_a_consumer_that_fell_behind():
    sub = Subscription()
    for n in range(SUBSCRIPTION_MAX + 1):
        sub.put({"n": n})
    sub.put({"n": "dropped while behind"})
    sub.put(SHUTDOWN)
    assert [await sub.get(), await sub.get()] == [RESYNC, SHUTDOWN]


async def test_a_consumer_cancelled_while_waiting_loses_no_event_put_meanwhile():
    sub = Subscription()
    waiting = asyncio.create_task(sub.get())
    await asyncio.sleep(0)
    sub.put({"n": 1})
    waiting.cancel()  # woken and cancelled before it ran: the event stays for the next get
    await asyncio.gather(waiting, return_exceptions=True)
    if not waiting.cancelled():
        assert waiting.result() == {"n": 1}
    else:
        assert await asyncio.wait_for(sub.get(), 1) == {"n": 1}


async def test_a_consumer_waiting_until_a_deadline_gets_an_event_before_it_or_nothing_once_it_passes():
    loop = asyncio.get_running_loop()
    sub = Subscription()
    assert await sub.get(loop.time() + 0.02) is None
    loop.call_later(0.01, sub.put, {"n": 1})
    assert await sub.get(loop.time() + 5) == {"n": 1}


async def test_a_deadline_moved_later_is_waited_out_in_full_though_an_earlier_one_was_armed():
    """A stream pushes its ping on with every event: the timer armed for the earlier deadline
    may wake the consumer, which must wait on until the later one."""
    loop = asyncio.get_running_loop()
    sub = Subscription()
    loop.call_later(0.01, sub.put, {"n": 1})
    assert await sub.get(loop.time() + 0.05) == {"n": 1}  # its timer, for 0.05, is still armed
    later = loop.time() + 0.2
    assert await sub.get(later) is None
    assert loop.time() >= later
