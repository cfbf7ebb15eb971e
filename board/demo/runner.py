"""The demo's orchestration: bind the port, start the server and its embedded Postgres in
this process, seed the credentials, print the banner, run the planner and the agents, notice
when every outcome has been shown (and settle), and stop everything cleanly on Ctrl-C,
SIGTERM or --duration."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import socket
from typing import Any, AsyncIterator

from board.config import Settings
from board.demo import banner
from board.demo.agents import workers
from board.demo.lock import DemoLock, DemoRunning
from board.demo.planner import Planner
from board.demo.seeding import STATE_FILE, Credentials, DemoState, Limits, demo_data_dir, demo_settings, ensure_credentials
from board.store.vocabulary import BULK_MAX

log = logging.getLogger("switchboard.demo")

# What the Board must have shown before the demo settles: attempts with these outcomes, and
# a dead letter.
SHOWN_BEFORE_SETTLING = frozenset({"completed", "failed", "released", "reaped", "lease_expired", "dead_lettered"})
# The first minute is the lively one however soon every outcome is out: the demo settles no
# sooner than this many seconds after the agents start.
WARMUP_SECONDS = 60.0
# Once settled, each agent takes a break of this many seconds (at random) between todos:
# a few finished todos every ten seconds instead of one a second.
BREAK_SECONDS = (4.0, 8.0)


class _Server:
    """uvicorn's Server without its own signal handling: the demo owns SIGINT and SIGTERM,
    and stops the agents before the server."""

    def __new__(cls, config):
        import uvicorn

        class QuietServer(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self):
                yield

        return QuietServer(config)


class Demo:
    """One run of the demo; to its agents and planner, the `stage.Stage` they play on."""

    def __init__(self, settings: Settings, *, host: str, port: int, duration: float | None,
                 limits: Limits | None = None):
        self.data_dir = demo_data_dir().resolve()
        self.state = DemoState.load(self.data_dir / STATE_FILE)
        self.settings = demo_settings(settings, self.data_dir, self.state.data["secret_key"])
        self.limits = limits or Limits.from_env()
        self.ignored_database_url = bool(settings.database_url)
        self.host, self.port, self.duration = host, port, duration
        public_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        if ":" in public_host:
            public_host = f"[{public_host}]"
        self.base_url = f"http://{public_host}:{port}"
        self.local_url = f"http://127.0.0.1:{port}" if host in ("0.0.0.0", "127.0.0.1", "") else self.base_url
        self.stop = asyncio.Event()
        self.signals = 0
        self.tasks: list[asyncio.Task] = []
        self.token: str | None = None
        self.creds: Credentials | None = None
        self.store = None
        self.shown: set[str] = set()
        self.settled = False
        self._settling: asyncio.TimerHandle | None = None
        self._agents_started = 0.0

    # signals

    def _on_signal(self, signum: int) -> None:
        self.signals += 1
        name = signal.Signals(signum).name
        if self.signals == 1:
            banner.stopping(name)
            self.stop.set()
        else:
            banner.skipping_goodbyes(name)
            for task in self.tasks:
                task.cancel()

    def _on_duration(self) -> None:
        if not self.stop.is_set():
            banner.stopping(f"--duration {self.duration:g} s is up")
            self.stop.set()

    # settling

    def saw(self, outcome: str) -> None:
        """An agent brought about `outcome` (an attempt outcome, or dead_lettered). Once
        every outcome has been shown and the first minute is over, the demo settles."""
        self.shown.add(outcome)
        if self.settled or self._settling is not None or not SHOWN_BEFORE_SETTLING <= self.shown:
            return
        loop = asyncio.get_running_loop()
        self._settling = loop.call_later(max(0.0, self._agents_started + WARMUP_SECONDS - loop.time()), self._settle)

    def _settle(self) -> None:
        if not self.stop.is_set():
            self.settled = True
            banner.settled(self.limits)

    def breather(self, rng: random.Random) -> float:
        """The break an agent takes between todos: none until the demo has settled."""
        return rng.uniform(*BREAK_SECONDS) if self.settled else 0.0

    async def remove_finished(self, todo_ids: list[str]) -> int:
        """Delete these todos of the demo's, if they have finished (done, canceled, dead
        letters), with their attempts: the demo human's own delete, as on the Board, so a
        todo that is not finished, or not the demo human's, is left alone. Forgets them."""
        from board.store.store import Human

        human = Human(self.creds.user_id, self.creds.username)
        removed = 0
        for start in range(0, len(todo_ids), BULK_MAX):
            done = await self.store.todos_delete(human, todo_ids[start:start + BULK_MAX])
            removed += len(done["deleted"])
            self.state.forget(t["id"] for t in done["deleted"])
        return removed

    # MCP

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[Any]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {self.token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(15.0, read=30.0)) as http:
            async with Client(streamable_http_client(self.local_url + "/mcp", http_client=http)) as client:
                yield client

    # running

    async def run_agents(self) -> None:
        self._agents_started = asyncio.get_running_loop().time()
        planner = Planner(self, "planner")
        planner_task = asyncio.create_task(planner.main(), name="demo-planner")
        self.tasks.append(planner_task)
        waiter = asyncio.create_task(planner.seeded.wait())
        stopper = asyncio.create_task(self.stop.wait())
        await asyncio.wait({waiter, stopper, planner_task}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if not self.stop.is_set() and not planner_task.done():
            for agent in workers(self):
                self.tasks.append(asyncio.create_task(agent.main(), name=f"demo-{agent.name}"))
        await stopper
        # Every agent sees the stop, releases what it holds and disconnects.
        done, pending = await asyncio.wait(self.tasks, timeout=10)
        for task in pending:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.warning("agent %s ended with %r", task.get_name(), task.exception())

    def _bind(self) -> socket.socket | None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as e:
            sock.close()
            banner.error(f"cannot listen on {self.host}:{self.port}: {e.strerror or e}; try another port with --port")
            return None
        sock.listen(128)
        sock.setblocking(False)
        return sock

    async def main(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_signal, sig)
        lock = DemoLock(self.data_dir)
        try:  # before the port: a second demo here is told which one runs, whatever its port
            lock.acquire(self.base_url)
        except DemoRunning as e:
            banner.error(str(e))
            return 2
        try:
            return await self._main(loop)
        finally:
            lock.release()  # after the server and its Postgres have stopped

    async def _main(self, loop: asyncio.AbstractEventLoop) -> int:
        import uvicorn

        from board.app import ServerScope, create_app

        sock = self._bind()
        if sock is None:
            return 2
        if self.ignored_database_url:
            banner.ignoring_database_url()
        banner.starting(self.data_dir / "pgdata", fresh=not (self.data_dir / "pgdata" / "PG_VERSION").exists())
        app = create_app(self.settings)
        config = uvicorn.Config(ServerScope(app), lifespan="on", log_level="warning", access_log=False, log_config=None,
                                timeout_graceful_shutdown=3)
        server = _Server(config)

        async def serve() -> None:
            try:
                await server.serve(sockets=[sock])
            except SystemExit as e:  # uvicorn exits on a failed startup; keep it a plain error
                raise RuntimeError(f"the server did not start (exit {e.code})") from None

        serve_task = asyncio.create_task(serve(), name="demo-server")
        while not server.started:
            if serve_task.done():
                sock.close()
                try:
                    serve_task.result()
                except Exception as e:
                    banner.error(str(e))
                return 1
            await asyncio.sleep(0.05)
        if self.duration is not None:
            loop.call_later(self.duration, self._on_duration)
        try:
            if not self.stop.is_set():  # Ctrl-C while starting: straight to the shutdown
                self.store = app.state.runtime.store
                self.creds = creds = await ensure_credentials(self.store, self.state)
                self.token = creds.token
                banner.banner(self.base_url, self.data_dir, creds, self.limits, self.duration)
                await self.run_agents()
        finally:
            # As `switchboard serve` does on its signal: every open Board and MCP listen stream
            # is told to end first, so the server's graceful shutdown does not wait them out
            # and cancel them (uvicorn logs that as an error with a traceback).
            runtime = getattr(app.state, "runtime", None)
            if runtime is not None:
                runtime.fanout.shutdown()
            server.should_exit = True
            with contextlib.suppress(Exception):
                await serve_task
            sock.close()
        banner.stopped()
        return 0


def run_demo(settings: Settings, *, host: str = "127.0.0.1", port: int = 8000, duration: float | None = None) -> int:
    """Run the demo until Ctrl-C, SIGTERM or `duration` seconds; returns the exit code."""
    # The terminal is for the agents' lines: only warnings from the server and libraries.
    logging.getLogger().setLevel(logging.WARNING)
    for name in ("switchboard", "uvicorn", "uvicorn.error", "mcp", "httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("uvicorn.access").disabled = True
    demo = Demo(settings, host=host, port=port, duration=duration)  # a bad SWITCHBOARD_DEMO_* raises Invalid
    return asyncio.run(demo.main())
