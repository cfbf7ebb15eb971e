"""REQ-15 and the notify hooks: payloads as committed, delivered durably and signed."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone

import httpx2
import psycopg
import pytest

from board.store import store as st
from board.errors import Conflict, Internal
from board.ops.hooks import HookDelivery, TransitionHooks, verify
from tests.conftest import make_agent, sql_rows

T0 = datetime(2026, 11, 30, 14, 0, tzinfo=timezone.utc)
SECRET = "hook-secret-for-tests"


async def fail_to_dead_letter(store, agent, todo_id, *, last_summary=None, last_artifact=None, n=5):
    now = T0
    for i in range(n):
        await store.todo_claim(agent, todo_id, now=now)
        last = i == n - 1
        out = await store.todo_fail(agent, todo_id, summary=last_summary if last else f"red {i + 1}",
                                    artifact=last_artifact if last else None, now=now)
        if out["next_retry_at"]:
            now = out["next_retry_at"]
            await store.sweep_retry(now=now)
    return out


async def test_dead_letter_carries_its_last_attempt(store, agent):
    hooks = TransitionHooks(store)
    seen: list[dict] = []
    hooks.register(seen.append)
    todo = await store.todo_add(agent, queue="q", title="flaky", max_attempts=5)
    out = await fail_to_dead_letter(store, agent, todo["id"], last_summary="still red",
                                    last_artifact="mcp://cairn/Zz9")
    await hooks.drain()
    assert out["dead_letter"]
    dead = [p for p in seen if p["dead_letter"]]
    assert len(dead) == 1
    payload = dead[0]
    assert payload["attempts_total"] == 5
    assert payload["attempt"] == {"seq": 5, "outcome": "failed", "died": False, "summary": "still red",
                                  "artifact": "mcp://cairn/Zz9"}
    assert payload["attempts"]["by_outcome"] == {"failed": 5}
    assert [r["seq"] for r in payload["attempts"]["recent"]] == [5, 4, 3, 2, 1]
    assert payload["attempts"]["omitted"] == 0
    # every committed transition fired once: add, 5 claims, 5 fails, 4 re-queues
    assert [p["kind"] for p in seen].count("claimed") == 5 and len(seen) == 15
    # payloads that are not dead letters never carry a summary or artifact
    assert all("summary" not in p.get("attempt", {}) for p in seen if not p["dead_letter"])


async def test_a_rolled_back_transition_fires_no_hook(store, agent, db_url):
    hooks = TransitionHooks(store)
    seen: list[dict] = []
    hooks.register(seen.append)
    todo = await store.todo_add(agent, queue="q", title="t")
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                           "$$ BEGIN RAISE EXCEPTION 'refused'; END $$")
        await conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON attempts FOR EACH ROW EXECUTE FUNCTION refuse()")
    with pytest.raises(Internal):
        await store.todo_claim(agent, todo["id"])
    await hooks.drain()
    assert [p["kind"] for p in seen] == ["added"]


async def test_a_reaped_dead_letter_carries_died_and_no_summary(store, agent):
    hooks = TransitionHooks(store)
    seen: list[dict] = []
    hooks.register(seen.append)
    todo = await store.todo_add(agent, queue="q", title="t", max_attempts=1)
    await store.todo_claim(agent, todo["id"], lease_seconds=1, now=T0)
    await store.sweep_reap(now=T0 + timedelta(seconds=5))
    await hooks.drain()
    dead = [p for p in seen if p["dead_letter"]][0]
    assert dead["attempt"] == {"seq": 1, "outcome": "reaped", "died": True, "summary": None, "artifact": None}
    assert dead["attempts"]["by_outcome"] == {"reaped": 1}


async def test_exact_counts_survive_pruning(store, agent):
    hooks = TransitionHooks(store)
    seen: list[dict] = []
    hooks.register(seen.append)
    todo = await store.todo_add(agent, queue="q", title="hot", max_attempts=1)
    for i in range(60):
        await store.todo_claim(agent, todo["id"])
        if i % 3 == 0:
            await store.todo_release(agent, todo["id"])
            await store.todo_claim(agent, todo["id"])
        await store.todo_fail(agent, todo["id"])
        if i < 59:
            await store.todo_retry(agent, todo["id"])
    await hooks.drain()
    last = [p for p in seen if p["dead_letter"]][-1]
    assert last["attempts"]["total"] == 80
    assert last["attempts"]["by_outcome"] == {"failed": 60, "released": 20}
    assert len(last["attempts"]["recent"]) == 10 and last["attempts"]["omitted"] == 70
    got = await store.todo_get(agent, todo["id"])
    assert got["attempts_pruned"] == 30 and got["attempt_outcomes"] == {"failed": 60, "released": 20}


# -- durable notify hooks -------------------------------------------------------------

class Receiver:
    """A local HTTP receiver: records every request, fails the first `fail_first`."""

    def __init__(self, fail_first: int = 0):
        self.fail_first = fail_first
        self.requests: list[tuple[dict, bytes]] = []

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self._handle)

    def _handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append((dict(request.headers), request.content))
        if len(self.requests) <= self.fail_first:
            return httpx2.Response(500)
        return httpx2.Response(204)

    def bodies(self):
        return [json.loads(body) for _, body in self.requests]


def hooked(store) -> st.Store:
    settings = store.settings.with_(hook_urls=("https://hooks.example.com/switchboard",), hook_secret=SECRET,
                                    hook_retry_base_seconds=0, hook_retry_max_seconds=0)
    return st.Store(store.pool, settings)


async def drain(delivery, client, rounds=10):
    for _ in range(rounds):
        await delivery.deliver_due(client)


async def test_every_ready_and_dead_letter_event_is_written_with_its_transition(store, agent, db_url):
    s = hooked(store)
    todo = await s.todo_add(agent, queue="q", title="t", max_attempts=3)
    await s.todo_claim(agent, todo["id"], now=T0)
    await s.todo_release(agent, todo["id"], now=T0)                      # ready again
    await s.todo_claim(agent, todo["id"], now=T0)
    out = await s.todo_fail(agent, todo["id"], summary="red", now=T0)   # retry scheduled: nothing
    await s.sweep_retry(now=out["next_retry_at"])                        # re-queued: ready
    await s.todo_claim(agent, todo["id"], lease_seconds=1, now=T0)
    await s.sweep_reap(now=T0 + timedelta(minutes=1))                    # reaped at the cap: dead letter
    await s.todo_retry(agent, todo["id"])                                # manual retry: ready
    rows = await sql_rows(db_url, "SELECT event, payload FROM hook_events ORDER BY created_at")
    assert [r["event"] for r in rows] == ["todo.ready", "todo.ready", "todo.ready", "todo.dead_lettered",
                                          "todo.ready"]
    dead = rows[3]["payload"]
    assert dead["attempt"]["outcome"] == "reaped" and dead["attempt"]["died"] is True
    assert dead["attempts"]["by_outcome"] == {"failed": 1, "reaped": 1, "released": 1}


async def test_a_waiting_todo_s_ready_event_is_written_when_its_last_dependency_completes(store, agent, db_url):
    """Not at its add, nor when the first of its two dependencies completes: the complete of the
    last one writes its todo.ready, whose todo carries after (in the order named) and
    schedule_id."""
    s = hooked(store)
    first = await s.todo_add(agent, queue="q", title="first")
    last = await s.todo_add(agent, queue="q", title="last")
    waiting = await s.todo_add(agent, queue="q", title="after both", after=[last["id"], first["id"]])

    async def ready_events(todo_id: str) -> list[dict]:
        return [r["payload"] for r in await sql_rows(
            db_url, "SELECT payload FROM hook_events WHERE todo_id = %s AND event = 'todo.ready'", (todo_id,))]

    [first_ready] = await ready_events(first["id"])
    assert (first_ready["todo"]["after"], first_ready["todo"]["schedule_id"]) == ([], None)
    assert await ready_events(waiting["id"]) == []
    for dependency in (first, last):
        await s.todo_claim(agent, dependency["id"], now=T0)
    await s.todo_complete(agent, first["id"], now=T0)
    assert await ready_events(waiting["id"]) == []
    await s.todo_complete(agent, last["id"], now=T0)
    [ready] = await ready_events(waiting["id"])
    assert ready["event"] == "todo.ready"
    assert {k: ready["todo"][k] for k in ("id", "state", "after", "schedule_id")} == {
        "id": waiting["id"], "state": "pending", "after": [last["id"], first["id"]], "schedule_id": None}


async def test_events_are_delivered_signed_after_a_crash_between_commit_and_delivery(store, agent):
    s = hooked(store)
    todo = await s.todo_add(agent, queue="q", title="t", max_attempts=5)
    await fail_to_dead_letter(s, agent, todo["id"], last_summary="still red", last_artifact="mcp://cairn/Zz9")
    # Nothing delivered yet: the process that committed is gone. A new one starts delivering.
    receiver = Receiver()
    delivery = HookDelivery(s, s.settings)
    async with httpx2.AsyncClient(transport=receiver.transport()) as client:
        await drain(delivery, client)
    bodies = receiver.bodies()
    assert [b["event"] for b in bodies].count("todo.ready") == 5  # created + four re-queues
    dead = [b for b in bodies if b["event"] == "todo.dead_lettered"]
    assert len(dead) == 1
    assert dead[0]["todo"]["attempts_total"] == 5
    assert dead[0]["attempt"]["summary"] == "still red" and dead[0]["attempt"]["artifact"] == "mcp://cairn/Zz9"
    for headers, body in receiver.requests:
        assert verify(SECRET, headers["x-switchboard-signature"], body)
        assert not verify("wrong-secret", headers["x-switchboard-signature"], body)
        assert headers["x-switchboard-event-id"] == json.loads(body)["id"]
    # delivered means delivered: a second process finds nothing to send
    again = Receiver()
    async with httpx2.AsyncClient(transport=again.transport()) as client:
        await drain(delivery, client, rounds=2)
    assert again.requests == []


async def test_a_receiver_that_fails_twice_still_gets_the_event(store, agent, db_url):
    s = hooked(store)
    await s.todo_add(agent, queue="q", title="t")
    receiver = Receiver(fail_first=2)
    delivery = HookDelivery(s, s.settings)
    async with httpx2.AsyncClient(transport=receiver.transport()) as client:
        await drain(delivery, client)
    ids = [h["x-switchboard-event-id"] for h, _ in receiver.requests]
    assert len(ids) == 3 and len(set(ids)) == 1  # one event, tried three times, one stable id
    row = (await sql_rows(db_url, "SELECT tries, delivered_at FROM hook_events"))[0]
    assert row["tries"] == 3 and row["delivered_at"] is not None


async def test_two_deliverers_at_once_send_each_event_once(store, agent):
    s = hooked(store)
    for i in range(30):
        await s.todo_add(agent, queue="q", title=f"t{i}")
    receiver = Receiver()
    a, b = HookDelivery(s, s.settings), HookDelivery(s, s.settings)
    async with httpx2.AsyncClient(transport=receiver.transport()) as client:
        await asyncio.gather(drain(a, client), drain(b, client))
    ids = [h["x-switchboard-event-id"] for h, _ in receiver.requests]
    assert len(ids) == 30 and len(set(ids)) == 30


async def test_no_hook_urls_writes_no_events(store, agent, db_url):
    todo = await store.todo_add(agent, queue="q", title="t", max_attempts=1)
    await store.todo_claim(agent, todo["id"])
    await store.todo_fail(agent, todo["id"])
    assert await sql_rows(db_url, "SELECT 1 FROM hook_events") == []


async def test_an_interrupt_without_a_question_or_public_url_sends_nulls_and_a_refused_one_sends_nothing(store, agent,
                                                                                                    db_url):
    s = hooked(store)  # no SWITCHBOARD_PUBLIC_URL: no absolute Board URL to give
    todo = await s.todo_add(agent, queue="q", title="needs a one-time code")
    claimed = await s.todo_claim(agent, todo["id"], require_fence=True)
    with pytest.raises(Conflict):  # a stale lease token: refused, and no event written
        await s.todo_interrupt(agent, todo["id"], state="auth_required", question="Code?", lease_token="stale")
    await s.todo_interrupt(agent, todo["id"], state="auth_required", lease_token=claimed["lease_token"])
    with pytest.raises(Conflict):  # a second interrupt while one is open
        await s.todo_interrupt(agent, todo["id"], question="Again?", lease_token=claimed["lease_token"])
    rows = await sql_rows(db_url, "SELECT event, payload FROM hook_events WHERE event <> 'todo.ready'")
    assert [r["event"] for r in rows] == ["todo.auth_required"]
    payload = rows[0]["payload"]
    assert payload["question"] is None and payload["board_url"] is None
    assert payload["todo"]["id"] == todo["id"] and payload["todo"]["state"] == "auth_required"
    assert claimed["lease_token"] not in json.dumps(payload)
