"""`switchboard serve` as an operator runs it: production defaults (issue 6)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import httpx

from tests.acceptance.test_board_auth import make_human, sign_in
from tests.conftest import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_") and k != "DATABASE_URL"}
    env.update(extra)
    return env


def test_serve_refuses_to_start_without_a_secret(tmp_path):
    for secret in (None, "change-me", "short"):
        env = _env(SWITCHBOARD_DATA_DIR=str(tmp_path))
        if secret:
            env["SWITCHBOARD_SECRET_KEY"] = secret
        r = subprocess.run([sys.executable, "-m", "board", "serve", "--port", str(free_port())], env=env,
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert r.returncode == 2, r.stderr
        assert "SWITCHBOARD_SECRET_KEY" in r.stderr
        assert not (tmp_path / "pgdata").exists()  # refused before starting anything


def test_a_database_url_that_cannot_be_used_is_one_line_naming_it_without_its_password(tmp_path):
    """An unknown host, a malformed URL and a refused port, for migrate, serve and user add:
    exit status 2 and one line on stderr naming DATABASE_URL, never a traceback or the password."""
    urls = ["postgresql://switchboard:s3cr3t-pw@db.invalid:5432/switchboard", "not a url s3cr3t-pw",
            f"postgresql://switchboard:s3cr3t-pw@127.0.0.1:{free_port()}/switchboard"]
    commands = [["migrate"], ["serve", "--port", str(free_port())], ["user", "add", "ada", "--password-stdin"]]
    for url in urls:
        for command in commands:
            env = _env(DATABASE_URL=url, SWITCHBOARD_SECRET_KEY="a-long-enough-secret-key", SWITCHBOARD_DATA_DIR=str(tmp_path))
            r = subprocess.run([sys.executable, "-m", "board", *command], env=env, input="a-password-123\n",
                               capture_output=True, text=True, timeout=60, cwd=ROOT)
            lines = r.stderr.strip().splitlines()
            assert r.returncode == 2 and len(lines) == 1, (url, command, r.stderr)
            assert lines[0].startswith("switchboard: cannot use the database at DATABASE_URL: "), lines
            assert "s3cr3t-pw" not in r.stderr + r.stdout


async def serve_ready(client: httpx.AsyncClient, proc: subprocess.Popen) -> None:
    """Wait until the `serve` process answers /login, failing with its output if it exits."""
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, f"serve exited during startup:\n{proc.stdout.read()}"
        try:
            if (await client.get("/login")).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "serve was not ready within 60 s"
        await asyncio.sleep(0.05)


async def test_serve_logs_without_credentials_and_stops_cleanly_on_sigterm_with_a_stream_open(db_url, store):
    port = free_port()
    url_with_password = db_url.replace("postgresql://postgres:@", "postgresql://postgres:hunter2@")
    env = _env(DATABASE_URL=url_with_password, SWITCHBOARD_SECRET_KEY="serve-test-secret-0123456789")
    proc = subprocess.Popen([sys.executable, "-m", "board", "serve", "--port", str(port)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            await serve_ready(client, proc)
            await make_human(store, "operator")
            await sign_in(client, "operator")
            async with client.stream("GET", "/events") as stream:
                assert stream.status_code == 200
                lines = stream.aiter_lines()
                while not (await anext(lines)).startswith("event: snapshot"):
                    pass  # the stream is live: its snapshot arrived
                proc.send_signal(signal.SIGTERM)
                out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
        # uvicorn re-raises the signal it caught once it has shut down, so the exit status
        # is SIGTERM's own; what matters is the orderly shutdown: the open stream ended by
        # itself, so uvicorn never had to cut it off at its graceful-shutdown timeout.
        assert proc.returncode in (0, -signal.SIGTERM), out
        assert "Application shutdown complete" in out and "graceful shutdown exceeded" not in out
        assert f"listening on http://127.0.0.1:{port}" in out
        assert "database: " in out and "hunter2" not in out
    finally:
        if proc.poll() is None:
            proc.kill()
