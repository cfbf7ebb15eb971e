"""A todo with every kind of attempt an agent can still read, for the tests that hold the
drawer, the A2UI resource and the MCP App to one view: failed (a markup summary, cut to 2048
bytes, an mcp:// artifact), released with an https artifact and usage, lease_expired (taken
over) and reaped (both died), released by the owner from the Board, and one open with a
note. Times are hours in the past, so the words about them do not change between reads."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

XSS = "<script>alert(1)</script>"
MCP_ARTIFACT = "mcp://cairn/run-1-notes"
HTTPS_ARTIFACT = "https://ci.example.com/runs/2"


async def todo_with_every_kind_of_attempt(store, agent, human, *, queue: str = "q", title: str = "Fix the flaky build"):
    t0 = datetime.now(timezone.utc) - timedelta(hours=3)
    at = lambda minutes: t0 + timedelta(minutes=minutes)  # noqa: E731
    todo = await store.todo_add(agent, queue=queue, title=title, max_attempts=10, now=at(-1))
    tid = todo["id"]
    claim = await store.todo_claim(agent, tid, claimant="run-1", require_fence=True, now=at(0))
    await store.todo_fail(agent, tid, summary=XSS + " then " + "log line " * 300, artifact=MCP_ARTIFACT,
                          lease_token=claim["lease_token"], now=at(4))
    await store.sweep_retry(now=at(10))
    await store.todo_claim(agent, tid, claimant="run-2", now=at(10))
    await store.todo_release(agent, tid, summary="handed back for a bigger box", artifact=HTTPS_ARTIFACT,
                             usage={"input_tokens": 1200, "output_tokens": 340, "cost_usd": 0.42, "model": "m-1"},
                             now=at(14))
    await store.todo_claim(agent, tid, claimant="run-3", lease_seconds=60, now=at(20))
    await store.todo_heartbeat(agent, tid, lease_seconds=60, now=at(20.5))
    await store.todo_claim(agent, tid, claimant="run-4", lease_seconds=60, now=at(25))  # run-3's lease lapsed
    await store.sweep_reap(now=at(27))  # run-4 dies too
    await store.todo_claim(human, tid, claimant="board/ada", now=at(30))
    await store.todo_release(human, tid, summary="looked at it by hand", now=at(32))
    await store.todo_claim(agent, tid, claimant="run-7", lease_seconds=3600, now=at(40))
    await store.todo_note(agent, tid, text="bisecting the last 20 commits", now=at(41))
    return tid
