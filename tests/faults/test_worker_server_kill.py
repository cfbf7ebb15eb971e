"""kill -9 of `switchboard serve` while `switchboard work` is closing a todo: the worker
reconnects with backoff, sends the unanswered close again with the same lease token, the
server answers it as a replay, and the fault suite's invariants hold (nothing done twice,
nothing lost). The worker reaches the server through a small TCP relay, so the test can hold
back the server's replies: the close commits, its reply never arrives, then the server dies."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time

from tests.acceptance.worker_helpers import WorkerProcess
from tests.conftest import free_port
from tests.faults import harness as h

FAST_COMMAND = ["/bin/sh", "-c", 'cat > /dev/null; echo "{\\"ok\\": true}"']
# Marks that it started (so the test knows the claim's reply has arrived), works a second, done.
MARKING_COMMAND = ["/bin/sh", "-c", 'cat > /dev/null; touch "$MARKS/$SWITCHBOARD_TODO_ID"; sleep 1; echo "{}"']


class Relay:
    """A TCP relay to the server's port. While `hold` is set, replies from the server are kept
    back (requests still go through); a connection the server drops is dropped, held bytes and all."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.port = free_port()
        self.hold = asyncio.Event()
        self.server: asyncio.base_events.Server | None = None
        self.tasks: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def close(self) -> None:
        self.server.close()
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _accept(self, c_reader, c_writer) -> None:
        try:
            s_reader, s_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            c_writer.close()
            return
        up = asyncio.create_task(self._pump(c_reader, s_writer, hold=False))
        down = asyncio.create_task(self._pump(s_reader, c_writer, hold=True))
        self.tasks |= {up, down}
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        for t in (up, down):
            t.cancel()
        for w in (c_writer, s_writer):
            with contextlib.suppress(Exception):
                w.transport.abort()
        self.tasks -= {up, down}

    async def _pump(self, reader, writer, *, hold: bool) -> None:
        while data := await reader.read(65536):
            if hold and self.hold.is_set():
                continue  # kept back: never delivered
            writer.write(data)
            await writer.drain()


async def done_ids(url: str) -> set[str]:
    return {r["id"] for r in await h.rows(url, "SELECT id FROM todos WHERE state = 'done'")}


async def test_a_close_in_flight_when_the_server_is_killed_is_replayed_and_nothing_is_done_twice(
        db_url, store, size, tmp_path):
    started = time.monotonic()
    token, agent = await h.vend(store)
    [first] = await h.add_todos(store, agent, 1)
    server = h.ServerProcess(db_url, tmp_path / "server.log")
    await server.start()
    relay = Relay(server.port)
    await relay.start()
    marks = tmp_path / "marks"
    marks.mkdir()
    worker = WorkerProcess(relay.url, token, MARKING_COMMAND, "--queue", "work", "--max-todos", "4",
                           env={"MARKS": str(marks)})
    try:
        deadline = time.monotonic() + 30
        while not (marks / first).exists():  # claimed, and its command is running
            assert time.monotonic() < deadline and worker.proc.poll() is None, worker.output
            await asyncio.sleep(0.02)
        relay.hold.set()  # from here on the server's replies are held back: the close's among them
        deadline = time.monotonic() + 20
        while first not in await done_ids(db_url):  # the close committed; its reply is held back
            assert time.monotonic() < deadline, f"the close never committed:\n{worker.output}"
            await asyncio.sleep(0.05)
        server.kill()
        killed = time.monotonic()
        relay.hold.clear()
        await server.start()
        line = await worker.wait_for_line(f"completed {first} in .*replayed", timeout=60)
        recovered = time.monotonic() - killed
        rest = await h.add_todos(store, agent, 3)
        for todo_id in rest:
            await worker.wait_for_line(f"completed {todo_id}", timeout=30)
        assert await worker.wait(30) == 0, worker.output
    finally:
        worker.kill()
        await relay.close()
        await server.stop()
    counts = await h.check_invariants(db_url, todos=4, drained=True)
    h.report("worker: close in flight at kill -9", size, recovered_s=round(recovered, 2),
             attempts=counts["attempts"], seconds=round(time.monotonic() - started, 1))
    assert "4 claimed, 4 completed, 0 failed, 0 released, 0 lost" in worker.output, worker.output
    assert line and token not in worker.output


async def test_kill_9_again_and_again_while_a_worker_drains_loses_nothing(db_url, store, size, tmp_path):
    started = time.monotonic()
    n, kills = (60, 2) if size.name == "ci" else (400, 10)
    token, agent = await h.vend(store)
    await h.add_todos(store, agent, n)
    server = h.ServerProcess(db_url, tmp_path / "server.log")
    await server.start()
    # A short lease: a claim whose reply the kill swallowed lapses soon and is claimed again.
    worker = WorkerProcess(server.url, token, FAST_COMMAND, "--queue", "work", "--concurrency", "4",
                           "--lease-seconds", "3")
    try:
        await worker.wait_for_line(r"\bworking on ")
        for k in range(1, kills + 1):
            await h.wait_for_done(db_url, n * k // (kills + 1), timeout=120)
            server.kill()
            await server.start()
        await h.wait_for_done(db_url, n, timeout=180)
        worker.signal(signal.SIGTERM)
        assert await worker.wait(30) == 0, worker.output
    finally:
        worker.kill()
        await server.stop()
    counts = await h.check_invariants(db_url, todos=n, drained=True)
    replayed = worker.output.count("replayed after a reconnect")
    h.report("worker: kill -9 while draining", size, kills=kills, todos=n, attempts=counts["attempts"],
             replayed=replayed, lost=worker.output.count(" lost "), seconds=round(time.monotonic() - started, 1))
    assert token not in worker.output
