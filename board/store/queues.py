"""Queues (board/store/sql/board.sql), a part of board.store.store.Store: a human's pause and
resume, the overview and its charts (a human's own, scoped in each statement), and the
counts /metrics and /readyz read."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import psycopg

from board.errors import Invalid, NotFound
from board.store.base import StoreBase, acts
from board.store.queries import execute, query
from board.store.vocabulary import QUEUE_PATTERN, QUEUE_RULE, Human

class Queues(StoreBase):
    async def queue_state_counts(self) -> list[dict]:
        """Aggregates only, for /metrics."""
        return await self._fetch(query("todos_count_by_queue_state"), {}, op="metrics")

    async def schema_ready(self, known_version: int, *, timeout: float) -> bool:
        """Readiness (/readyz): Postgres answered within `timeout` seconds (the wait for a
        pooled connection included) and the newest migration applied is at least
        known_version. A database that cannot be reached or answers too late is not ready."""
        try:
            async with asyncio.timeout(timeout):
                async with self.pool.connection(timeout=timeout) as conn:
                    row = await (await execute(conn, query("schema_version"))).fetchone()
        except (psycopg.Error, TimeoutError):  # a PoolTimeout is a psycopg.Error
            return False
        return row["version"] >= known_version

    async def queue_paused_counts(self) -> list[dict]:
        """Aggregates only, for /metrics: how many humans paused each queue."""
        return await self._fetch(query("queue_pauses_count"), {}, op="metrics")

    async def queues_paused_by(self, user_id: int) -> frozenset[str]:
        """Read, for the pause cache: the queues this human has paused."""
        rows = await self._fetch(query("queues_paused_by"), {"user_id": user_id}, op="claim_next")
        return frozenset(r["queue"] for r in rows)

    # -- pause, resume, the overview -------------------------------------------------------

    def _queue_name(self, queue: Any, op: str) -> str:
        if not isinstance(queue, str) or not QUEUE_PATTERN.fullmatch(queue):
            raise Invalid(f"queue must be {QUEUE_RULE}", argument="queue", op=op)
        return queue

    @acts("pause", "admin", todo=None, queue="queue")
    async def queue_pause(self, caller: Human, queue: Any, *, now: datetime | None = None) -> dict:
        """A queue of the human's endpoints -> paused: agents claim nothing in it until it is
        resumed. Pausing a paused queue changes nothing (changed: false)."""
        queue = self._queue_name(queue, "queue_pause")
        params = {"user_id": caller.user_id, "queue": queue, "now": now}
        row = await self._fetch(query("queue_pause"), params, op="queue_pause", one=True)
        if self.pauses is not None:  # here at once; other processes on its notification
            self.pauses.forget(caller.user_id)
        if row is not None:
            return {"queue": queue, "paused_at": row["paused_at"], "changed": True}
        state = await self._fetch(query("queue_pause_state"), params, op="queue_pause", one=True)
        if state["paused_at"] is None and not state["known"]:
            raise NotFound("no endpoint of this user is granted that queue", argument="queue", op="queue_pause")
        return {"queue": queue, "paused_at": state["paused_at"], "changed": False}

    @acts("resume", "admin", todo=None, queue="queue")
    async def queue_resume(self, caller: Human, queue: Any) -> dict:
        """paused -> resumed; the doorbell rings the queue's ready todos (queue_resumed).
        Resuming a queue that is not paused changes nothing (changed: false)."""
        queue = self._queue_name(queue, "queue_resume")
        params = {"user_id": caller.user_id, "queue": queue}
        row = await self._fetch(query("queue_resume"), params, op="queue_resume", one=True)
        if self.pauses is not None:
            self.pauses.forget(caller.user_id)
        if row is not None:
            return {"queue": queue, "paused_at": None, "changed": True}
        state = await self._fetch(query("queue_pause_state"), params, op="queue_resume", one=True)
        if not state["known"]:
            raise NotFound("no endpoint of this user is granted that queue", argument="queue", op="queue_resume")
        return {"queue": queue, "paused_at": None, "changed": False}

    async def queue_overview(self, caller: Human) -> list[dict]:
        """Read: each of the human's queues with its todos counted by state and its pause."""
        return await self._fetch(query("overview_counts"), {"user_id": caller.user_id}, op="overview")

    async def queue_outcomes(self, caller: Human, *, buckets: int, bucket_seconds: int,
                             now: datetime | None = None) -> list[dict]:
        """Read: attempts of the human's todos closed in the last `buckets` buckets of
        bucket_seconds (a multiple of five minutes, aligned to UTC), counted by queue, outcome
        and bucket (0: the one holding now), from the counts each close wrote."""
        return await self._fetch(query("overview_outcomes"), {"user_id": caller.user_id, "now": now,
                                                          "buckets": buckets,
                                                          "bucket_seconds": bucket_seconds}, op="overview")
