"""Two `switchboard serve` processes on one database, each caching authenticated endpoints:
a revocation through one process's Board ends the token's access through that process at
once and through the other as soon as its LISTEN connection delivers the revocation's
notification (milliseconds; the next call when the machine is not loaded), for a vended
token and for an OAuth grant alike."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import httpx

import pytest

from tests.acceptance.mcp_helpers import CREDENTIALS, credential
from tests.acceptance.test_board_auth import csrf_of, make_human, sign_in
from tests.conftest import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
              "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                   "io.modelcontextprotocol/clientCapabilities": {}}}}


def _headers(token: str) -> dict:
    return {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}


@contextlib.contextmanager
def _serve(db_url: str, log_path, *, port: int | None = None, public_url: str | None = None):
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_") and k != "DATABASE_URL"}
    env.update(DATABASE_URL=db_url, SWITCHBOARD_SECRET_KEY="two-process-secret-0123456789")
    if public_url:  # both processes serve one public URL, as behind a load balancer
        env["SWITCHBOARD_PUBLIC_URL"] = public_url
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "board", "serve", "--port", str(port)], env=env, cwd=ROOT,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _ready(base: str, proc, log_path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=base, timeout=5) as client:
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"the server exited: {open(log_path).read()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get("/login")).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"the server was not ready within {timeout} s")
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("kind", CREDENTIALS)
async def test_a_revocation_through_one_process_ends_access_there_at_once_and_through_the_other_when_notified(
        db_url, store, tmp_path, kind):
    human = await make_human(store, "twoproc")
    port_a = free_port()
    public = f"http://127.0.0.1:{port_a}"
    ep = await credential(SimpleNamespace(url=public, store=store), kind, user_id=human.user_id)
    with _serve(db_url, tmp_path / "a.log", port=port_a, public_url=public) as (a, proc_a), \
            _serve(db_url, tmp_path / "b.log", public_url=public) as (b, proc_b):
        await _ready(a, proc_a, tmp_path / "a.log")
        await _ready(b, proc_b, tmp_path / "b.log")
        async with httpx.AsyncClient(timeout=10) as mcp, httpx.AsyncClient(base_url=a, timeout=10) as board:
            for base in (a, b, b):  # the token is now in both processes' caches
                r = await mcp.post(base + "/mcp", json=TOOLS_LIST, headers=_headers(ep.token))
                assert r.status_code == 200, r.text[:300]
            await sign_in(board, "twoproc")
            page = await board.get(f"/endpoints/{ep.endpoint_id}/revoke")
            revoked = await board.post(f"/endpoints/{ep.endpoint_id}/revoke", data={"csrf_token": csrf_of(page.text)})
            assert revoked.status_code in (200, 303), revoked.text
            r = await mcp.post(a + "/mcp", json=TOOLS_LIST, headers=_headers(ep.token))
            assert r.status_code == 401, r.text[:300]  # the revoking process: at once
            # The other process drops the token when the NOTIFY reaches it, which on a loaded
            # machine can come a moment after the next call: within a few seconds at most.
            deadline = time.monotonic() + 5
            while True:
                r = await mcp.post(b + "/mcp", json=TOOLS_LIST, headers=_headers(ep.token))
                if r.status_code == 401 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            assert r.status_code == 401, r.text[:300]
