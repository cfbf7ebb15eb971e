"""The pool's checkout check (board/store/db.py) in a process with many open descriptors,
as a server holding a thousand live streams is."""

from __future__ import annotations

import contextlib
import os
import resource

from board.store.db import open_pool

DESCRIPTORS = 1100  # past select()'s limit of 1024


@contextlib.contextmanager
def descriptors_held(n: int):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(n)]
    try:
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_connections_opened_while_a_thousand_streams_are_open_are_checked_out_and_used(db_url):
    """A burst of a thousand Board streams grows the pool while their sockets are open: the
    new connections' descriptors are past 1024, and every checkout must still succeed at
    once (a check by select() refused each one, and the reads timed out as unavailable)."""
    with descriptors_held(DESCRIPTORS):
        pool = await open_pool(db_url, min_size=1, max_size=2, wait_seconds=2.0)
        try:
            for _ in range(3):
                async with pool.connection() as conn:
                    assert conn.fileno() > 1024
                    assert (await (await conn.execute("SELECT 1 AS one")).fetchone()) == {"one": 1}
        finally:
            await pool.close()
