"""The Board's charts read the closed-attempt counts written at close: after the per-todo
history cap has pruned attempts and retention has deleted ended todos with theirs, the
chart of the last hour, day and week still says what closed, as /metrics does."""

from __future__ import annotations

import asyncio
import re

from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in
from tests.acceptance.test_board_overview import cell
from tests.acceptance.test_metrics import scrape, value
from tests.conftest import make_agent, run_server, sql_rows

CLOSES = {"completed": 4, "released": 7, "failed": 2, "died": 1}


def chart_figures(page: str, queue: str) -> dict[str, int]:
    text = cell(page, queue, "chart")
    figures = dict((o, int(n)) for n, o in re.findall(r"(\d+) (completed|released|failed|died)", text))
    assert set(figures) == set(CLOSES), text
    return figures


async def test_the_charts_after_pruning_and_retention_still_equal_metrics_and_the_closes_made(server_settings):
    # Five attempts kept per todo (the least allowed); ended todos deleted two seconds after they end.
    settings = server_settings.with_(attempt_history_max_per_todo=5, retention_days=2 / 86400,
                                     reaper_interval_seconds=0.2)
    async with run_server(settings) as server:
        store = server.store
        ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
        agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
        bob_agent = await make_agent(store, user=bob, agent_id="b1", queues=("builds",))
        before = await scrape(server.url)
        flaky = await store.todo_add(agent, queue="builds", title="flaky", max_attempts=10)
        for _ in range(7):  # released seven times: each claim past the fifth prunes the oldest
            await store.todo_claim(agent, flaky["id"])
            await store.todo_release(agent, flaky["id"], summary="not yet")
        await store.todo_claim(agent, flaky["id"])
        await store.todo_complete(agent, flaky["id"])
        for title in ("a", "b", "c"):
            todo = await store.todo_add(agent, queue="builds", title=title)
            await store.todo_claim(agent, todo["id"])
            await store.todo_complete(agent, todo["id"])
        for title in ("d", "e"):  # dead letters: one attempt each
            todo = await store.todo_add(agent, queue="builds", title=title, max_attempts=1)
            await store.todo_claim(agent, todo["id"])
            await store.todo_fail(agent, todo["id"], summary="red")
        lapsing = await store.todo_add(agent, queue="builds", title="lapses", max_attempts=1)
        await store.todo_claim(agent, lapsing["id"], lease_seconds=1)  # the reaper closes it: died
        other = await store.todo_add(bob_agent, queue="builds", title="bob's")  # never in Ada's charts
        await store.todo_claim(bob_agent, other["id"])
        await store.todo_complete(bob_agent, other["id"])

        async def reaped() -> bool:
            return (await store.todo_get(agent, lapsing["id"]))["state"] == "failed"

        deadline = asyncio.get_running_loop().time() + 15
        while not await reaped():
            assert asyncio.get_running_loop().time() < deadline, "the reaper did not close the lapsed lease"
            await asyncio.sleep(0.1)
        assert (await store.todo_get(agent, flaky["id"]))["attempts_pruned"] == 3
        async with client_for(server) as c:  # pruned: three of the flaky todo's attempts are counts now
            await sign_in(c, "ada")
            assert chart_figures((await c.get("/")).text, "builds") == CLOSES
        await asyncio.sleep(2.5)
        deleted = await store.sweep_retention()
        assert deleted == 8  # Ada's seven ended todos and Bob's one, with their attempts
        assert await sql_rows(server.settings.database_url, "SELECT todo_id FROM attempts") == []

        after = await scrape(server.url)
        metrics = {o: sum(value(after, "switchboard_todo_attempts_closed_total", queue="builds", outcome=x)
                          - value(before, "switchboard_todo_attempts_closed_total", queue="builds", outcome=x)
                          for x in ({"died": ("reaped", "lease_expired")}.get(o) or (o,)))
                   for o in CLOSES}
        assert metrics == {"completed": 5, "released": 7, "failed": 2, "died": 1}  # Bob's completion too

        async with client_for(server) as c:
            await sign_in(c, "ada")
            page = (await c.get("/")).text
            assert chart_figures(page, "builds") == CLOSES
            for window in ("day", "week"):
                r = await c.post("/chart", data={"window": window, "next": "/", "csrf_token": csrf_of(page)})
                assert r.status_code == 303 and r.headers["location"].endswith(f"/#chart-{window}")
                page = (await c.get("/")).text
                assert f'id="chart-{window}" aria-pressed="true"' in page
                assert chart_figures(page, "builds") == CLOSES, window
