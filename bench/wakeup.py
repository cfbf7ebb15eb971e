"""Agents woken by the doorbell: add_todo -> ring -> claim_next, with 1, 10 and 100 idle agents
listening over MCP, in both protocol generations, beside one get_todo round trip.

A real server (the app under uvicorn in a child process, as bench/mcp_roundtrip.py runs it)
and, per configuration, one endpoint whose N agents each hold an mcp.Client (the Python
SDK) listening for switchboard://todos: a 2026-07-28 client through subscriptions/listen, a
2025-11-25 client on its session's GET stream. An agent that hears a ring calls claim_next
and completes what it got. Each round adds one todo through the store (the clock starts
just before) and waits until it is claimed: the winner's time is when its claim_next
returned the todo; the last answered is when the last agent that was rung in the round got
its claim_next answer. Rounds of every configuration are interleaved; a probe client's
get_todo round trip is timed in the same rounds. --margin sets the server's
SWITCHBOARD_DOORBELL_RING_MARGIN (a huge one rings every agent, as before the budget).
--processes runs that many server processes on the one database and spreads each
configuration's agents over them in turn (the probe on the first): a process rings its own
doorways, so each process rings 1 + margin of the agents it holds, and the todo's
notification reaches each process through its own LISTEN connection.

    python bench/wakeup.py                                 # 1, 10 and 100 agents, 30 rounds each
    python bench/wakeup.py --agents 1 10 --rounds 10 --generations modern
    python bench/wakeup.py --agents 100 --processes 1 2 4 --generations modern
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.mcp_roundtrip import free_port, scratch_database  # noqa: E402
from board.config import Settings  # noqa: E402
from board.store import store as st  # noqa: E402
from board.store import vocabulary  # noqa: E402
from board.store.db import migrate, open_pool  # noqa: E402

TODOS = "switchboard://todos"

SERVE = """
import logging, sys
sys.path.insert(0, sys.argv[1])
import uvicorn
from board import app
from board.config import Settings
for name in ("switchboard", "mcp", "litestar", "uvicorn"):
    logging.getLogger(name).setLevel(logging.WARNING)
settings = Settings(database_url=sys.argv[2], secret_key="bench-secret-key-0123456789", rate_limit_per_second=0,
                    doorbell_heartbeat_seconds=0, doorbell_gate_seconds=0, doorbell_ring_margin=int(sys.argv[4]))
uvicorn.run(app.create_app(settings), host="127.0.0.1", port=int(sys.argv[3]), log_level="warning",
            loop=app.UVICORN_LOOP, http=app.UVICORN_HTTP, timeout_graceful_shutdown=2)
"""


@contextlib.contextmanager
def server(url: str, margin: int):
    import socket

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVE, str(ROOT), url, str(port), str(margin)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError("the server exited during startup")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start in 60 s")
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


class Round:
    def __init__(self, todo_id: str, started: float):
        self.todo_id, self.started = todo_id, started
        self.won: float | None = None
        self.answered: list[float] = []
        self.claimed = asyncio.Event()


class Agent:
    """One listening agent: on each ring, claim_next, and complete what it got."""

    def __init__(self, config: "Config", port: int, token: str, generation: str):
        self.config, self.port, self.token, self.generation = config, port, token, generation
        self.rings: asyncio.Queue = asyncio.Queue()

    async def open(self, stack: contextlib.AsyncExitStack) -> None:
        import httpx2
        import mcp_types as types
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {self.token}"}, timeout=httpx2.Timeout(60.0, read=3600.0)))
        transport = streamable_http_client(f"http://127.0.0.1:{self.port}/mcp", http_client=http)
        if self.generation == "legacy":
            async def handler(message) -> None:
                if isinstance(message, types.ResourceUpdatedNotification):
                    self.rings.put_nowait(str(message.params.uri))

            self.client = await stack.enter_async_context(Client(transport, mode="legacy", message_handler=handler))
            await self.drain_once()
        else:
            self.client = await stack.enter_async_context(Client(transport))
            await self.drain_once()
            sub = await stack.enter_async_context(self.client.listen(resource_subscriptions=[TODOS]))

            async def collect() -> None:
                async for event in sub:
                    self.rings.put_nowait(event.uri)

            task = asyncio.create_task(collect())
            stack.callback(task.cancel)
        task = asyncio.create_task(self.work())
        stack.callback(task.cancel)

    async def drain_once(self) -> None:
        """An agent idles after finding its queue empty: one claim_next first, as it would have
        called. The SDK client lists the tools and compiles claim_next's output-schema
        validator on a tool's first call (tens of ms of CPU); without this every rung agent
        of a round paid it, which is the client's start-up, not the wake-up."""
        await self.client.call_tool("claim_next", {})

    async def work(self) -> None:
        while True:
            await self.rings.get()
            result = await self.client.call_tool("claim_next", {})
            now = time.perf_counter()
            current = self.config.current
            got = (result.structured_content or {}).get("todo")
            if current is not None:
                current.answered.append(now)
                if got and got["id"] == current.todo_id and current.won is None:
                    current.won = now
                    current.claimed.set()
            if got:
                await self.client.call_tool("complete", {"id": got["id"]})


class Config:
    def __init__(self, generation: str, agents: int, processes: int = 1):
        self.generation, self.agents, self.processes = generation, agents, processes
        self.current: Round | None = None
        self.rounds: list[Round] = []
        self.get_ms: list[float] = []


async def run(args) -> list[Config]:
    configs: list[Config] = []
    with scratch_database("bench_wakeup") as (url, _):
        await migrate(url)
        pool = await open_pool(url, min_size=1, max_size=4)
        store = st.Store(pool, Settings())
        user = await store.user_insert("bench", "not-a-real-hash")
        with contextlib.ExitStack() as servers:
            ports = [servers.enter_context(server(url, args.margin)) for _ in range(max(args.processes))]
            for generation in args.generations:
                batch = [Config(generation, n, p) for n in args.agents for p in args.processes]
                configs += batch
                async with contextlib.AsyncExitStack() as stack:
                    agents_of: dict[Config, st.Agent] = {}
                    for config in batch:
                        queue = "w" + uuid.uuid4().hex[:8]
                        _, token = await store.endpoint_vend(user["id"], name=queue, agent_id="bench",
                                                             queues=[queue], scope=list(vocabulary.VERBS))
                        agents_of[config] = await store.endpoint_authenticate(token)
                        config.queue = queue
                        for i in range(config.agents):
                            await Agent(config, ports[i % config.processes], token, generation).open(stack)
                        config.probe = await Probe.open(stack, ports[0], token)
                    await asyncio.sleep(1.0)  # every listen stream and GET stream is open
                    for r in range(args.rounds):
                        for config in batch[r % len(batch):] + batch[:r % len(batch)]:
                            await one_round(store, agents_of[config], config)
                    print(f"  {generation}: {args.rounds} rounds of " + ", ".join(
                        f"{c.agents} agents on {c.processes} process(es)" for c in batch) + " done", flush=True)
        await pool.close()
    return configs


class Probe:
    """A client that only reads: one get_todo round trip timed per round."""

    @classmethod
    async def open(cls, stack: contextlib.AsyncExitStack, port: int, token: str) -> "Probe":
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        probe = cls()
        http = await stack.enter_async_context(httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60.0)))
        probe.client = await stack.enter_async_context(
            Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)))
        return probe

    async def get(self, todo_id: str) -> float:
        started = time.perf_counter()
        await self.client.call_tool("get_todo", {"id": todo_id})
        return (time.perf_counter() - started) * 1000


async def one_round(store: st.Store, agent: st.Agent, config: Config) -> None:
    started = time.perf_counter()
    todo = await store.todo_add(agent, queue=config.queue, title="wake up")
    current = Round(todo["id"], started)
    config.current = current
    await asyncio.wait_for(current.claimed.wait(), timeout=30)
    await asyncio.sleep(0.3)  # the other rung agents' answers
    config.current = None
    config.rounds.append(current)
    config.get_ms.append(await config.probe.get(todo["id"]))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--processes", type=int, nargs="+", default=[1], help="server processes the agents spread over")
    ap.add_argument("--generations", nargs="+", choices=["modern", "legacy"], default=["modern", "legacy"])
    ap.add_argument("--margin", type=int, default=Settings().doorbell_ring_margin,
                    help="the server's SWITCHBOARD_DOORBELL_RING_MARGIN (default: the shipped one)")
    args = ap.parse_args()
    configs = asyncio.run(run(args))
    print()
    print(f"add_todo -> ring -> claim_next, {args.rounds} rounds per configuration, interleaved; ring margin "
          f"{args.margin}; ms")
    head = (f"{'generation':<10} {'agents':>6} {'procs':>5} | {'winner p50':>10} {'p99':>7} | {'last p50':>8} {'p99':>7} | "
            f"{'answered':>8} | {'get_todo p50':>12} {'p99':>7} | {'ratio':>5}")
    print(head)
    print("-" * len(head))
    for c in configs:
        won = [(r.won - r.started) * 1000 for r in c.rounds]
        last = [(max(r.answered) - r.started) * 1000 for r in c.rounds]
        answered = sum(len(r.answered) for r in c.rounds) / max(1, len(c.rounds))
        print(f"{c.generation:<10} {c.agents:>6} {c.processes:>5} | {pct(won, .5):>10.1f} {pct(won, .99):>7.1f} | "
              f"{pct(last, .5):>8.1f} {pct(last, .99):>7.1f} | {answered:>8.1f} | {pct(c.get_ms, .5):>12.1f} "
              f"{pct(c.get_ms, .99):>7.1f} | {pct(won, .99) / pct(c.get_ms, .99):>5.2f}")
    print("answered: claim_next calls per round; ratio: the winner's p99 over get_todo's p99 (the goal: at most 3 "
          "with 100 agents).")


if __name__ == "__main__":
    main()
