"""The package layers hold: import-linter checks the contracts in pyproject.toml (surfaces
over live updates and operations, those over the store, the store over the base; the
Board's route modules independent; the store's parts independent, under its one Store; no
surface importing the Postgres driver), and what crosses a layer by hand fits."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def test_the_pause_cache_answers_every_call_the_store_makes_of_it():
    """The store takes its pause cache typed by PausedQueues (it cannot import board.live):
    PauseCache must have each of its methods, async where the store awaits it."""
    from board.live.pause_cache import PauseCache
    from board.store.base import PausedQueues

    wanted = {n: f for n, f in vars(PausedQueues).items() if inspect.isfunction(f) and not n.startswith("_")}
    assert set(wanted) == {"paused_queues", "forget"}
    for name, method in wanted.items():
        theirs = getattr(PauseCache, name, None)
        assert theirs is not None, name
        assert inspect.iscoroutinefunction(theirs) == inspect.iscoroutinefunction(method), name
        assert list(inspect.signature(theirs).parameters) == list(inspect.signature(method).parameters), name
