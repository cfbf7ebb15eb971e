"""`switchboard demo` end to end, as a newcomer runs it: a subprocess on a fresh data dir.

While it runs, the printed credentials work: the MCP token reads the agents' todos with
list_todos and get_todo, and the printed user signs in to the Board, whose drawers show
attempts with every outcome the agents produce (completed, failed, released, reaped,
lease_expired) and whose dead-letter filter lists dead letters. Ctrl-C (SIGINT to the whole
process group, as a terminal sends it) exits 0 promptly and leaves no Postgres behind. A
second run on the same data dir reuses the password, the token and the data, and stops by
itself after --duration.

The demo settles: with its bounds made small through SWITCHBOARD_DEMO_LIVE_TODOS and
SWITCHBOARD_DEMO_MAX_TODOS (see board/demo/__init__.py), every census over list_todos (all
pages) has at most that many live todos and todos in all, while the Board fills up to the
bound and the first todos to finish are removed to make room for new work.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from board.demo import QUEUES, SUMMARIES
from board.web.templating import OUTCOME_WORDS
from tests.acceptance.test_board_auth import csrf_of
from tests.acceptance.test_board_live import open_stream
from tests.conftest import ROOT, free_port

REQUIRED = {"completed", "failed", "released", "reaped", "lease_expired"}
# Deadlines, never measurements: generous, so a loaded machine is slow but not failing.
WITHIN = 240.0  # seconds from the banner for every outcome and a dead letter to exist
LINES = ("completed", "failed", "released", "took over", "died", "restarted", "woke up")


class DemoProcess:
    """`python -m board demo` in its own process group, its output collected line by line."""

    def __init__(self, data_dir: Path, port: int, duration: float, env: dict[str, str] | None = None):
        env = {k: v for k, v in os.environ.items()
               if k not in ("DATABASE_URL", "SWITCHBOARD_SECRET_KEY") and not k.startswith("SWITCHBOARD_DEMO_")} \
            | (env or {})
        env["SWITCHBOARD_DATA_DIR"] = str(data_dir)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "board", "demo", "--port", str(port), "--duration", str(duration)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    async def banner(self, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while not any(line.startswith("  agents ") for line in self.lines):
            assert self.proc.poll() is None, f"the demo exited early:\n{self.output}"
            assert time.monotonic() < deadline, f"no banner within {timeout} s:\n{self.output}"
            await asyncio.sleep(0.1)
        text = self.output

        def field(pattern: str) -> str:
            m = re.search(pattern, text, re.M)
            assert m, f"{pattern!r} not in the banner:\n{text}"
            return m.group(1)

        return {"board": field(r"^  Board\s+(http://\S+)/login$"), "user": field(r"^  user\s+(\S+)$"),
                "password": field(r"^  password\s+(\S+)$"), "mcp": field(r"^  MCP\s+(http://\S+/mcp)$"),
                "token": field(r"^  token\s+(sb_\S+)$")}

    async def wait_for_lines(self, patterns: list[str], timeout: float) -> None:
        """Wait until the output has a line matching each pattern; fail naming the missing."""
        deadline = time.monotonic() + timeout
        while missing := [p for p in patterns if not re.search(p, self.output, re.M)]:
            assert self.proc.poll() is None, f"the demo exited before printing {missing}:\n{self.output}"
            assert time.monotonic() < deadline, f"no line for {missing} within {timeout} s:\n{self.output}"
            await asyncio.sleep(0.2)

    def interrupt(self) -> None:
        """Ctrl-C in a terminal: SIGINT to every process in the foreground group."""
        os.killpg(self.proc.pid, signal.SIGINT)

    async def wait(self, timeout: float) -> int:
        return await asyncio.to_thread(self.proc.wait, timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def postgres_pids(data_dir: Path) -> list[int]:
    """Processes whose command line names the data dir (the embedded postgres runs with -D)."""
    needle = str(data_dir.resolve()).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def stop_stray_postgres(data_dir: Path) -> None:
    for pid in postgres_pids(data_dir):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGINT)  # postgres: fast shutdown


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


async def call(client, tool: str, **args) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, f"{tool}: {result.structured_content}"
    return result.structured_content


async def outcomes_over_mcp(url: str, token: str) -> tuple[dict[str, str], str | None]:
    """Polls list_todos and get_todo until attempts with every REQUIRED outcome and a dead
    letter exist. Returns a todo id per outcome, and a dead letter's id."""
    examples: dict[str, str] = {}
    dead: str | None = None
    finished: set[str] = set()  # todos whose history can no longer change
    deadline = time.monotonic() + WITHIN
    async with mcp_client(url, token) as client:
        while True:
            listing = await call(client, "list_todos", limit=200)
            for todo in listing["todos"]:
                if todo["attempts_total"] == 0 or todo["id"] in finished:
                    continue
                full = await call(client, "get_todo", id=todo["id"], attempts_limit=50)
                for outcome, n in full["attempt_outcomes"].items():
                    if n > 0:
                        examples.setdefault(outcome, todo["id"])
                if full["dead_letter"]:
                    dead = dead or todo["id"]
                if full["state"] == "done" or full["dead_letter"]:
                    finished.add(todo["id"])
                await asyncio.sleep(0.02)  # the agents share this endpoint's rate limit
            if REQUIRED <= set(examples) and dead:
                return examples, dead
            assert time.monotonic() < deadline, f"after {WITHIN} s only {sorted(examples)}, dead letter {dead}"
            await asyncio.sleep(2.0)


async def sign_in(board: httpx.AsyncClient, user: str, password: str) -> None:
    page = await board.get("/login")
    r = await board.post("/login", data={"username": user, "password": password, "csrf_token": csrf_of(page.text)})
    assert r.status_code == 303, r.text


async def test_demo_shows_every_outcome_and_stops_cleanly_on_ctrl_c(tmp_path):
    data_dir = tmp_path / "sb"
    demo = DemoProcess(data_dir, free_port(), duration=900)
    try:
        creds = await demo.banner()
        examples, dead = await outcomes_over_mcp(creds["mcp"], creds["token"])

        async with httpx.AsyncClient(base_url=creds["board"], timeout=10) as board:
            await sign_in(board, creds["user"], creds["password"])
            listing = await board.get("/")
            assert listing.status_code == 200
            assert any(seed.title in listing.text for seeds in QUEUES.values() for seed in seeds)
            for outcome in sorted(REQUIRED):
                drawer = await board.get(f"/todos/{examples[outcome]}")
                assert drawer.status_code == 200
                said = re.escape(OUTCOME_WORDS[outcome])  # the attempt's opening sentence says it
                assert re.search(r'class="attempt-title">Attempt \d+, ' + said, drawer.text), \
                    f"no {outcome} attempt in the drawer of {examples[outcome]}"
            assert "dead letter" in (await board.get("/?dead_letter=1")).text
            assert "dead letter" in (await board.get(f"/todos/{dead}")).text

        # Every kind of action line is printed before Ctrl-C, so the check below cannot race it.
        await demo.wait_for_lines([rf"^\d\d:\d\d:\d\d  \S+\s+{kind}\b" for kind in LINES], timeout=WITHIN)
        demo.interrupt()
        assert await demo.wait(timeout=60) == 0, demo.output
        assert postgres_pids(data_dir) == [], "a postgres process outlived the demo"
        out = demo.output
        assert "SIGINT: stopping" in out and out.rstrip().splitlines()[-1].startswith("Stopped:")
        # The terminal shows actions, never what the agents wrote or the lease tokens.
        for summary in (s for kind in SUMMARIES.values() for s in kind):
            assert summary not in out
        assert "ci.example.com" not in out and "mcp://cairn/" not in out and "github.com/example" not in out
        assert out.count(creds["token"]) == 2  # the banner's token line and client configuration
    finally:
        demo.kill()
        stop_stray_postgres(data_dir)

    # A second run starts from the same data, with the same credentials, and --duration stops it.
    again = DemoProcess(data_dir, free_port(), duration=6)
    try:
        creds2 = await again.banner()
        assert (creds2["user"], creds2["password"], creds2["token"]) == \
            (creds["user"], creds["password"], creds["token"])
        async with mcp_client(creds2["mcp"], creds2["token"]) as client:
            kept = await call(client, "get_todo", id=examples["lease_expired"])
            assert kept["attempt_outcomes"].get("lease_expired", 0) >= 1
        assert await again.wait(timeout=40) == 0, again.output
        assert "--duration 6 s is up" in again.output
        assert postgres_pids(data_dir) == [], "a postgres process outlived the second run"
    finally:
        again.kill()
        stop_stray_postgres(data_dir)


async def census(client) -> list[dict]:
    """Every todo the demo endpoint sees, all pages of list_todos."""
    todos, cursor = [], None
    while True:
        page = await call(client, "list_todos", limit=200, **({"cursor": cursor} if cursor else {}))
        todos += page["todos"]
        cursor = page["next_cursor"]
        if not cursor:
            return todos


def finished(todo: dict) -> bool:
    return todo["state"] in ("done", "canceled") or todo["dead_letter"]


async def test_demo_settles_to_a_bounded_board(tmp_path):
    live_max, total_max, oldest = 16, 40, 10
    assert sum(len(seeds) for seeds in QUEUES.values()) > live_max  # the first seeding does not fit
    data_dir = tmp_path / "sb"
    demo = DemoProcess(data_dir, free_port(), duration=900,
                       env={"SWITCHBOARD_DEMO_LIVE_TODOS": str(live_max), "SWITCHBOARD_DEMO_MAX_TODOS": str(total_max)})
    try:
        creds = await demo.banner()
        assert f"at most {live_max} live todos and {total_max} in all" in demo.output
        first_finished: list[str] = []  # todo ids in the order they were first seen finished
        most = 0
        deadline = time.monotonic() + WITHIN
        async with mcp_client(creds["mcp"], creds["token"]) as client:
            while True:
                todos = await census(client)
                live = [t for t in todos if not finished(t)]
                assert len(todos) <= total_max, f"{len(todos)} todos, over the bound of {total_max}"
                assert len(live) <= live_max, f"{len(live)} live todos, over the bound of {live_max}"
                most = max(most, len(todos))
                for todo in sorted(todos, key=lambda t: t["updated_at"]):
                    if finished(todo) and todo["id"] not in first_finished:
                        first_finished.append(todo["id"])
                present = {t["id"] for t in todos}
                if len(first_finished) >= oldest and not present & set(first_finished[:oldest]):
                    break  # the first todos to finish are gone
                assert time.monotonic() < deadline, \
                    f"after {WITHIN} s: {len(todos)} todos, {len(live)} live; of the first {oldest} to " \
                    f"finish, {len(present & set(first_finished[:oldest]))} still there:\n{demo.output[-3000:]}"
                await asyncio.sleep(1.0)
        # It filled up to the bound (within one round of seeds) and made room for new work; and
        # the live bound held the first seeding back.
        assert most >= total_max - max(len(seeds) for seeds in QUEUES.values())
        assert re.search(r"^\d\d:\d\d:\d\d  planner\s+added .*made room: removed the", demo.output, re.M)
        assert re.search(r"^\d\d:\d\d:\d\d  planner\s+waiting\s", demo.output, re.M)
        demo.interrupt()
        assert await demo.wait(timeout=60) == 0, demo.output
        assert postgres_pids(data_dir) == [], "a postgres process outlived the demo"
    finally:
        demo.kill()
        stop_stray_postgres(data_dir)


async def test_a_second_demo_in_the_same_data_dir_is_refused_naming_the_running_one(tmp_path):
    """Two real demo processes on one data dir: the second exits 2 with one line naming the
    first (its pid and URL) and leaves it running; once the first is killed outright
    (SIGKILL: no cleanup), its leftover lock file does not stop the next demo."""
    data_dir = tmp_path / "sb"
    port = free_port()
    first = DemoProcess(data_dir, port, duration=300)
    try:
        creds = await first.banner()
        second = DemoProcess(data_dir, free_port(), duration=300)
        try:
            assert await second.wait(timeout=60) == 2, second.output
        finally:
            second.kill()
        second._reader.join(10)
        assert len(second.lines) == 1, second.output
        line = second.lines[0]
        assert line.startswith("switchboard demo: another demo is running in "), line
        assert f"pid {first.proc.pid}, http://127.0.0.1:{port}" in line, line
        # The first demo did not notice: its Board still answers and its token still works.
        async with httpx.AsyncClient(base_url=creds["board"], timeout=10) as board:
            assert (await board.get("/login")).status_code == 200
        async with mcp_client(creds["mcp"], creds["token"]) as client:
            await call(client, "list_todos")
    finally:
        first.kill()
        stop_stray_postgres(data_dir)
    assert f'"pid": {first.proc.pid}' in (data_dir / "demo" / "demo.lock").read_text()  # left behind
    deadline = time.monotonic() + 30
    while postgres_pids(data_dir):
        assert time.monotonic() < deadline, "the killed demo's postgres did not stop"
        await asyncio.sleep(0.2)

    third = DemoProcess(data_dir, free_port(), duration=4)
    try:
        creds3 = await third.banner()
        assert creds3["token"] == creds["token"]  # the same data dir, now its own
        assert await third.wait(timeout=40) == 0, third.output
        assert (data_dir / "demo" / "demo.lock").read_text() == ""  # released on a clean stop
    finally:
        third.kill()
        stop_stray_postgres(data_dir)


async def test_stopping_the_demo_with_a_board_stream_and_an_mcp_session_open_prints_no_traceback(tmp_path):
    """Ctrl-C while a Board tab streams /events and an MCP client holds a session with its GET
    stream: the demo exits 0 and says nothing worse than its usual stopping lines."""
    data_dir = tmp_path / "sb"
    demo = DemoProcess(data_dir, free_port(), duration=300)
    try:
        creds = await demo.banner()
        stopped = False

        async def goodbyes_to_no_server(exc_type, exc, tb) -> bool:
            """The clients close after the demo has gone: what their goodbyes meet is not the demo's."""
            return stopped and exc_type is not None

        async with contextlib.AsyncExitStack() as clients:
            clients.push_async_exit(goodbyes_to_no_server)
            board = await clients.enter_async_context(httpx.AsyncClient(base_url=creds["board"], timeout=30))
            await sign_in(board, creds["user"], creds["password"])
            await clients.enter_async_context(open_stream(board))
            http = await clients.enter_async_context(
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {creds['token']}"}, timeout=30))
            client = await clients.enter_async_context(
                Client(streamable_http_client(creds["mcp"], http_client=http), mode="legacy"))
            await call(client, "list_todos")
            demo.interrupt()
            code = await demo.wait(timeout=60)
            stopped = True
        assert code == 0, demo.output
        demo._reader.join(10)
        out = demo.output
        assert out.rstrip().splitlines()[-1].startswith("Stopped:"), out
        assert "Traceback" not in out and "ERROR" not in out and "Exception" not in out, out
        assert postgres_pids(data_dir) == [], "a postgres process outlived the demo"
    finally:
        demo.kill()
        stop_stray_postgres(data_dir)
