"""A rolling restart behind a real HAProxy (docs/scaling.md's configuration, round robin, no
affinity): three `switchboard serve` processes, each stopped with SIGTERM, waited for and
started again in turn, while MCP agents drain todos with fenced claim/complete cycles
(half 2026-07-28, sessionless, half 2025-11-25 with a session any process resumes) and
signed-in Board streams watch. No agent call fails, no todo
is lost or done twice, every Board stream ends cleanly with a short `retry:`, comes back,
and shows every change committed."""

from __future__ import annotations

import asyncio
import signal
import time

import httpx

from tests import realparts
from tests.acceptance.test_board_auth import make_human, sign_in
from tests.faults import harness as h

PROCESSES = 3
AGENTS = 6
BOARDS = 3
TODOS = 90  # within one page of the Board's list (100), so a snapshot shows every todo
DELAY = 2


async def feed(store, agent, n: int, every: float) -> list[str]:
    """Add n todos one at a time, `every` seconds apart, so there is work through every restart."""
    ids = []
    for i in range(n):
        ids += await h.add_todos(store, agent, 1)
        await asyncio.sleep(every)
    return ids


def reconnect_times(board: h.BoardStream) -> list[float]:
    """For each end of the stream, the seconds until its next snapshot."""
    out = []
    for _, ended, _ in board.ends:
        later = [t for t in board.snapshots if t > ended]
        if later:
            out.append(round(later[0] - ended, 3))
    return out


async def test_a_rolling_restart_behind_haproxy_fails_no_agent_call_loses_no_todo_and_every_board_comes_back_complete(
        db_url, store, size, tmp_path):
    started = time.monotonic()
    human = await make_human(store, f"roller{time.monotonic_ns()}")
    token, agent = await h.vend(store, user_id=human.user_id)
    # Serving on for 2 s with /readyz at 503 lets HAProxy's check (every second) take the
    # process out before it stops accepting (docs/scaling.md).
    servers = [h.ServerProcess(db_url, tmp_path / f"serve{i}.log", SWITCHBOARD_SHUTDOWN_DELAY_SECONDS=str(DELAY))
               for i in range(PROCESSES)]
    await asyncio.gather(*(s.start() for s in servers))
    tally, statuses = h.Tally(), h.Statuses()
    boards: list[h.BoardStream] = []
    agents: list[h.Agent] = []
    restarts = []
    try:
        with realparts.haproxy([s.port for s in servers], tmp_path / "haproxy") as lb:
            try:
                for _ in range(BOARDS):
                    client = httpx.AsyncClient(base_url=lb.url, timeout=10)
                    await sign_in(client, human.username)
                    boards.append(h.BoardStream(client, "/events?page_size=100"))
                    boards[-1].start()
                for board in boards:
                    await board.snapshot_after(0, timeout=30)
                agents = [h.Agent(f"r{i}", lb.url, token, tally, statuses, generation=("modern", "legacy")[i % 2],
                                  fenced=True, lease=60, seed=i) for i in range(AGENTS)]
                for a in agents:
                    a.start()
                feeder = asyncio.create_task(feed(store, agent, TODOS, every=0.15))
                for k, server in enumerate(servers, 1):
                    await h.wait_for_done(db_url, TODOS * k // (PROCESSES + 2), timeout=120)
                    stopping = time.monotonic()
                    await server.stop()
                    stopped = time.monotonic()
                    assert server.proc.returncode in (0, -signal.SIGTERM), server.log_tail()
                    assert "graceful shutdown exceeded" not in server.log_text()
                    await server.start()
                    restarts.append((round(stopped - stopping, 2), round(time.monotonic() - stopped, 2)))
                await feeder
                await h.wait_for_done(db_url, TODOS, timeout=120)
                await h.stop_agents(agents)
                committed = {r["id"]: (r["state"], r["attempt"])
                             for r in await h.rows(db_url, "SELECT id, state::text AS state, attempt FROM todos")}
                for board in boards:
                    await board.showing(committed, timeout=30)
            finally:  # before HAProxy stops, so that its stopping ends no stream
                await h.stop_agents(agents)
                for board in boards:
                    await board.stop()
                    await board.client.aclose()
    finally:
        for server in servers:
            await server.stop()
    counts = await h.check_invariants(db_url, todos=TODOS, drained=True)
    times = [t for board in boards for t in reconnect_times(board)]
    h.report("rolling restart behind HAProxy", size, processes=PROCESSES, delay_s=DELAY, todos=TODOS, agents=len(agents),
             calls=tally.calls, failed_calls=tally.reconnects + sum(tally.errors.values()),
             client_retries=tally.closes_retried, attempts=counts["attempts"],
             stop_and_start_s=restarts, board_ends=sum(len(b.ends) for b in boards),
             board_events=sum(b.todo_events for b in boards),
             board_reconnect_s_max=max(times, default=None), board_reconnect_s=sorted(times),
             http_5xx=statuses.server_errors, http_503=statuses.unavailable,
             seconds=round(time.monotonic() - started, 1))
    assert tally.reconnects == 0 and not tally.errors and tally.closes_retried == 0, (tally.lost, tally.errors)
    assert statuses.server_errors == 0 and statuses.unavailable == 0 and tally.internal == []
    assert [t for t, acks in tally.acked.items() if acks > 1] == [], "a todo was acknowledged completed twice"
    for board in boards:
        assert board.ends and all(how == "clean" and hinted for how, _, hinted in board.ends), board.ends
        assert len(reconnect_times(board)) == len(board.ends), "a Board stream did not come back"
