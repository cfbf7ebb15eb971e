"""The planner: keeps the queues stocked, and keeps the Board to the demo's bounds.

It is the only one that adds todos, so it is where the bounds hold. It remembers the id of
every todo it adds, in demo.json (`DemoState.added`), so a second run on the same data dir
knows them too: the bounds count only those, and only those are ever removed. A todo the
person adds (on the Board, signed in as the demo user, or through an endpoint of their own)
is never counted and never removed by the demo. Before adding it takes a census of the
demo's todos (list_todos over MCP, every page, kept to the ids it remembers):

- live todos (pending, held, or failed with a retry to come) must stay at or under
  `Limits.live_todos`: a queue is stocked only with what fits (part of a round, or nothing
  until some work finishes);
- todos in all must stay at or under `Limits.max_todos`: when the new ones would not fit,
  the demo's oldest finished todos (done, canceled, dead letters; oldest by when they last
  changed) are removed first, by id, through the store's delete of a human's ended todos
  (`Store.todos_delete`, as the demo user). The store deletes their attempts with them and
  tells the Board, which drops their rows.

The agents never add todos, and finishing one does not change the count, so neither bound
is passed between censuses.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from board.demo import banner
from board.demo.agents import SimAgent
from board.demo.seeding import QUEUES, TRICKLE, Seed
from board.demo.stage import Stage
from board.store.vocabulary import HOLDER_STATES, LIST_LIMIT_MAX

OPEN_STATES = ("pending", *HOLDER_STATES)


def changed_at(todo: dict) -> datetime:
    return datetime.fromisoformat(todo["updated_at"])


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def is_finished(todo: dict) -> bool:
    """Done, canceled or a dead letter: nothing more will happen to it."""
    return todo["state"] in ("done", "canceled") or bool(todo.get("dead_letter"))


class Planner(SimAgent):
    """Adds a round of todos to a queue with nothing pending (one todo to a TRICKLE queue
    with nothing open), within the demo's limits."""

    def __init__(self, demo: Stage, name: str):
        super().__init__(demo, name)
        self.seeded = asyncio.Event()
        self.stocked_at: dict[str, float] = {}
        self.holding = False

    async def step(self) -> None:
        hungry = []
        for queue in QUEUES:
            if queue in TRICKLE:
                if not await self.has(queue, *OPEN_STATES):
                    hungry.append(queue)
            elif not await self.has(queue, "pending"):
                hungry.append(queue)
        # The queue that has waited longest first, so a tight live bound starves none.
        hungry.sort(key=lambda q: self.stocked_at.get(q, 0.0))
        for queue in hungry:
            want = 1 if queue in TRICKLE else len(QUEUES[queue])
            room, removed = await self.make_room(want)
            if room == 0:
                self.hold(queue)
                break
            self.holding = False
            made_room = ""
            if removed:
                made_room = "made room: removed the " + ("oldest finished todo" if removed == 1 else
                                                         f"{removed} oldest finished todos")
            if queue in TRICKLE:
                await self.trickle(queue, QUEUES[queue], made_room)
            else:
                await self.seed(queue, QUEUES[queue][:room], made_room)
            self.stocked_at[queue] = time.monotonic()
        self.seeded.set()
        await self.pause(1.0)

    async def has(self, queue: str, *states: str) -> bool:
        for state in states:
            if (await self.call("list_todos", queue=queue, state=state, limit=1)).get("todos"):
                return True
        return False

    # the bounds

    async def census(self) -> list[dict]:
        """Every todo the demo added that is still there, newest first. Every todo the demo
        endpoint sees is read (the person's own, added on the Board as the demo user, too);
        the demo's are those whose ids it remembers, and an id no longer there (deleted on
        the Board, or by retention) is forgotten."""
        todos: list[dict] = []
        cursor = None
        while True:
            page = await self.call("list_todos", limit=LIST_LIMIT_MAX, cursor=cursor)
            todos += page.get("todos", [])
            cursor = page.get("next_cursor")
            if not cursor:
                break
        state = self.demo.state
        present = {t["id"] for t in todos}
        state.forget([i for i in state.added() if i not in present])
        ours = set(state.added())
        return [t for t in todos if t["id"] in ours]

    async def make_room(self, want: int) -> tuple[int, int]:
        """How many todos may be added now (0 to `want`), and how many of the demo's finished
        todos were removed to make room under the bound on todos in all (the oldest first)."""
        limits = self.demo.limits
        todos = await self.census()
        live = sum(not is_finished(t) for t in todos)
        want = min(want, limits.live_todos - live)
        if want <= 0:
            return 0, 0
        removed = 0
        excess = len(todos) + want - limits.max_todos
        if excess > 0:
            finished = sorted((t for t in todos if is_finished(t)), key=lambda t: (changed_at(t), t["id"]))
            if finished:
                removed = await self.demo.remove_finished([t["id"] for t in finished[:excess]])
                todos = await self.census()
            want = min(want, limits.max_todos - len(todos))
        return max(0, want), removed

    def hold(self, queue: str) -> None:
        if not self.holding:
            limits = self.demo.limits
            banner.action(self.name, "waiting", queue,
                          f"{limits.live_todos} live todos is the bound: more when some work finishes")
        self.holding = True

    # adding

    async def add(self, queue: str, seed: Seed, n: int) -> dict:
        title = seed.title if n == 1 else f"{seed.title} (round {n})"
        todo = await self.call("add_todo", queue=queue, title=title, payload=seed.payload,
                               max_attempts=seed.max_attempts)
        self.demo.state.remember(todo["id"])
        return todo

    async def seed(self, queue: str, seeds: tuple[Seed, ...], detail: str = "") -> None:
        rounds = self.demo.state.data["seed_rounds"]
        n = int(rounds.get(queue, 0)) + 1
        for s in seeds:
            await self.add(queue, s, n)
        rounds[queue] = n
        self.demo.state.save()
        banner.action(self.name, "added", queue, plural(len(seeds), "todo") + (f" (round {n})" if n > 1 else ""),
                      detail)

    async def trickle(self, queue: str, seeds: tuple[Seed, ...], detail: str = "") -> None:
        counts = self.demo.state.data.setdefault("trickled", {})
        i = int(counts.get(queue, 0))
        todo = await self.add(queue, seeds[i % len(seeds)], i // len(seeds) + 1)
        counts[queue] = i + 1
        self.demo.state.save()
        self.say("added", todo, detail)

