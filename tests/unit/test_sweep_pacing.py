"""Retention deletes history beside live work: run_batches paces a sweep so it holds the
database at most its duty share of the time, and drains the other sweeps at once. Time is a
fake clock here: what is asserted is how long the sweep asks to wait, never a measured time."""

from __future__ import annotations

import asyncio

from board.ops import sweeps


def fake_time(monkeypatch, batch_seconds: float, sizes: list[int]):
    clock = {"now": 100.0}
    slept: list[float] = []

    async def batch() -> int:
        clock["now"] += batch_seconds
        return sizes.pop(0)

    async def sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))
        clock["now"] += seconds

    monkeypatch.setattr(sweeps.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(sweeps.asyncio, "sleep", sleep)
    return batch, slept


def test_retention_waits_three_times_each_batch_so_it_holds_a_quarter_of_the_time(monkeypatch):
    batch, slept = fake_time(monkeypatch, 0.2, [500, 500, 120, 0])
    taken = asyncio.run(sweeps.run_batches(batch, sweeps.RETENTION_DUTY))
    assert taken == 1120
    assert slept == [0.6, 0.6, 0.6]  # none after the batch that found nothing
    assert sweeps.RETENTION_DUTY == 0.25


def test_the_other_sweeps_drain_a_backlog_without_pausing(monkeypatch):
    batch, slept = fake_time(monkeypatch, 0.2, [500, 500, 0])
    assert asyncio.run(sweeps.run_batches(batch)) == 1000
    assert slept == []


def test_a_paced_sweep_stops_between_batches_when_told(monkeypatch):
    stop = asyncio.Event()
    batch, slept = fake_time(monkeypatch, 0.1, [500, 500, 500, 0])
    calls = 0

    async def told_during_the_second() -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            stop.set()
        return await batch()

    assert asyncio.run(sweeps.run_batches(told_during_the_second, 0.5, stop)) == 1000
    assert calls == 2 and slept == [0.1, 0.1]
