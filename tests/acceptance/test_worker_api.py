"""The `Worker` Python API against a real server: todos yielded fenced and heartbeating while
held, notes, each closing verb, interrupt and resume, asking the owner and waiting for the
answer, shutdown releases, handlers that raise or
forget to close, several slots at once, and a refused token."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone

import pytest

from switchboard_worker import Refused, ToolError, Worker
from tests.acceptance.mcp_helpers import call, connect, vend


async def add(client, title: str, **extra) -> dict:
    return await call(client, "add_todo", {"queue": "q", "title": title, **extra})


async def history(client, todo_id: str) -> dict:
    return await call(client, "get_todo", {"id": todo_id, "notes_limit": 10})


async def test_async_for_yields_fenced_todos_that_note_and_complete(live_server):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        todo_row = await add(client, "first", payload={"n": 1})
        async with Worker(live_server.url, ep.token, queue="q", name="api-test") as worker:
            async for todo in worker:
                assert (todo.id, todo.title, todo.payload, todo.attempt_seq) == (todo_row["id"], "first", {"n": 1}, 1)
                assert "lease_token" not in repr(todo)
                # Fenced: a caller without the lease token cannot close it.
                refused = await client.call_tool("complete", {"id": todo.id})
                assert refused.is_error
                await todo.note("halfway")
                r = await todo.complete({"ok": True}, summary="all green",
                                        usage={"input_tokens": 10, "output_tokens": 2})
                assert r["state"] == "done" and todo.outcome == "completed" and not todo.open
                with pytest.raises(ToolError, match="already closed"):
                    await todo.fail(summary="a second close")
                worker.stop()
        got = await history(client, todo_row["id"])
    [attempt] = got["attempts"]
    assert attempt["claimant"] == "api-test/slot-0" and attempt["summary"] == "all green"
    assert [n["text"] for n in attempt["notes"]] == ["halfway"] and got["result"] == {"ok": True}


async def test_a_todo_carries_its_priority_run_at_and_key_and_a_release_with_a_delay_snoozes_it(live_server):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        plain = await add(client, "plain")
        row = await add(client, "keyed", priority=1, key="sync-users", run_at="2026-01-01T00:00:00+02:00")
        async with Worker(live_server.url, ep.token, queue="q") as worker:
            todo = await worker.claim(wait=False)
            assert (todo.id, todo.priority, todo.run_at, todo.key) == (row["id"], 1, row["run_at"], "sync-users")
            released = await todo.release(summary="after the freeze", delay_seconds=3600)
            assert released["state"] == "pending"
            assert datetime.fromisoformat(released["run_at"]) > datetime.now(timezone.utc) + timedelta(minutes=59)
            other = await worker.claim(wait=False)
            assert (other.id, other.priority, other.run_at, other.key) == (plain["id"], 2, None, None)
            assert (other.after, other.schedule_id) == ([], None)
            await other.complete()
            assert await worker.claim(wait=False) is None  # the snoozed todo waits
        got = await history(client, row["id"])
    assert (got["state"], got["attempts"][0]["outcome"]) == ("pending", "released")


async def test_a_todo_added_with_after_is_claimed_once_what_it_waits_for_is_done_and_carries_after(live_server):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        first = await add(client, "first")
        then = await add(client, "then", priority=0, after=[first["id"]])
        async with Worker(live_server.url, ep.token, queue="q") as worker:
            todo = await worker.claim(wait=False)
            assert (todo.id, todo.after, todo.schedule_id) == (first["id"], [], None)
            assert await worker.claim(wait=False) is None  # the P0 waits for the first
            await todo.complete()
            waited = await worker.claim(wait=False)
            assert (waited.id, waited.after, waited.schedule_id) == (then["id"], [first["id"]], None)
            await waited.complete()


async def test_heartbeats_run_in_the_background_while_a_todo_is_held_and_stop_when_it_closes(live_server):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        row = await add(client, "held a while")
        async with Worker(live_server.url, ep.token, lease_seconds=1.5) as worker:
            todo = await worker.claim()
            await asyncio.sleep(4.5)  # three leases long; the reaper runs every 0.2 s
            assert todo.heartbeats >= 3 and not todo.lease_lost.is_set()
            await todo.fail(summary="gave up")
            beats = todo.heartbeats
            await asyncio.sleep(1.0)
            assert todo.heartbeats == beats  # cancelled with the close
        got = await history(client, row["id"])
    [attempt] = got["attempts"]
    assert attempt["outcome"] == "failed" and attempt["last_heartbeat_at"] and not attempt["died"]


async def test_interrupt_keeps_the_attempt_open_and_resume_heartbeats_again(live_server):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        row = await add(client, "needs input")
        async with Worker(live_server.url, ep.token, lease_seconds=2) as worker:
            todo = await worker.claim()
            await todo.interrupt()
            assert (await history(client, row["id"]))["state"] == "input_required"
            await todo.resume()
            await asyncio.sleep(2.5)  # past the lease: the heartbeats came back with resume
            await todo.complete(summary="answered")
        got = await history(client, row["id"])
    assert got["state"] == "done" and got["attempts_total"] == 1


async def owner_of(store, ep):
    """The human who owns the endpoint, as the Board signs them in."""
    from board.store.vocabulary import Human
    return Human(ep.user_id, (await store.user_by_id(ep.user_id))["username"])


async def answer_when_asked(store, human, todo_id: str, **answer) -> float:
    """Answer the todo as its owner once it waits for one; the time of the answer."""
    for _ in range(200):
        if (await store.todo_get(human, todo_id))["state"] == "input_required":
            break
        await asyncio.sleep(0.05)
    await store.todo_answer(human, todo_id, **answer)
    return time.monotonic()


async def test_ask_waits_for_the_owners_answer_and_returns_it_with_the_attempt_still_open(live_server):
    store = live_server.store
    ep = await vend(store)
    human = await owner_of(store, ep)
    async with connect(live_server, ep.token) as client:
        row = await add(client, "deploy")
        async with Worker(live_server.url, ep.token) as worker:
            todo = await worker.claim()
            asking = asyncio.create_task(todo.ask("Deploy now?", choices=["yes", "no"]))
            answered_at = await answer_when_asked(store, human, row["id"], choice="yes")
            answers = await asyncio.wait_for(asking, 30)
            print(f"\nask() returned {time.monotonic() - answered_at:.3f} s after the answer")
            assert [(a["text"], a["choice"]) for a in answers] == [("yes", "yes")]
            assert not todo.interrupted and todo.open
            await todo.complete(summary="deployed")
        got = await history(client, row["id"])
    [attempt] = got["attempts"]
    assert got["state"] == "done" and attempt["question"]["answers"][0]["choice"] == "yes"


async def test_ask_raises_lost_when_the_person_cancels_instead_of_answering(live_server):
    from switchboard_worker import Lost
    store = live_server.store
    ep = await vend(store)
    human = await owner_of(store, ep)
    async with connect(live_server, ep.token) as client:
        row = await add(client, "deploy")
        async with Worker(live_server.url, ep.token) as worker:
            todo = await worker.claim()
            asking = asyncio.create_task(todo.ask("Deploy now?"))
            for _ in range(200):
                if (await history(client, row["id"]))["state"] == "input_required":
                    break
                await asyncio.sleep(0.05)
            await store.todo_cancel(human, row["id"])
            with pytest.raises(Lost, match="canceled"):
                await asyncio.wait_for(asking, 30)
            assert todo.lease_lost.is_set()


async def test_leaving_the_worker_releases_what_is_held_with_the_shutdown_summary(live_server):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        row = await add(client, "unfinished")
        with pytest.raises(RuntimeError):
            async with Worker(live_server.url, ep.token) as worker:
                await worker.claim()
                raise RuntimeError("the agent crashed")
        got = await history(client, row["id"])
    assert got["state"] == "pending"
    assert got["attempts"][0]["outcome"] == "released"
    assert got["attempts"][0]["summary"].startswith("released on shutdown")


async def test_run_drains_with_several_slots_and_turns_a_raising_handler_into_a_failure(live_server):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        rows = [await add(client, f"todo {i}", payload={"boom": i == 2}, max_attempts=1) for i in range(6)]
        async with Worker(live_server.url, ep.token, poll_seconds=30) as worker:
            running, most = 0, 0
            seen: list[str] = []

            async def handler(todo):
                nonlocal running, most
                running += 1
                most = max(most, running)
                await asyncio.sleep(0.3)
                running -= 1
                seen.append(todo.id)
                if todo.payload["boom"]:
                    raise ValueError("not this one")
                await todo.complete()
                if len(seen) == len(rows):
                    worker.stop()

            await asyncio.wait_for(worker.run(handler, concurrency=3), 60)
        states = [(await history(client, r["id"]))["state"] for r in rows]
    assert sorted(seen) == sorted(r["id"] for r in rows) and most == 3
    assert states == ["done", "done", "failed", "done", "done", "done"]
    async with connect(live_server, ep.token) as client:
        failed = await history(client, rows[2]["id"])
    assert failed["attempts"][0]["summary"] == "the handler raised ValueError"


async def test_an_abandoned_todo_taken_over_refuses_the_stale_close_and_reports_the_lease_lost(live_server):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        await add(client, "taken over", max_attempts=5)
        async with Worker(live_server.url, ep.token, lease_seconds=1) as worker:
            todo = await worker.claim()
            todo.abandon()  # stops heartbeating, as a hung worker would
            await asyncio.sleep(1.5)
            taker = await call(client, "claim_next", {"queue": "q"})
            assert taker["todo"]["id"] == todo.id
            with pytest.raises(ToolError) as stale:
                await todo.complete(summary="too late")
            assert stale.value.code == "conflict" and todo.lease_lost.is_set() and todo not in worker.held


async def test_a_refused_token_is_a_clear_error_not_a_retry_loop(live_server):
    started = time.monotonic()
    with pytest.raises(Refused, match="HTTP 401"):
        async with Worker(live_server.url, "sb_not-a-real-token"):
            pass
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
async def test_a_waiting_claim_wakes_on_the_doorbell_in_either_protocol_generation(live_server, protocol):
    from tests.conftest import LOAD_SLACK_SECONDS

    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        async with Worker(live_server.url, ep.token, poll_seconds=30, protocol=protocol) as worker:
            waiting = asyncio.create_task(worker.claim())
            await asyncio.sleep(1.0)  # its claim_next found nothing; now it waits on the doorbell
            assert not waiting.done()
            added = time.monotonic()
            row = await add(client, "wake up")
            todo = await asyncio.wait_for(waiting, 30)
            latency = time.monotonic() - added
            print(f"\n[worker] {protocol}: from add_todo to claimed {latency:.3f} s (safety poll 30 s)")
            assert todo.id == row["id"] and latency < 2 + LOAD_SLACK_SECONDS
            await todo.complete()


async def test_ask_with_a_timeout_goes_on_without_an_answer_and_the_todo_is_held_again(live_server):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        row = await add(client, "deploy")
        async with Worker(live_server.url, ep.token) as worker:
            todo = await worker.claim()
            assert await todo.ask("Deploy now?", choices=["yes", "no"], timeout=0.5) == []
            assert (await history(client, row["id"]))["state"] == "claimed" and not todo.interrupted
            await todo.complete(summary="went on with the default")
        got = await history(client, row["id"])
    [attempt] = got["attempts"]
    assert attempt["question"]["text"] == "Deploy now?" and attempt["question"]["answers"] == []


async def test_a_lease_taken_over_mid_work_is_noticed_by_the_next_heartbeat_and_the_old_complete_is_refused(
        live_server):
    """What every worker must do with a lost lease: notice it by the next heartbeat, let go of
    the todo, and report nothing after (a worker that ignores it fails here)."""
    from tests.conftest import LOAD_SLACK_SECONDS

    store = live_server.store
    ep = await vend(store)
    human = await owner_of(store, ep)
    lease = 4.0  # heartbeats every 1.3 s: a loaded machine's reaper must not take the todo first
    async with connect(live_server, ep.token) as client:
        row = await add(client, "taken over", max_attempts=5)
        async with Worker(live_server.url, ep.token, lease_seconds=lease) as worker:
            todo = await worker.claim()
            await store.todo_release(human, row["id"], summary="taking it back")  # the owner, on the Board
            taker = await call(client, "claim_next", {"queue": "q"})
            assert taker["todo"]["id"] == todo.id
            try:
                await asyncio.wait_for(todo.lease_lost.wait(), lease / 3 + LOAD_SLACK_SECONDS)
            except asyncio.TimeoutError:
                pytest.fail(f"no heartbeat noticed the lost lease within {lease / 3 + LOAD_SLACK_SECONDS:g} s")
            assert todo.outcome == "lost" and not todo.open and todo not in worker.held
            with pytest.raises(ToolError) as stale:
                await todo.complete({"ok": True}, summary="too late")
            assert stale.value.code == "conflict"
        got = await history(client, row["id"])
    taken, ours = got["attempts"]
    assert (ours["outcome"], ours["summary"]) == ("released", "taking it back")  # nothing of ours after
    assert taken["outcome"] is None and got["state"] == "claimed" and got["result"] is None
