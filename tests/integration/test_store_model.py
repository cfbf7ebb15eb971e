"""A stateful property test: random sequences of transitions against real Postgres, checked
after every step against a plain Python model of the state machine and attempt history.

Every holder verb, the interrupts included, is tried with the right token, none, a wrong one
and a stale attempt's. The run is derandomized (the same examples every time, as CI needs);
set SWITCHBOARD_MODEL_RANDOM=1 (and SWITCHBOARD_MODEL_EXAMPLES=N) to search new ones. The
hard cases found so far run first, as fixed sequences of the same rules."""

from __future__ import annotations

import asyncio
import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import hypothesis.strategies as stg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from board.store import store as st
from board.store import vocabulary
from board.config import Settings
from board.store.db import open_pool
from board.errors import Conflict, SwitchboardError
from tests.conftest import RULE_BREAKERS

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
HOLDING = ("claimed", "input_required", "auth_required")
MAX_ATTEMPTS = 3
LEASE = 30


@dataclass
class ModelTodo:
    id: str
    state: str = "pending"
    attempt: int = 0
    total: int = 0
    lease: datetime | None = None
    next_retry: datetime | None = None
    token: str | None = None
    old_tokens: list = field(default_factory=list)  # tokens of this todo's closed attempts
    outcomes: list = field(default_factory=list)  # None while the attempt is open

    def close(self, outcome):
        assert self.outcomes and self.outcomes[-1] is None
        self.outcomes[-1] = outcome
        if self.token:
            self.old_tokens.append(self.token)
        self.token = None

    def presented(self, which: str) -> str | None:
        """The lease_token a call presents: the open attempt's, none, a made-up one, or a
        closed attempt's of this same todo (a made-up one when there is none yet)."""
        if which == "right":
            return self.token
        if which == "stale" and self.old_tokens:
            return self.old_tokens[-1]
        return None if which == "none" else "wrong-token"


TOKENS = stg.sampled_from(["right", "none", "wrong", "stale"])


def machine(db_url: str, loop) -> type[RuleBasedStateMachine]:
    class StoreMachine(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.now = T0
            self.pool = loop.run_until_complete(open_pool(db_url, min_size=1, max_size=3))
            self.store = st.Store(self.pool, Settings(retry_base_seconds=10, retry_max_seconds=40))
            name = f"m{uuid.uuid4().hex[:12]}"
            user = self.run(self.store.user_insert(name, "x"))
            row, token = self.run(self.store.endpoint_vend(user["id"], name="m", agent_id=name,
                                                           queues=["q"], scope=list(vocabulary.VERBS)))
            self.agent = self.run(self.store.endpoint_authenticate(token))
            self.todos = []
            for i in range(3):
                t = self.run(self.store.todo_add(self.agent, queue="q", title=f"t{i}", max_attempts=MAX_ATTEMPTS,
                                                 now=T0 + timedelta(seconds=i)))
                self.todos.append(ModelTodo(t["id"]))

        def run(self, coro):
            return loop.run_until_complete(coro)

        def teardown(self):
            ids = [t.id for t in self.todos]

            async def clean():
                async with self.pool.connection() as conn:  # test cleanup, not a transition
                    await conn.execute("DELETE FROM todos WHERE id = ANY(%s)", (ids,))
                await self.pool.close()
            self.run(clean())

        # -- helpers ---------------------------------------------------------------
        def claimable(self, t: ModelTodo) -> bool:
            return t.state == "pending" or (t.state == "claimed" and t.lease <= self.now
                                            and t.attempt < MAX_ATTEMPTS)

        def apply_claim(self, t: ModelTodo, res: dict, fenced: bool):
            if t.state == "claimed":
                t.close("lease_expired")
            t.state, t.attempt, t.total = "claimed", t.attempt + 1, t.total + 1
            t.lease = self.now + timedelta(seconds=LEASE)
            t.outcomes.append(None)
            t.token = res.get("lease_token")
            assert ("lease_token" in res) == fenced
            assert res["attempt_seq"] == t.total

        # -- rules -------------------------------------------------------------------
        @rule(dt=stg.sampled_from([1, 10, 31, 60]))
        def advance(self, dt):
            self.now += timedelta(seconds=dt)

        @rule(i=stg.integers(0, 2), fenced=stg.booleans())
        def claim(self, i, fenced):
            t = self.todos[i]
            try:
                res = self.run(self.store.todo_claim(self.agent, t.id, require_fence=fenced, lease_seconds=LEASE,
                                                     now=self.now))
            except Conflict:
                assert not self.claimable(t)
                return
            assert self.claimable(t)
            self.apply_claim(t, res, fenced)

        @rule(fenced=stg.booleans())
        def claim_next(self, fenced):
            res = self.run(self.store.todo_claim_next(self.agent, require_fence=fenced, lease_seconds=LEASE,
                                                      now=self.now))
            if res["todo"] is None:
                assert not any(self.claimable(t) for t in self.todos)
                return
            t = next(t for t in self.todos if t.id == res["todo"]["id"])
            assert self.claimable(t)
            pending = [m for m in self.todos if m.state == "pending"]
            assert (t.state == "pending") == bool(pending)  # pending work goes before a takeover
            self.apply_claim(t, res, fenced)

        @rule(i=stg.integers(0, 2), verb=stg.sampled_from(["heartbeat", "complete", "fail", "release"]),
              token=TOKENS)
        def hold(self, i, verb, token):
            t = self.todos[i]
            lease_token = t.presented(token)
            call = getattr(self.store, f"todo_{verb}")
            try:
                out = self.run(call(self.agent, t.id, lease_token=lease_token, now=self.now))
            except Conflict:
                fence_ok = lease_token == t.token
                assert t.state != "claimed" or not fence_ok
                return
            assert t.state == "claimed" and lease_token == t.token
            if verb == "heartbeat":
                t.lease = self.now + timedelta(seconds=60)  # the server default lease
            elif verb == "complete":
                t.close("completed")
                t.state = "done"
            elif verb == "release":
                t.close("released")
                t.state = "pending"
            else:
                t.close("failed")
                t.state = "failed"
                t.next_retry = out["next_retry_at"] if t.attempt < MAX_ATTEMPTS else None
                assert (out["next_retry_at"] is None) == (t.attempt >= MAX_ATTEMPTS)

        @rule(i=stg.integers(0, 2))
        def cancel(self, i):
            t = self.todos[i]
            try:
                self.run(self.store.todo_cancel(self.agent, t.id, now=self.now))
            except Conflict:
                assert t.state in ("done", "canceled") or (t.state == "failed" and t.next_retry is None)
                return
            if t.state in HOLDING:
                t.close("canceled")
            t.state, t.next_retry = "canceled", None

        @rule(i=stg.integers(0, 2), resume=stg.booleans(), token=TOKENS)
        def interrupt_or_resume(self, i, resume, token):
            t = self.todos[i]
            lease_token = t.presented(token)
            try:
                if resume:
                    self.run(self.store.todo_resume(self.agent, t.id, lease_token=lease_token, lease_seconds=LEASE,
                                                    now=self.now))
                else:
                    self.run(self.store.todo_interrupt(self.agent, t.id, lease_token=lease_token, now=self.now))
            except Conflict:
                assert t.state != ("input_required" if resume else "claimed") or lease_token != t.token
                return
            assert lease_token == t.token
            if resume:
                assert t.state == "input_required"
                t.state, t.lease = "claimed", self.now + timedelta(seconds=LEASE)
            else:
                assert t.state == "claimed"
                t.state = "input_required"

        @rule(i=stg.integers(0, 2))
        def manual_retry(self, i):
            t = self.todos[i]
            try:
                self.run(self.store.todo_retry(self.agent, t.id, now=self.now))
            except Conflict:
                assert not (t.state == "failed" and t.next_retry is None)
                return
            assert t.state == "failed" and t.next_retry is None
            t.state, t.attempt = "pending", 0

        @rule()
        def reap(self):
            n = self.run(self.store.sweep_reap(now=self.now))
            lapsed = [t for t in self.todos if t.state == "claimed" and t.lease <= self.now]
            assert n == len(lapsed)
            for t in lapsed:
                t.close("reaped")
                t.state = "pending" if t.attempt < MAX_ATTEMPTS else "failed"
                t.next_retry = None

        @rule()
        def retry_sweep(self):
            n = self.run(self.store.sweep_retry(now=self.now))
            due = [t for t in self.todos if t.state == "failed" and t.next_retry and t.next_retry <= self.now]
            assert n == len(due)
            for t in due:
                t.state, t.next_retry = "pending", None

        # -- the check -------------------------------------------------------------
        @invariant()
        def database_matches_model(self):
            for t in self.todos:
                got = self.run(self.store.todo_get(self.agent, t.id, attempts_limit=50))
                assert (got["state"], got["attempt"], got["attempts_total"]) == (t.state, t.attempt, t.total)
                assert got["dead_letter"] == (t.state == "failed" and t.next_retry is None)
                outcomes = [a["outcome"] for a in reversed(got["attempts"])]
                assert outcomes == t.outcomes
                assert [a["seq"] for a in reversed(got["attempts"])] == list(range(1, t.total + 1))
                assert (outcomes[-1:] == [None]) == (t.state in HOLDING)
                assert all(a["died"] == (a["outcome"] in ("lease_expired", "reaped")) for a in got["attempts"])
            # the attempts' cross-column rules, which the store holds
            assert self.run(self._rule_breakers()) == []

        async def _rule_breakers(self):
            async with self.pool.connection() as conn:
                return await (await conn.execute(RULE_BREAKERS)).fetchall()

    return StoreMachine


def run_model_test(db_url: str) -> None:
    loop = asyncio.new_event_loop()
    StoreMachine = machine(db_url, loop)
    searching = os.environ.get("SWITCHBOARD_MODEL_RANDOM") == "1"
    StoreMachine.TestCase.settings = settings(
        max_examples=int(os.environ.get("SWITCHBOARD_MODEL_EXAMPLES", "25")), stateful_step_count=30,
        deadline=None, derandomize=not searching, database=None if not searching else settings.default.database,
        suppress_health_check=list(HealthCheck))
    try:
        StoreMachine.TestCase().runTest()
    finally:
        loop.close()


def run_steps(db_url: str, steps) -> None:
    """One fixed sequence of the machine's rules, the invariant checked after each step."""
    loop = asyncio.new_event_loop()
    m = machine(db_url, loop)()
    try:
        m.database_matches_model()
        for name, kwargs in steps:
            getattr(m, name)(**kwargs)
            m.database_matches_model()
    finally:
        m.teardown()
        loop.close()


# The hard cases, each once a survivor or a near miss: the fence on the interrupts and on
# heartbeat with no token, a stale token after a takeover, and the cap around a manual retry.
HARD_CASES = {
    "a fenced attempt refuses every verb without its token, interrupts included": [
        ("claim", {"i": 0, "fenced": True}),
        ("hold", {"i": 0, "verb": "heartbeat", "token": "none"}),
        ("interrupt_or_resume", {"i": 0, "resume": False, "token": "none"}),
        ("interrupt_or_resume", {"i": 0, "resume": False, "token": "wrong"}),
        ("interrupt_or_resume", {"i": 0, "resume": False, "token": "right"}),
        ("interrupt_or_resume", {"i": 0, "resume": True, "token": "none"}),
        ("interrupt_or_resume", {"i": 0, "resume": True, "token": "right"}),
        ("hold", {"i": 0, "verb": "complete", "token": "none"}),
        ("hold", {"i": 0, "verb": "complete", "token": "right"}),
    ],
    "a stale token after a takeover moves nothing": [
        ("claim", {"i": 1, "fenced": True}),
        ("advance", {"dt": 31}),
        ("claim", {"i": 1, "fenced": True}),
        ("hold", {"i": 1, "verb": "heartbeat", "token": "stale"}),
        ("interrupt_or_resume", {"i": 1, "resume": False, "token": "stale"}),
        ("hold", {"i": 1, "verb": "release", "token": "stale"}),
        ("hold", {"i": 1, "verb": "fail", "token": "right"}),
    ],
    "a dead letter retried by hand keeps its history and the cap starts over": [
        ("claim", {"i": 2, "fenced": False}), ("hold", {"i": 2, "verb": "fail", "token": "none"}),
        ("advance", {"dt": 60}), ("retry_sweep", {}),
        ("claim", {"i": 2, "fenced": True}), ("advance", {"dt": 31}), ("reap", {}),
        ("claim", {"i": 2, "fenced": True}), ("hold", {"i": 2, "verb": "fail", "token": "right"}),
        ("manual_retry", {"i": 2}), ("claim", {"i": 2, "fenced": False}),
        ("hold", {"i": 2, "verb": "complete", "token": "stale"}),
        ("hold", {"i": 2, "verb": "complete", "token": "none"}),
    ],
}


@pytest.mark.parametrize("case", HARD_CASES)
def test_a_known_hard_sequence_matches_the_model(db_url, case):
    run_steps(db_url, HARD_CASES[case])


def test_random_transition_sequences_match_the_model(db_url):
    run_model_test(db_url)
