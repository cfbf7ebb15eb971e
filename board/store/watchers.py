"""Presence (board/store/sql/watchers.sql), a part of board.store.store.Store: who this
process has live listeners for (board/live/presence.py)."""

from __future__ import annotations

from board.store.base import StoreBase
from board.store.queries import query

class Watchers(StoreBase):
    async def watchers_hold(self, process: str, users: list[int], ttl_seconds: float) -> list[int]:
        """Records or renews the process's row for each human; returns those whose row was
        added rather than renewed (absent until now)."""
        rows = await self._fetch(query("watchers_hold"), {"process": process, "users": users,
                                                          "ttl_seconds": ttl_seconds}, op="presence")
        return [r["user_id"] for r in rows if r["added"]]

    async def watchers_drop(self, process: str, users: list[int]) -> None:
        await self._fetch(query("watchers_drop"), {"process": process, "users": users}, op="presence")

    async def watchers_expire(self) -> None:
        await self._fetch(query("watchers_expire"), {}, op="presence")

    async def watchers_in_flight(self) -> list[str]:
        """The other transactions that may have checked watchers before now (by virtual id)."""
        row = await self._fetch(query("watchers_in_flight"), {}, op="presence", one=True)
        return list(row["vxids"])

    async def watchers_in_flight_left(self, vxids: list[str]) -> int:
        row = await self._fetch(query("watchers_in_flight_left"), {"vxids": vxids}, op="presence", one=True)
        return row["n"]
