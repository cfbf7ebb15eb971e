"""Helpers for the worker's tests: `switchboard work` as a real subprocess (its output read
line by line), and the command it runs, a Python script that plays what a todo's payload says."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
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


class WorkerProcess:
    """`python -m board work ... -- COMMAND` in its own process group."""

    def __init__(self, url: str, token: str, command: list[str], *args: str, env: dict | None = None):
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
        full_env.update(SWITCHBOARD_TOKEN=token, CHECK_TOKEN_SHA=hashlib.sha256(token.encode()).hexdigest(),
                        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
                        PYTHONUNBUFFERED="1")
        full_env.update(env or {})
        self.token = token
        self.proc = subprocess.Popen([sys.executable, "-m", "board", "work", "--url", url, *args, "--", *command],
                                     cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
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
