"""What the agents and the planner see of the running demo: `Stage`, which `runner.Demo`
provides. Typed here, below the agents, the planner and the runner, so none of them imports
another in a circle (pyproject.toml's acyclic contract over board.demo holds it)."""

from __future__ import annotations

import asyncio
import random
from typing import Protocol

from board.demo.seeding import DemoState, Limits


class Stage(Protocol):
    stop: asyncio.Event  # set once: the agents release what they hold and leave
    settled: bool  # every outcome has been shown; the reviewer waits longer for a person
    local_url: str  # the server, for each agent's Worker
    token: str | None  # the demo endpoint's bearer token
    limits: Limits
    state: DemoState  # demo.json: the ids the planner added

    def saw(self, outcome: str) -> None:
        """An agent brought about `outcome` (an attempt outcome, or dead_lettered)."""

    def breather(self, rng: random.Random) -> float:
        """The break an agent takes between todos."""

    async def remove_finished(self, todo_ids: list[str]) -> int:
        """Delete these of the demo's todos that have finished; how many went."""
