"""The doorbell's ringing rules without a database: which events ring, whom, and the
per-todo gate that a retry-scheduler re-queue clears (REQ-16). Plus the rate limiter."""

from __future__ import annotations

from board.config import Settings
from board.mcp.doorbell import Doorbell
from board.mcp.server import RateLimiter
from board.store.vocabulary import VERBS, Agent


def agent(endpoint="e1", queues=("q",), scope=VERBS) -> Agent:
    return Agent(endpoint, "worker", 1, frozenset(scope), tuple(queues))


def rings(doorway) -> list[str]:
    out = []
    while not doorway.outbox.empty():
        out.append(doorway.outbox.get_nowait())
    return out


def event(kind, todo="t1", endpoint="e1", queue="q", state="pending") -> dict:
    return {"kind": kind, "todo": todo, "endpoint": endpoint, "queue": queue, "state": state}


def bell(gate=60.0) -> Doorbell:
    return Doorbell(Settings(doorbell_gate_seconds=gate), store=None, fanout=None, session_idle_seconds=1800)


def test_ready_kinds_ring_and_others_do_not():
    b = bell(gate=0)
    door = b.open(agent())
    for kind in ("added", "released", "requeued", "retried", "due", "unblocked"):
        b.on_event(event(kind, todo=kind))
    b.on_event(event("reaped", todo="reaped", state="pending"))
    # pending, but waiting for its run_at / for the todos named in its after / nothing new to claim
    for kind in ("scheduled", "waiting", "reprioritized"):
        b.on_event(event(kind, todo=kind))
    for kind in ("claimed", "lease_extended", "completed", "failed", "canceled", "interrupted", "resumed", "revoked",
                 "deleted"):
        b.on_event(event(kind, todo=kind, state="claimed"))
    b.on_event(event("reaped", todo="dead", state="failed"))  # reaped to a dead letter is not ready
    assert rings(door) == [f"switchboard://todos/{kind}" for kind in
                           ("added", "released", "requeued", "retried", "due", "unblocked", "reaped")]


def test_a_todo_unblocked_rings_inside_the_gate_of_an_earlier_ring():
    """As for a todo falling due, a todo made claimable by its last dependency opens its gate:
    its wait is over, so a ring before it does not swallow this one."""
    b = bell(gate=60)
    door = b.open(agent())
    b.on_event(event("added"))
    b.on_event(event("waiting"))  # silent
    b.on_event(event("unblocked"))  # clears the gate, rings
    b.on_event(event("released"))  # gated again
    assert rings(door) == ["switchboard://todos/t1"] * 2


def test_a_todo_falling_due_rings_inside_the_gate_of_an_earlier_ring():
    b = bell(gate=60)
    door = b.open(agent())
    b.on_event(event("added"))
    b.on_event(event("scheduled"))  # claimed, then snoozed: silent
    b.on_event(event("due"))  # its wait is over: clears the gate, rings
    b.on_event(event("released"))  # gated again
    assert rings(door) == ["switchboard://todos/t1"] * 2


def test_the_gate_suppresses_a_second_ring_and_a_requeue_clears_it():
    b = bell(gate=60)
    door = b.open(agent())
    b.on_event(event("added"))
    b.on_event(event("released"))   # inside the gate: swallowed
    b.on_event(event("retried"))   # inside the gate: swallowed
    b.on_event(event("requeued"))  # the retry scheduler: clears the gate, rings
    b.on_event(event("released"))   # gated again
    assert rings(door) == ["switchboard://todos/t1"] * 2


def test_a_ring_nobody_heard_leaves_the_gate_open():
    b = bell(gate=60)
    b.on_event(event("added"))
    door = b.open(agent())
    b.on_event(event("released"))
    assert rings(door) == ["switchboard://todos/t1"]


def test_only_the_todos_endpoint_and_queue_are_rung():
    b = bell(gate=0)
    mine, theirs = b.open(agent("e1")), b.open(agent("e2"))
    other_queue = b.open(agent("e1", queues=("other",)))
    producer = b.open(agent("e1", scope=("add_todo", "list_todos")))  # may not drain
    b.on_event(event("added", endpoint="e1", queue="q"))
    assert rings(mine) == ["switchboard://todos/t1"]
    assert rings(theirs) == rings(other_queue) == rings(producer) == []


def test_a_listen_for_one_todo_hears_only_that_todo():
    b = bell(gate=0)
    one = b.open(agent(), frozenset({"switchboard://todos/t2"}))
    b.on_event(event("added", todo="t1"))
    b.on_event(event("added", todo="t2"))
    assert rings(one) == ["switchboard://todos/t2"]


def test_a_closed_doorway_is_not_rung_and_malformed_events_are_ignored():
    b = bell(gate=0)
    door = b.open(agent())
    b.close(door)
    b.on_event(event("added"))
    b.on_event({"kind": "added"})
    b.on_event({"kind": "resync"})
    assert rings(door) == [] and b.live_doorways() == 0


def test_the_rate_limiter_is_a_token_bucket_per_key():
    limiter = RateLimiter(rate=0.001, burst=2)
    assert [limiter.allow("a") for _ in range(3)] == [True, True, False]
    assert limiter.allow("b") is True
    assert all(RateLimiter(rate=0, burst=1).allow("a") for _ in range(100))  # 0 turns it off


def test_every_transition_kind_the_store_reports_is_in_the_vocabulary():
    """One tense, one list: every kind the store's statements notify and its observers see."""
    import re

    from board.store import store
    from board.store.vocabulary import (CONTROL_KINDS, NOTE_KINDS, QUEUE_KINDS, SCHEDULE_KINDS, TEAM_KINDS,
                                        TRANSITION_KINDS)

    from pathlib import Path

    package = Path(store.__file__).parent  # every part of the store, and its statements
    text = "".join(p.read_text() for p in sorted(package.glob("*.py")) + sorted((package / "sql").glob("*.sql")))
    notified = set(re.findall(r"'kind', '([a-z_]+)'", text))
    emitted = set(re.findall(r'Transition\("([a-z_]+)"', text))
    assert notified and emitted
    assert emitted <= set(TRANSITION_KINDS), emitted - set(TRANSITION_KINDS)
    assert notified <= set(TRANSITION_KINDS) | set(CONTROL_KINDS) | set(QUEUE_KINDS) | set(NOTE_KINDS) | set(SCHEDULE_KINDS) | set(TEAM_KINDS), (
        notified - set(TRANSITION_KINDS))


class Pending:
    """The store's one read the re-rings make: which todos are still pending."""

    def __init__(self, *pending: str):
        self.pending = set(pending)

    async def todos_still_pending(self, ids):
        return {i for i in ids if i in self.pending}


def budget_bell(margin=1, rering=1.0, store=None) -> Doorbell:
    return Doorbell(Settings(doorbell_gate_seconds=0, doorbell_ring_margin=margin, doorbell_rering_seconds=rering),
                    store=store, fanout=None, session_idle_seconds=1800)


def test_a_ready_todo_rings_one_plus_the_margin_of_the_listeners_taking_turns():
    b = budget_bell(margin=1)
    doors = [b.open(agent()) for _ in range(10)]
    b.on_event(event("added", todo="t1"))
    b.on_event(event("added", todo="t2"))
    heard = [rings(d) for d in doors]
    assert heard[:4] == [["switchboard://todos/t1"]] * 2 + [["switchboard://todos/t2"]] * 2
    assert heard[4:] == [[]] * 6


def test_as_many_todos_as_listeners_ring_every_listener_and_a_margin_of_0_rings_one():
    b = budget_bell(margin=0)
    doors = [b.open(agent()) for _ in range(4)]
    for i in range(4):
        b.on_event(event("added", todo=f"t{i}"))
    assert [rings(d) for d in doors] == [[f"switchboard://todos/t{i}"] for i in range(4)]


def test_a_listener_for_one_todo_is_always_rung_for_it_beside_the_budget():
    b = budget_bell(margin=0)
    first, second = b.open(agent()), b.open(agent())
    mine = b.open(agent(), frozenset({"switchboard://todos/t1"}))
    b.on_event(event("added", todo="t1"))
    assert rings(mine) == ["switchboard://todos/t1"]
    assert rings(first) + rings(second) == ["switchboard://todos/t1"]


def test_a_todo_still_pending_rings_the_next_listeners_until_each_heard_it_once():
    import asyncio

    b = budget_bell(margin=0, store=Pending("t1"))
    doors = [b.open(agent()) for _ in range(3)]
    b.on_event(event("added", todo="t1"))
    later = 10**9  # a re-ring pass long after every due time
    for _ in range(4):
        asyncio.run(b.rering_due(now=later))
        later += 10
    assert [rings(d) for d in doors] == [["switchboard://todos/t1"]] * 3
    assert b._rerings == {}  # all heard it: the heartbeat rings it again from here


def test_a_claimed_todo_rings_nobody_more():
    import asyncio

    b = budget_bell(margin=0, store=Pending())
    doors = [b.open(agent()) for _ in range(3)]
    b.on_event(event("added", todo="t1"))
    assert asyncio.run(b.rering_due(now=10**9)) == 0
    assert sum(len(rings(d)) for d in doors) == 1 and b._rerings == {}
