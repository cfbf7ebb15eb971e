"""The due timer while the database is away: each try answers unavailable, the timer tries
again shortly and quietly (no error line, no traceback per try), and sweeps as soon as the
database is back. The store is a stand-in; the timer and its fan-out subscription are real."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

from board.errors import Unavailable
from board.live.fanout import Fanout
from board.ops.schedule import DUE_RETRY_SECONDS, DueTimer
from tests.conftest import LOAD_SLACK_SECONDS, until


class AwayStore:
    """A store whose database is away for the first `away` sweeps."""

    def __init__(self, away: int):
        self.observers: list = []
        self.away = away
        self.tries = 0
        self.swept = 0

    async def sweep_due(self, *, now: datetime | None = None) -> int:
        self.tries += 1
        if self.tries <= self.away:
            raise Unavailable()
        self.swept += 1
        return 0

    async def next_due(self) -> datetime | None:
        return None

    async def sweep_schedules(self, *, now: datetime | None = None) -> int:
        if self.tries <= self.away:
            raise Unavailable()
        self.schedule_sweeps = getattr(self, "schedule_sweeps", 0) + 1
        return 0

    async def next_schedule_at(self) -> datetime | None:
        return None


async def test_the_timer_retries_quietly_while_the_database_is_away_then_sweeps(caplog):
    store = AwayStore(away=3)
    timer = DueTimer(store, Fanout("postgresql://unused"), sleep_max=3600)
    caplog.set_level(logging.WARNING)
    timer.start()
    try:
        await until(lambda: store.swept == 1, "a sweep once the database was back",
                    timeout=3 * DUE_RETRY_SECONDS + LOAD_SLACK_SECONDS)
        assert store.tries == 4
        assert timer.next_at is None
    finally:
        await timer.stop()
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []


async def test_an_unexpected_failure_is_logged_once_and_the_timer_goes_on(caplog):
    class Broken(AwayStore):
        async def sweep_due(self, *, now=None) -> int:
            if self.tries == 0:
                self.tries += 1
                raise RuntimeError("a bug")
            self.swept += 1
            return 0

    store = Broken(away=0)
    timer = DueTimer(store, Fanout("postgresql://unused"), sleep_max=3600)
    timer.start()
    try:
        await until(lambda: store.swept == 1, "a sweep after the failure", timeout=DUE_RETRY_SECONDS + LOAD_SLACK_SECONDS)
    finally:
        await timer.stop()
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(failures) == 1 and "due timer" in failures[0].getMessage()


async def test_the_timer_takes_schedules_ticks_and_sleeps_until_the_earlier_of_a_run_at_and_a_tick():
    tick = datetime.now(timezone.utc) + timedelta(hours=1)

    class Ticking(AwayStore):
        async def next_due(self):
            return tick + timedelta(minutes=5)

        async def next_schedule_at(self):
            return tick

    store = Ticking(away=0)
    timer = DueTimer(store, Fanout("postgresql://unused"), sleep_max=3600)
    timer.start()
    try:
        await until(lambda: timer.rounds >= 1, "a round of the timer", timeout=LOAD_SLACK_SECONDS)
        assert store.schedule_sweeps == 1 and timer.next_at == tick
    finally:
        await timer.stop()
