"""Which queues each human has paused, cached in the process, so that a claim_next costs no
look at queue_pauses when its human has paused nothing (a claim's hottest statement).

A pause or resume commits with a `queue_paused` / `queue_resumed` notification, which every
server process receives through its LISTEN fan-out and which drops that human's entry here;
the process that made the change drops it at once. With the cache answering, claim_next
asks only for the queues that are not paused, through statements with no pause check.
The same three rules as the endpoint cache keep a missed notification from letting a
paused queue be drained:

- while the LISTEN connection is down, the cache answers nothing (the claim statements that
  check queue_pauses run instead);
- after it reconnects, the cache is emptied;
- a lookup that a pause or resume overtook (the generation moved) is not stored.

A claim in another process in the milliseconds between a pause's commit and the arrival of
its notification may still take a todo of that queue, as a claim that began just before
the pause would.
"""

from __future__ import annotations

from board.live.fanout import Fanout


class PauseCache:
    def __init__(self, store, fanout: Fanout, *, max_entries: int = 10_000):
        self.store = store
        self.fanout = fanout
        self.max_entries = max_entries
        self._paused: dict[int, frozenset[str]] = {}
        self._generation = 0
        fanout.on_control(self.on_control)

    async def paused_queues(self, user_id: int) -> frozenset[str] | None:
        """The human's paused queues, or None when the cache cannot vouch for them."""
        if not self.fanout.connected.is_set():
            return None
        known = self._paused.get(user_id)
        if known is not None:
            return known
        generation = self._generation
        queues = await self.store.queues_paused_by(user_id)
        if generation == self._generation and self.fanout.connected.is_set():
            if len(self._paused) >= self.max_entries:
                self._paused.pop(next(iter(self._paused)))  # the oldest insertion
            self._paused[user_id] = queues
        return queues

    def forget(self, user_id: int) -> None:
        """This human's pauses changed (here, or in another process)."""
        self._generation += 1
        self._paused.pop(user_id, None)

    def on_control(self, event: dict) -> None:
        kind = event.get("kind")
        if kind in ("queue_paused", "queue_resumed"):
            user = event.get("user")
            if isinstance(user, int):
                self.forget(user)
            else:  # not ours to read: trust nothing cached
                self._generation += 1
                self._paused.clear()
        elif kind == "resync":
            self._generation += 1
            self._paused.clear()
