"""Real parts for the tests: Debian's HAProxy in front of serve processes and Debian's
PgBouncer in transaction mode in front of the test Postgres, each a process of its own
with its config in a temporary folder, on loopback ports.

Both configurations are read from docs/scaling.md (its ```haproxy block and its ```ini
block holding `[pgbouncer]`), so what the docs show is what the tests run; only the
addresses, the backends and the files are rewritten here. A test that needs a part that is
not installed skips with one line naming the Debian package (scripts/test.sh installs both
with apt-get where it can).

    with haproxy([port1, port2], tmp_path) as lb:        # lb.url, e.g. http://127.0.0.1:40123
        ...
    with pgbouncer(admin_url, tmp_path) as bouncer:      # bouncer.url(dbname): through the pooler
        ...
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import psycopg
import pytest

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent
SCALING_DOC = ROOT / "docs" / "scaling.md"
START_SECONDS = 30.0


# -- finding the binaries ----------------------------------------------------------------

def binary(name: str) -> str | None:
    """The installed program, on PATH or in /usr/sbin (often not on a test's PATH)."""
    found = shutil.which(name)
    if found:
        return found
    candidate = Path("/usr/sbin") / name
    return str(candidate) if os.access(candidate, os.X_OK) else None


def require(name: str) -> str:
    """The program's path, or skip the test with one line naming the Debian package."""
    path = binary(name)
    if path is None:
        pytest.skip(f"needs Debian's {name} (apt-get install {name}; scripts/test.sh does it where it can)")
    return path


# -- the configurations, from docs/scaling.md --------------------------------------------

def doc_block(language: str, containing: str = "") -> str:
    """The first fenced block of docs/scaling.md in `language` whose text holds `containing`."""
    for match in re.finditer(r"^```" + re.escape(language) + r"\n(.*?)^```", SCALING_DOC.read_text(), re.M | re.S):
        if containing in match.group(1):
            return match.group(1)
    raise AssertionError(f"docs/scaling.md has no ```{language} block holding {containing!r}")


def haproxy_config(port: int, backends: list[int], *, per_request: bool = False) -> str:
    """docs/scaling.md's HAProxy configuration, bound to `port` with one server line per
    backend port (the documented line's options kept). Round robin without affinity already
    sends each request to the next server in turn; per_request also closes the client's
    connection after each response, so every request is a new connection end to end."""
    lines: list[str] = []
    server_line: str | None = None
    for line in doc_block("haproxy").splitlines():
        stripped = line.strip()
        if stripped.startswith("bind "):
            lines.append(re.sub(r"bind\s+\S+", f"bind 127.0.0.1:{port}", line, count=1))
        elif stripped.startswith("server "):
            if server_line is None:  # the first documented server line is the pattern for all
                server_line = line
                for i, backend in enumerate(backends, 1):
                    lines.append(re.sub(r"server\s+\S+\s+\S+", f"server serve{i} 127.0.0.1:{backend}", line, count=1))
        else:
            lines.append(line)
        if per_request and stripped.startswith("mode http"):
            lines.append(line[:line.index("mode")] + "option httpclose")
    if server_line is None:
        raise AssertionError("docs/scaling.md's HAProxy configuration has no server line")
    return "\n".join(lines) + "\n"


def pgbouncer_config(port: int, server: dict, folder: Path, *, prepared_statements: bool) -> str:
    """docs/scaling.md's PgBouncer configuration, listening on `port`, every database name
    passed to the Postgres `server` (host, port and login from its conninfo), trusting loopback
    clients with its files in `folder`. prepared_statements: keep max_prepared_statements
    (PgBouncer 1.21 and later; older ones refuse the setting)."""
    target = " ".join(f"{k}={server[k]}" for k in ("host", "port", "user", "password") if server.get(k))
    out: list[str] = []
    section = ""
    for line in doc_block("ini", "[pgbouncer]").splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped
            out.append(line)
            if section == "[databases]":
                out.append(f"* = {target}")
            continue
        key = stripped.split("=", 1)[0].strip() if "=" in stripped and not stripped.startswith(";") else ""
        if section == "[databases]" and key:
            continue  # replaced by the one wildcard line above
        if key in ("listen_addr", "listen_port", "auth_type", "auth_file", "logfile", "pidfile", "unix_socket_dir"):
            continue
        if key == "max_prepared_statements" and not prepared_statements:
            continue
        out.append(line)
    # Ours, appended to the [pgbouncer] section (the last one in the documented file).
    out += ["listen_addr = 127.0.0.1", f"listen_port = {port}", "auth_type = trust",
            f"auth_file = {folder / 'userlist.txt'}",
            "unix_socket_dir ="]
    return "\n".join(out) + "\n"


# -- processes ---------------------------------------------------------------------------

def _wait_port(port: int, proc: subprocess.Popen, log: Path, what: str) -> None:
    deadline = time.monotonic() + START_SECONDS
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not listen on {port} within {START_SECONDS} s")
        time.sleep(0.02)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@dataclass
class HAProxy:
    port: int
    backends: list[int]
    config_path: Path
    log_path: Path
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextlib.contextmanager
def haproxy(backends: list[int], folder: Path, *, per_request: bool = False,
            port: int | None = None) -> Iterator[HAProxy]:
    """HAProxy (round robin, no affinity, health checks on /readyz) in front of the serve
    processes on the `backends` ports, on `port` (else a free one); skips the test when
    HAProxy is not installed."""
    program = require("haproxy")
    folder.mkdir(parents=True, exist_ok=True)
    lb = HAProxy(port or free_port(), list(backends), folder / "haproxy.cfg", folder / "haproxy.log")
    lb.config_path.write_text(haproxy_config(lb.port, lb.backends, per_request=per_request))
    with open(lb.log_path, "ab") as log:
        # -db: stay in the foreground; -W: master-worker, so SIGTERM stops it cleanly.
        lb.proc = subprocess.Popen([program, "-db", "-W", "-f", str(lb.config_path)], stdout=log,
                                   stderr=subprocess.STDOUT, cwd=folder)
    try:
        _wait_port(lb.port, lb.proc, lb.log_path, "haproxy")
        yield lb
    finally:
        _stop(lb.proc)


def pgbouncer_version(program: str) -> tuple[int, ...]:
    out = subprocess.run([program, "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"PgBouncer (\d+)\.(\d+)", out)
    return tuple(int(x) for x in match.groups()) if match else (0, 0)


@dataclass
class PgBouncer:
    port: int
    server: dict
    config_path: Path
    log_path: Path
    version: tuple[int, ...]
    proc: subprocess.Popen | None = None
    # Whether it carries protocol-level prepared statements across its server connections
    # (max_prepared_statements, PgBouncer 1.21 and later).
    prepared_statements: bool = False

    def url(self, dbname: str) -> str:
        """A URL of `dbname` through the pooler."""
        return psycopg.conninfo.make_conninfo(host="127.0.0.1", port=str(self.port), dbname=dbname,
                                              user=self.server.get("user") or "postgres")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextlib.contextmanager
def pgbouncer(admin_url: str, folder: Path) -> Iterator[PgBouncer]:
    """PgBouncer in transaction mode in front of the Postgres of `admin_url` (any database
    of it, by name); skips the test when PgBouncer is not installed. Run as root, it drops to
    the owner of the Postgres socket folder (PgBouncer refuses to run as root)."""
    program = require("pgbouncer")
    folder.mkdir(parents=True, exist_ok=True)
    server = psycopg.conninfo.conninfo_to_dict(admin_url)
    version = pgbouncer_version(program)
    bouncer = PgBouncer(free_port(), server, folder / "pgbouncer.ini", folder / "pgbouncer.log", version,
                        prepared_statements=version >= (1, 21))
    bouncer.config_path.write_text(pgbouncer_config(bouncer.port, server, folder,
                                                    prepared_statements=bouncer.prepared_statements))
    (folder / "userlist.txt").write_text(f'"{server.get("user") or "postgres"}" ""\n')
    command = [program, str(bouncer.config_path)]
    if os.geteuid() == 0:
        host = server.get("host") or ""
        owner = Path(host).stat().st_uid if host.startswith("/") else os.stat("/").st_uid
        user = _user_name(owner) if owner != 0 else "nobody"
        os.chmod(folder, 0o777)
        command[1:1] = ["-u", user]
    with open(bouncer.log_path, "ab") as log:
        bouncer.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=folder)
    try:
        _wait_port(bouncer.port, bouncer.proc, bouncer.log_path, "pgbouncer")
        yield bouncer
    finally:
        _stop(bouncer.proc)


def _user_name(uid: int) -> str:
    import pwd

    return pwd.getpwuid(uid).pw_name
