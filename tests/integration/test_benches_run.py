"""The benchmarks still run against the code as it is (they assert nothing about speed):
each is started at its smallest size, on the test Postgres, and must finish with its table."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import realparts
from tests.conftest import ROOT

SMALLEST = {
    "claim_contention.py": ["--workers", "1", "--slices", "2", "--seconds", "0.2", "--history", "50",
                            "--pending", "20000", "--same-schema", "--traced"],
    "batched.py": ["--workers", "1", "--slices", "2", "--seconds", "0.2", "--history", "50", "--pending", "20000",
                   "--produce", "200"],
    "mcp_roundtrip.py": ["--clients", "1", "--slices", "1", "--seconds", "0.3", "--backlog", "5000",
                         "--generations", "modern", "--client", "raw"],
    "million.py": ["--small", "100", "--big", "1000", "--attempts", "2", "--old", "500", "--pending", "3000",
                   "--rounds", "1", "--seconds", "0.3", "--requests", "3", "--workers", "2"],
    "peers.py": ["--concurrency", "2", "--rounds", "1", "--seconds", "0.3", "--jobs", "15000"],
    "wakeup.py": ["--agents", "1", "2", "--rounds", "2", "--generations", "modern", "--processes", "1", "2"],
    "memory.py": ["--connections", "20", "--settle", "0.2"],
    "chart_read.py": ["--small", "100", "--big", "1000", "--rounds", "1", "--requests", "2"],
    "processes.py": ["--processes", "1", "2", "--clients", "2", "--slices", "1", "--seconds", "0.3",
                     "--backlog", "3000", "--generation", "legacy"],
    "sessions.py": ["--rounds", "3"],
}


@pytest.mark.parametrize("bench", SMALLEST)
def test_the_benchmark_runs_to_its_table(bench, pg_admin_url):
    if bench == "processes.py":
        realparts.require("haproxy")  # its balancer
    env = {**os.environ, "DATABASE_URL": pg_admin_url}
    ran = subprocess.run([sys.executable, str(ROOT / "bench" / bench), *SMALLEST[bench]], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    assert any(word in ran.stdout for word in ("ratio", "vs store", "vs 1 process", "per conn")), ran.stdout[-2000:]
