"""The fault suite's fixtures: its size (CI by default; SWITCHBOARD_FAULTS_LONG=1 or --long
for the full size), a longer hang guard at the full size, and the figures table printed at
the end of every run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults import harness

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def size(request) -> harness.Size:
    return harness.LONG if harness.is_long(request.config) else harness.CI


@pytest.fixture
def private_pg(tmp_path):
    """A private embedded Postgres, started, for a test that stops and starts it; stopped at the end."""
    pg = harness.PrivatePostgres(tmp_path / "pg")
    pg.start_first()
    yield pg
    pg.close()


def pytest_collection_modifyitems(config, items):
    if not harness.is_long(config):
        return
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.timeout(3600))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if harness.FIGURES:
        terminalreporter.section("fault suite figures")
        for line in harness.table(harness.FIGURES):
            terminalreporter.write_line(line)
