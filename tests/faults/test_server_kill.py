"""kill -9 of `switchboard serve` under load, again and again, restarted on its port: the
agents (real MCP clients, both protocol generations, half of them fenced, leases of 3-5 s)
reconnect and go on, nothing is lost, every todo is done exactly once, every invariant holds."""

from __future__ import annotations

import statistics
import time

import pytest

from tests.faults import harness as h


async def test_kill_9_under_load_loses_nothing_and_every_todo_is_done_exactly_once(db_url, store, size, tmp_path):
    started = time.monotonic()
    n, kills = size.kill_todos, size.kills
    token, agent = await h.vend(store)
    await h.add_todos(store, agent, n)
    server = h.ServerProcess(db_url, tmp_path / "server.log")
    await server.start()
    replays = await h.advertises_replays(server.url, token)
    tally, statuses = h.Tally(), h.Statuses()
    agents = h.start_agents(server.url, token, tally, statuses)
    restarts, recoveries = [], []
    try:
        for k in range(1, kills + 1):
            await h.wait_for_done(db_url, n * k // (kills + 1), timeout=120)
            server.kill()
            killed = time.monotonic()
            ready = await server.start()
            restarts.append(ready - killed)
            recoveries.append(await tally.first_ok_after(ready, timeout=60) - ready)
        await h.wait_for_done(db_url, n, timeout=180)
    finally:
        await h.stop_agents(agents)
        await server.stop()
    counts = await h.check_invariants(db_url, todos=n, drained=True)
    committed_but_conflict = await h.retried_conflicts_that_had_committed(db_url, tally)
    h.report("kill -9 under load", size, kills=kills, todos=n, agents=len(agents), attempts=counts["attempts"],
             restart_s_max=round(max(restarts), 2),
             first_call_after_restart_s_max=round(max(recoveries), 2),
             first_call_after_restart_s_mean=round(statistics.mean(recoveries), 2),
             reconnects=tally.reconnects, closes_retried=tally.closes_retried, replayed=tally.replayed,
             lost_reply_conflicts=len(committed_but_conflict), http_5xx=statuses.server_errors,
             internal=len(tally.internal), seconds=round(time.monotonic() - started, 1))
    assert [t for t, acks in tally.acked.items() if acks > 1] == [], "a todo was acknowledged completed twice"
    assert statuses.server_errors == 0 and tally.internal == []
    if replays:  # once the server answers a retried close as a replay, a lost reply never looks like a conflict
        assert committed_but_conflict == []


async def test_a_close_that_committed_before_a_kill_is_replayed_with_the_same_token_after_restart(db_url, store,
                                                                                                   size, tmp_path):
    started = time.monotonic()
    token, agent = await h.vend(store)
    await h.add_todos(store, agent, 3)
    # The failed todo's retry is not due during the test: the retry sweep moving it back to
    # pending between the two checksums would be a change, though not the replay's.
    server = h.ServerProcess(db_url, tmp_path / "server.log", SWITCHBOARD_RETRY_BASE_SECONDS="3600",
                             SWITCHBOARD_RETRY_MAX_SECONDS="3600")
    await server.start()
    try:
        closes = []
        async with h.mcp_client(server.url, token) as client:
            for verb in ("complete", "fail", "release"):
                claim = (await client.call_tool("claim_next", {"require_fence": True})).structured_content
                args = {"id": claim["todo"]["id"], "lease_token": claim["lease_token"], "summary": f"{verb}d once"}
                first = await client.call_tool(verb, args)
                assert not first.is_error
                closes.append((verb, args, first.structured_content))
        # The replies above arrived; to the server, a reply lost to the kill is the same.
        server.kill()
        await server.start()
        before = await h.tables_checksum(db_url)
        async with h.mcp_client(server.url, token, "legacy") as client:
            for verb, args, first in closes:
                again = await client.call_tool(verb, args)
                assert not again.is_error, (verb, h.error_of(again))
                body = again.structured_content
                assert body["replayed"] is True
                assert body["closed_attempt"] == first["closed_attempt"]
        assert await h.tables_checksum(db_url) == before, "a replay changed nothing"
    finally:
        await server.stop()
    await h.check_invariants(db_url, todos=3, drained=False)
    h.report("close replayed after kill -9", size, closes=len(closes), seconds=round(time.monotonic() - started, 1))


async def test_kill_9_with_a_teams_pool_loses_nothing_and_every_persons_action_has_its_record(db_url, store, size,
                                                                                                 tmp_path):
    """The same with a team: its planner adds, two endpoints of the team drain (six agents),
    while an operator of the team cancels todos through the store and a viewer's cancel and
    a cancel of a todo already canceled are refused. Nothing is lost, every todo of the work
    queue is done exactly once, every cancel that took effect has its record and none that
    was refused has one."""
    from board.errors import Conflict, Forbidden
    from board.store.vocabulary import Human

    started = time.monotonic()
    n, held, kills = size.kill_todos // 3, 30, 2
    owner = await store.user_insert(f"teamowner{time.monotonic_ns()}", "not-a-real-hash")
    team = (await store.team_create(f"kill9-{owner['id']}", owner=owner["username"]))["id"]
    space = await store.team_space(f"kill9-{owner['id']}")
    people = {}
    for role in ("operator", "viewer"):
        person = await store.user_insert(f"{role}{owner['id']}", "not-a-real-hash")
        await store.team_member_set(space, person["username"], role)
        people[role] = await store.human_in(Human(person["id"], person["username"]), team)
    _, planner = await h.vend(store, user_id=team, queues=("work", "held"), agent_id="planner")
    await h.add_todos(store, planner, n)
    to_cancel = await h.add_todos(store, planner, held, queue="held")  # no agent is granted this queue
    tokens = [(await h.vend(store, user_id=team, agent_id=f"pool-{i}"))[0] for i in range(2)]
    server = h.ServerProcess(db_url, tmp_path / "server.log")
    await server.start()
    tally, statuses = h.Tally(), h.Statuses()
    agents = [a for token in tokens for a in h.start_agents(server.url, token, tally, statuses, n=3)]
    canceled, refused = [], []

    async def cancel(who: Human, todo_id: str) -> None:
        try:
            await store.todo_cancel(who, todo_id)
            canceled.append(todo_id)
        except (Conflict, Forbidden):
            refused.append(todo_id)

    try:
        for k in range(1, kills + 1):
            await h.wait_for_done(db_url, n * k // (kills + 1), timeout=120)
            for todo_id in to_cancel[(k - 1) * held // kills:k * held // kills]:
                await cancel(people["viewer"], todo_id)  # a viewer changes nothing
                await cancel(people["operator"], todo_id)
                await cancel(people["operator"], todo_id)  # canceled already: a conflict
            server.kill()
            await server.start()
        await h.wait_for_done(db_url, n, timeout=180)
    finally:
        await h.stop_agents(agents)
        await server.stop()
    counts = await h.check_invariants(db_url, todos=n + held, drained=False)
    drained = await h.rows(db_url, """
        SELECT t.id FROM todos t
         WHERE t.queue = 'work' AND (t.state <> 'done'
               OR (SELECT count(*) FROM attempts a WHERE a.todo_id = t.id AND a.outcome = 'completed')
                  + coalesce((t.pruned_outcomes->>'completed')::int, 0) <> 1)""")
    assert drained == [], "a todo of the work queue is not done exactly once"
    records = await h.rows(db_url, "SELECT todo_id, actor_id, action, source::text FROM audit_records"
                                    " WHERE action = 'cancel' ORDER BY todo_id")
    assert sorted(canceled) == sorted(to_cancel) and len(refused) == 2 * held
    assert [(r["todo_id"], r["actor_id"], r["source"]) for r in records] == \
        [(t, people["operator"].actor, "board") for t in sorted(canceled)]
    states = await h.rows(db_url, "SELECT DISTINCT state::text FROM todos WHERE queue = 'held'")
    assert states == [{"state": "canceled"}]
    h.report("kill -9 with a team's pool", size, kills=kills, todos=n + held, agents=len(agents),
             attempts=counts["attempts"], records=len(records), refused=len(refused), http_5xx=statuses.server_errors,
             seconds=round(time.monotonic() - started, 1))
    assert [t for t, acks in tally.acked.items() if acks > 1] == [], "a todo was acknowledged completed twice"
    assert statuses.server_errors == 0 and tally.internal == []
