"""Helpers for the worker's tests: `switchboard work` as a real subprocess (its output read
line by line), and the command it runs, a Python script that plays what a todo's payload says."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.conftest import ROOT

# The command every test runs: what it does comes from the todo's payload.
COMMAND = r'''
import hashlib, json, os, signal, sys, time
todo = json.load(sys.stdin)
p = todo.get("payload") or {}
if p.get("ignore_term"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
def err(line):
    print(line, file=sys.stderr, flush=True)
for line in p.get("stderr", []):
    err(line)
for note in p.get("notes", []):
    err("::note:: " + note)
if "usage" in p:
    err("::usage:: " + json.dumps(p["usage"]))
if p.get("summary"):  # a list is joined: a credential in parts passes the payload's screening
    err("::summary:: " + "".join(p["summary"]))
if p.get("marker"):
    with open(p["marker"], "w") as f:
        f.write(str(os.getpid()))
time.sleep(p.get("seconds", 0))
if int(os.environ["SWITCHBOARD_ATTEMPT"]) <= p.get("fail_attempts", 0):
    err("tests red: 3 failed")
    sys.exit(p.get("exit", 3))
secret = os.environ.get("CHECK_TOKEN_SHA")
print(json.dumps({
    "id": os.environ["SWITCHBOARD_TODO_ID"], "queue": os.environ["SWITCHBOARD_QUEUE"],
    "title": os.environ["SWITCHBOARD_TODO_TITLE"], "stdin_title": todo["title"],
    "order": [os.environ["SWITCHBOARD_TODO_PRIORITY"], os.environ["SWITCHBOARD_TODO_RUN_AT"],
              os.environ["SWITCHBOARD_TODO_KEY"]],
    "stdin_order": [todo["priority"], todo["run_at"], todo["key"]],
    "plan": [json.loads(os.environ["SWITCHBOARD_TODO_AFTER"]), os.environ["SWITCHBOARD_TODO_SCHEDULE_ID"]],
    "stdin_plan": [todo["after"], todo["schedule_id"]],
    "attempt": int(os.environ["SWITCHBOARD_ATTEMPT"]), "seq": int(os.environ["SWITCHBOARD_ATTEMPT_SEQ"]),
    "prior": json.loads(os.environ["SWITCHBOARD_PRIOR_ATTEMPTS"]),
    "token_in_env": any(hashlib.sha256(v.encode()).hexdigest() == secret for v in os.environ.values()),
    **({"printed": "".join(p["print"])} if "print" in p else {}),
}))
if p.get("done_marker"):
    open(p["done_marker"], "w").close()
'''


def write_command(tmp_path: Path) -> list[str]:
    script = tmp_path / "command.py"
    script.write_text(COMMAND)
    return [sys.executable, str(script)]


def worker_env(token: str, env: dict | None = None) -> dict[str, str]:
    """The worker's environment: this one without SWITCHBOARD_ variables, plus the token."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    full_env.update(SWITCHBOARD_TOKEN=token, CHECK_TOKEN_SHA=hashlib.sha256(token.encode()).hexdigest(),
                    PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
                    PYTHONUNBUFFERED="1")
    full_env.update(env or {})
    return full_env


def worker_argv(url: str, command: list[str], *args: str) -> list[str]:
    return [sys.executable, "-m", "board", "work", "--url", url, *args, "--", *command]


class WorkerProcess:
    """`python -m board work ... -- COMMAND` in its own process group."""

    def __init__(self, url: str, token: str, command: list[str], *args: str, env: dict | None = None):
        self.token = token
        self.proc = subprocess.Popen(worker_argv(url, command, *args), cwd=ROOT, env=worker_env(token, env),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
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

    async def wait_for_line(self, pattern: str, timeout: float = 20.0) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            for line in list(self.lines):
                if m := re.search(pattern, line):
                    return m
            assert self.proc.poll() is None or any(re.search(pattern, l) for l in self.lines), \
                f"the worker exited ({self.proc.returncode}) before {pattern!r}:\n{self.output}"
            assert time.monotonic() < deadline, f"no {pattern!r} within {timeout} s:\n{self.output}"
            await asyncio.sleep(0.05)

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    async def wait(self, timeout: float = 30.0) -> int:
        code = await asyncio.to_thread(self.proc.wait, timeout)
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def assert_no_token_printed(self) -> None:
        assert self.token not in self.output


class PipedWorker:
    """The worker with its standard output on a pipe the test reads, then closes, as
    `switchboard work ... | head -3` leaves it once head has its lines; standard error goes to
    a file, read at the end."""

    def __init__(self, url: str, token: str, command: list[str], *args: str, stderr_path: Path):
        read_end, write_end = os.pipe()
        self._read_end: int | None = read_end
        self._stderr_path = stderr_path
        with open(stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(worker_argv(url, command, *args), cwd=ROOT, env=worker_env(token),
                                         stdout=write_end, stderr=stderr, start_new_session=True)
        os.close(write_end)
        self.output = ""

    async def read_until(self, pattern: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.output):
            left = deadline - time.monotonic()
            assert left > 0, f"no {pattern!r} within {timeout} s:\n{self.output}{self.stderr}"
            ready, _, _ = await asyncio.to_thread(select.select, [self._read_end], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(self._read_end, 65536)
                assert chunk, f"the worker's output ended before {pattern!r}:\n{self.output}{self.stderr}"
                self.output += chunk.decode(errors="replace")

    def close_reader(self) -> None:
        """The reader is gone: the worker's next write to standard output meets a broken pipe."""
        if self._read_end is not None:
            os.close(self._read_end)
            self._read_end = None

    async def stop_without_reader(self, signum: int, bound: float) -> int:
        """Close the reader, as `| head -3` does once it has its lines, then send the signal: the
        worker's exit status, which must come within `bound` seconds."""
        self.close_reader()
        self.proc.send_signal(signum)
        try:
            return await asyncio.to_thread(self.proc.wait, bound)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the worker still runs {bound:g} s after {signal.Signals(signum).name}:\n"
                                 f"{self.stderr}") from None

    @property
    def stderr(self) -> str:
        return self._stderr_path.read_text(errors="replace")

    def kill(self) -> None:
        self.close_reader()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@contextlib.asynccontextmanager
async def working(url: str, token: str, command: list[str], *args: str, env: dict | None = None):
    worker = WorkerProcess(url, token, command, *args, env=env)
    try:
        await worker.wait_for_line(r"\bworking on ")
        yield worker
    finally:
        worker.kill()
        worker.assert_no_token_printed()


def kill_pid_in(marker: Path) -> None:
    """Kill the command whose pid the script wrote (it runs in a session of its own)."""
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(marker.read_text()), signal.SIGKILL)
