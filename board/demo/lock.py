"""One demo per data directory. A second `switchboard demo` on the same data dir would share
the first one's embedded Postgres and demo.json (its password, token and session secret) and
stop that Postgres when it ends: it is refused instead, naming the demo that runs.

The running demo holds an exclusive fcntl lock on `<data dir>/demo.lock` and writes its pid
and URL into the file. The kernel drops the lock when the process ends, however it ends, so
a demo killed with SIGKILL leaves a file that blocks nobody: the lock, not the file, says
whether a demo runs."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

LOCK_FILE = "demo.lock"


class DemoRunning(Exception):
    """Another demo holds the data dir's lock; str() is the one line to print."""


class DemoLock:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, url: str) -> None:
        """Take the lock and record who holds it, or raise DemoRunning naming the holder."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # O_CLOEXEC: the embedded Postgres this process starts must not inherit (and keep) it.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(os.pread(fd, 4096, 0))
            os.close(fd)
            raise DemoRunning(f"another demo is running in {self.data_dir} ({holder}); stop it first, "
                              f"or give this one a data dir of its own with SWITCHBOARD_DATA_DIR") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "url": url}).encode() + b"\n", 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # a later reader finds no stale pid
            os.close(self._fd)  # closing drops the lock
            self._fd = None


def _holder(raw: bytes) -> str:
    try:
        data = json.loads(raw)
        return f"pid {int(data['pid'])}, {data['url']}"
    except (ValueError, KeyError, TypeError):  # its holder has not written it yet
        return "it is starting"
