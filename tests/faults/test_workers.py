"""`switchboard serve --workers 2`: two serving processes on one port under uvicorn's
supervisor. kill -9 of one while agents drain: it is replaced (a new process answers on the
port), the agents reconnect and go on, nothing is lost, every todo is done exactly once,
and SIGTERM to the parent stops it all cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from pathlib import Path

from tests.faults import harness as h

DEADLINE = 60.0


def workers_of(parent: int) -> set[int]:
    """The serving processes of a `serve --workers N` (uvicorn spawns them with
    multiprocessing; its resource tracker is a child too, and not one)."""
    out = set()
    for child in Path(f"/proc/{parent}/task/{parent}/children").read_text().split():
        try:
            if b"multiprocessing.spawn" in Path(f"/proc/{child}/cmdline").read_bytes():
                out.add(int(child))
        except FileNotFoundError:  # gone meanwhile
            pass
    return out


def answered_by(port: int, pids: set[int]) -> int | None:
    """Which of `pids` answers a new connection to the port: the one holding the server's
    side of it (found by its socket's inode in /proc/net/tcp)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert b" 200 " in sock.recv(4096).split(b"\r\n", 1)[0]
        mine = sock.getsockname()[1]
        inode = None
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port and int(fields[2].split(":")[1], 16) == mine:
                inode = fields[9]
        target = f"socket:[{inode}]"
        for pid in pids:
            try:
                if any(os.readlink(f"/proc/{pid}/fd/{fd}") == target for fd in os.listdir(f"/proc/{pid}/fd")):
                    return pid
            except (FileNotFoundError, PermissionError):
                pass
    return None


async def answering(server: h.ServerProcess, pids: set[int]) -> None:
    """Wait until each of `pids` has answered a connection of its own."""
    seen: set[int] = set()
    deadline = time.monotonic() + DEADLINE
    while not pids <= seen:
        assert time.monotonic() < deadline, f"only {sorted(seen)} of {sorted(pids)} answered within {DEADLINE} s"
        seen.add(await asyncio.to_thread(answered_by, server.port, pids))


async def replaced(parent: int, gone: int, n: int) -> set[int]:
    deadline = time.monotonic() + DEADLINE
    while True:
        now = workers_of(parent)
        if gone not in now and len(now) == n:
            return now
        assert time.monotonic() < deadline, f"the worker killed was not replaced within {DEADLINE} s: {now}"
        await asyncio.sleep(0.05)


async def test_serve_with_two_workers_replaces_one_killed_with_kill_9_under_load_and_loses_nothing(
        db_url, store, size, tmp_path):
    started = time.monotonic()
    n = size.kill_todos
    token, agent = await h.vend(store)
    await h.add_todos(store, agent, n)
    server = h.ServerProcess(db_url, tmp_path / "server.log", args=("--workers", "2"))
    await server.start()
    tally, statuses = h.Tally(), h.Statuses()
    agents = [h.Agent(f"w{i}", server.url, token, tally, statuses, generation="modern", fenced=i % 2 == 0,
                      lease=3.0 + (i % 3), seed=i) for i in range(6)]
    try:
        first = await replaced(server.proc.pid, -1, 2)
        await answering(server, first)
        for a in agents:
            a.start()
        await h.wait_for_done(db_url, n // 3, timeout=120)
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        now = await replaced(server.proc.pid, victim, 2)
        [newcomer] = now - first
        await answering(server, {newcomer})
        back = time.monotonic() - killed
        await h.wait_for_done(db_url, n, timeout=180)
    finally:
        await h.stop_agents(agents)
        await server.stop()
    log = server.log_text()
    assert server.proc.returncode == 0, server.log_tail()
    assert f"Child process [{victim}] died" in log and "graceful shutdown exceeded" not in log
    counts = await h.check_invariants(db_url, todos=n, drained=True)
    h.report("serve --workers 2, one worker killed", size, todos=n, agents=len(agents), attempts=counts["attempts"],
             replaced_and_answering_s=round(back, 2), reconnects=tally.reconnects,
             closes_retried=tally.closes_retried, replayed=tally.replayed, http_5xx=statuses.server_errors,
             internal=len(tally.internal), seconds=round(time.monotonic() - started, 1))
    assert [t for t, acks in tally.acked.items() if acks > 1] == [], "a todo was acknowledged completed twice"
    assert statuses.server_errors == 0 and tally.internal == []
