"""Two `switchboard serve` processes on one database, agents on both: each todo is completed
exactly once, and the outcome counts in the database equal the sum of both processes'
/metrics counters (counters move after commit, in the process that committed)."""

from __future__ import annotations

import time

from tests.faults import harness as h


async def test_two_servers_on_one_database_complete_each_todo_once_and_metrics_add_up(db_url, store, size,
                                                                                       tmp_path):
    started = time.monotonic()
    n = size.two_server_todos
    token, agent = await h.vend(store)
    await h.add_todos(store, agent, n)
    tally, statuses = h.Tally(), h.Statuses()
    async with h.serving(db_url, tmp_path / "a.log") as a, h.serving(db_url, tmp_path / "b.log") as b:
        agents = (h.start_agents(a.url, token, tally, statuses, n=3)
                  + h.start_agents(b.url, token, tally, statuses, n=3))
        try:
            await h.wait_for_done(db_url, n, timeout=180)
        finally:
            await h.stop_agents(agents)
        scraped = [await a.metrics(), await b.metrics()]
    counts = await h.check_invariants(db_url, todos=n, drained=True)
    in_database = await h.outcome_counts(db_url)
    in_metrics = sum((h.metric_sums(text, "switchboard_todo_attempts_closed_total", "outcome") for text in scraped),
                     h.Counter())
    claims = sum(sum(h.metric_sums(text, "switchboard_claims_total", "queue").values()) for text in scraped)
    per_process = [sum(h.metric_sums(text, "switchboard_claims_total", "queue").values()) for text in scraped]
    h.report("two servers, one database", size, todos=n, agents=len(agents), attempts=counts["attempts"],
             outcomes=dict(sorted(in_database.items())), claims_per_process=per_process,
             http_5xx=statuses.server_errors, internal=len(tally.internal),
             seconds=round(time.monotonic() - started, 1))
    assert [t for t, acks in tally.acked.items() if acks > 1] == [], "a todo was acknowledged completed twice"
    assert in_metrics == in_database
    assert claims == counts["attempts_total"], "every committed claim opened one attempt"
    assert all(per_process), "both processes served claims"
    assert statuses.server_errors == 0 and tally.internal == []
