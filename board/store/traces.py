"""The traces' read (board/store/sql/traces.sql), a part of board.store.store.Store: what the
span of each closed attempt carries (board/ops/tracing.py)."""

from __future__ import annotations

from board.store.base import StoreBase
from board.store.queries import query


class Traces(StoreBase):
    async def attempts_traced(self, closed: list[tuple[str, int]]) -> list[dict]:
        """The closed attempts named by (todo id, seq): claimed_at, ended_at, queue, outcome,
        disposition, died, the claiming endpoint and agent, the claim's traceparent. An
        attempt pruned or deleted since its close is left out."""
        return await self._fetch(query("attempts_traced"), {"todo_ids": [t for t, _ in closed],
                                                            "seqs": [s for _, s in closed]}, op="traces")
