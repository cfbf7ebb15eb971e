"""The pool's connections (board/store/db.py): the checkout check in a process with many
open descriptors, as a server holding a thousand live streams is; and how they read JSON."""

from __future__ import annotations

import contextlib
import json
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


# A value jsonb holds that the fast decoder refuses (a 401-digit number with a fraction is
# past a float's range), beside ordinary ones: nested objects, a pair of surrogate escapes,
# a big integer, a repeated key.
HARD_JSON = ('{"n": 1' + "0" * 400 + '.5, "emoji": "\\ud83d\\ude00", "big": 123456789012345678901234567890, '
             '"nested": [{"a": null, "b": true, "c": -0.25}], "k": 1, "k": 2}')


async def test_the_pools_connections_read_json_and_jsonb_as_the_standard_library_does(db_url):
    """Every jsonb and json value reads as json.loads reads Postgres's text of it, including
    one the faster decoder refuses and hands back to json.loads."""
    pool = await open_pool(db_url, min_size=1, max_size=1)
    try:
        async with pool.connection() as conn:
            row = await (await conn.execute("SELECT %(t)s::jsonb AS b, %(t)s::json AS j, %(t)s::jsonb::text AS bt",
                                            {"t": HARD_JSON})).fetchone()
    finally:
        await pool.close()
    assert row["b"] == json.loads(row["bt"])
    assert row["j"] == json.loads(HARD_JSON)
    assert row["b"]["n"] == float("inf") and row["b"]["emoji"] == "\U0001F600" and row["b"]["k"] == 2
