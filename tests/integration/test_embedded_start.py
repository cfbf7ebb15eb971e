"""Several processes starting the embedded Postgres on one fresh data dir at once (two serve
processes, the test command's two pytest processes) all get the server and its database."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import ROOT


def test_processes_starting_the_embedded_server_together_on_a_fresh_data_dir_all_get_its_database(tmp_path):
    code = textwrap.dedent(f"""
        from pathlib import Path
        from board.store.db import EmbeddedPostgres
        server = EmbeddedPostgres(Path({str(tmp_path)!r}))
        print(server.start())
        server.stop()
    """)
    starts = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in starts]
    assert [(code, err.strip().splitlines()[-1:]) for code, _, err in results] == [(0, [])] * 4
    assert all("switchboard?" in out for _, out, _ in results)
