"""The planner traps of a queue with history: every statement of board/store/sql/ the store runs, planned
the way the pool runs it (a generic plan) against a database that already holds a realistic
history, must reach todos and attempts by key. A claim that walked every finished row, or a
close that walked every open attempt (and the dead index entries of the closed ones), is
correct on an empty table and falls over in production; this test catches it before then.
"""

from __future__ import annotations

import re

import psycopg
import psycopg._queries
import psycopg.adapt
from board.store.queries import QUERIES
from tests.conftest import make_agent, make_user

HISTORY = 6000  # finished todos, each with one or two closed attempts
ENDPOINTS = 60

# Statements that read a table whole by design, and why.
WHOLE_TABLE = {
    "todos_count_by_queue_state": "the metrics scrape counts every live todo by queue and state (through the live "
                                  "states' partial indexes) beside todo_counts",
    "todos_delete_expired": "the retention sweep looks for old terminal rows; a LIMITed scan stops at the first batch",
    "hook_events_prune": "the hook sweep deletes every delivered event past retention",
    "endpoint_revoke": "a revocation is a rare operator action that reads the endpoint's rows once",
    # No index orders todos by updated time: one on updated_at would end a heartbeat's
    # heap-only update (it sets updated_at). test_the_list_reads_its_rows_in_bounded_shapes
    # holds these to one pass over the caller's todos.
    "todo_list_by_updated": "sorted by updated time, a list reads the endpoint's matching todos once",
    "todo_list_by_updated_human": "sorted by updated time, a list reads the human's matching todos once",
}
# Statements held to their plan by a test of their own, on a history shaped for them.
PLANNED_APART = {
    "overview_counts": "counts every todo of one human: on this history the human owns every row, where a "
                           "seq scan is the right plan; test_the_overview_reads_only_the_humans_index_entries_"
                           "and_the_windows_attempts holds it to index-only scans of the human's endpoints",
}
# Index scans without a key that are bounded by design.
UNKEYED_OK = {
    ("attempts_reap_lapsed", "todos_claimed_idx"): "the reaper reads the claimed set (lease_expires_at stays out of every "
                                       "index so heartbeats stay heap-only)",
    ("questions_expire", "todos_interrupted_idx"): "the question sweep reads the interrupted set, which is small "
                                                   "(a todo waits there only for a person)",
    ("todos_waiting_by_queue", "todos_waiting_idx"): "the metrics scrape counts the waiting todos by queue: "
                                                     "the waiting set, through its partial index",
    ("todo_list_sorted_human", "todos"): "the Board's list in a column's order that no index holds reads every "
                                         "matching todo of the human: here one endpoint holds the whole table",
}


# The migration runner's, LISTEN's and the embedded server's own statements (board/store/db.py)
# read no table of the queue.
NOT_PLANNED = "board/store/sql/database.sql"


def statements():
    """(name, text) of every statement the store runs."""
    for name, q in sorted(QUERIES.items()):
        if q.file != NOT_PLANNED:
            yield name, q.sql


async def seed_history(store, db_url) -> None:
    owner = await make_user(store, "planner")
    agent = await make_agent(store, user=owner, agent_id="history", queues=("work",))
    for i in range(ENDPOINTS):
        user = owner if i % 3 == 0 else await make_user(store, f"other{i}")
        await make_agent(store, user=user, agent_id=f"ep{i}", queues=("work",))
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute(
            """
            WITH ins AS (
              INSERT INTO todos (id, endpoint_id, queue, title, state, attempt, attempts_total, created_at, updated_at)
              SELECT 'h' || g, %(ep)s, 'work', 'old ' || g, 'done', 1 + g %% 2, 1 + g %% 2,
                     now() - interval '2 days' + g * interval '1 ms', now() - interval '1 day'
                FROM generate_series(1, %(n)s) g
              RETURNING id, attempts_total)
            INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, owner, claimed_at,
                                  lease_expires_at, ended_at, outcome, disposition)
            SELECT ins.id, s, s, 'endpoint', %(ep)s, 'agent:x', now() - interval '1 day', now() - interval '1 day',
                   now() - interval '1 day',
                   CASE WHEN s = ins.attempts_total THEN 'completed' ELSE 'failed' END::attempt_outcome,
                   CASE WHEN s = ins.attempts_total THEN 'done' ELSE 'retry_scheduled' END::attempt_disposition
              FROM ins, generate_series(1, ins.attempts_total) s
            """,
            {"ep": agent.endpoint_id, "n": HISTORY},
        )
        await conn.execute(
            "INSERT INTO hook_events (event, url, todo_id, payload, delivered_at) "
            "SELECT 'todo.ready', 'https://hooks.example/x', 'h' || g, '{}', now() FROM generate_series(1, 3000) g"
        )
    for i in range(40):
        await store.todo_add(agent, queue="work", title=f"live {i}")
    # Analysed while nothing was held (a quiet night, or a fresh deploy), then work starts:
    # the statistics say there are no open attempts and no claimed todos.
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("VACUUM ANALYZE")
    for i in range(20):
        await store.todo_claim_next(agent.on_session(f"s{i}"))


def unkeyed_scans(plan: list[str]) -> list[tuple[str, str]]:
    """(index or table, the plan line) for every scan of a big table that is not keyed."""
    found = []
    for i, line in enumerate(plan):
        seq = re.search(r"Seq Scan on (todos|attempts|hook_events)\b", line)
        if seq:
            found.append((seq.group(1), line.strip()))
        idx = re.search(r"Index (?:Only )?Scan(?: Backward)? using (\w+) on (todos|attempts|hook_events)\b", line)
        if idx and not any("Index Cond" in later for later in plan[i + 1:i + 3]):
            found.append((idx.group(1), line.strip()))
    return found


async def test_every_statement_reaches_rows_by_key_on_a_table_with_history(store, db_url):
    await seed_history(store, db_url)
    problems = []
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        for label, text in statements():
            if label in WHOLE_TABLE or label in PLANNED_APART:
                continue
            params = {name: None for name in re.findall(r"%\((\w+)\)s", text)}
            pq = psycopg._queries.PostgresQuery(psycopg.adapt.Transformer(conn))
            pq.convert(text, params)
            cur = await conn.execute(b"EXPLAIN (GENERIC_PLAN, COSTS OFF) " + pq.query)
            plan = [row[0] for row in await cur.fetchall()]
            bad = [line for target, line in unkeyed_scans(plan) if (label, target) not in UNKEYED_OK]
            if "t.id = %(id)s" in text:  # one todo by id: through the primary key, never a wider index
                # (a statement that also walks an index when no id is given cuts that walk by a
                # one-time filter on the id being null)
                bad += [line.strip() for i, line in enumerate(plan)
                        if re.search(r"Index Scan using todos_(?!pkey)\w+ on todos t\b", line)
                        and not any(re.search(r"One-Time Filter: \(\$\d+ IS NULL\)", above)
                                    for above in plan[max(i - 2, 0):i])]
            if bad:
                problems.append(f"{label}:\n  " + "\n  ".join(bad) + "\n  full plan:\n    " + "\n    ".join(plan))
        # The SQL functions the statements call (migrations), planned the same way: a body
        # that reads a table is a statement too, hidden from the EXPLAIN of its caller.
        cur = await conn.execute("SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang"
                                 " WHERE l.lanname = 'sql' AND p.pronamespace = 'public'::regnamespace"
                                 " AND p.prosrc ~* '\\mfrom\\M'")
        functions = await cur.fetchall()
        assert "attempt_prior" in [name for name, _ in functions]
        for name, body in functions:
            cur = await conn.execute("EXPLAIN (GENERIC_PLAN, COSTS OFF) " + body)
            plan = [row[0] for row in await cur.fetchall()]
            bad = unkeyed_scans(plan)
            if bad:
                problems.append(f"function {name}:\n  " + "\n  ".join(line for _, line in bad)
                                + "\n  full plan:\n    " + "\n    ".join(plan))
    assert not problems, "statements that do not reach their rows by key:\n" + "\n".join(problems)


async def generic_plan(conn, text: str) -> list[str]:
    params = {name: None for name in re.findall(r"%\((\w+)\)s", text)}
    pq = psycopg._queries.PostgresQuery(psycopg.adapt.Transformer(conn))
    pq.convert(text, params)
    cur = await conn.execute(b"EXPLAIN (GENERIC_PLAN, COSTS OFF) " + pq.query)
    return [row[0] for row in await cur.fetchall()]


async def test_the_list_reads_its_rows_in_bounded_shapes(store, db_url):
    """The Board's list, every filter in the one statement: newest created first, each
    endpoint walks its created index in order and stops at a page; sorted by updated time,
    the caller's todos are read in one pass (never once per endpoint); either way each row
    shown reads its newest attempt by primary key, and so does the claimant filter."""
    await seed_history(store, db_url)
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        for (who, sort), name in {("agent", "created"): "todo_list_by_created",
                                  ("agent", "updated"): "todo_list_by_updated",
                                  ("human", "created"): "todo_list_by_created_human",
                                  ("human", "updated"): "todo_list_by_updated_human"}.items():
            plan = await generic_plan(conn, QUERIES[name].sql)
            shown = "\n".join(plan)
            todo_scans = [line for line in plan if re.search(r"Scan.* on todos t\b", line)]
            assert len(todo_scans) == 1, shown
            attempt_probes = [line for line in plan if re.search(r"Index Scan using attempts_pkey on attempts", line)]
            assert len(attempt_probes) == (2 if who == "human" else 1), shown  # the newest attempt, the claimant
            assert not re.search(r"Seq Scan on attempts", shown), shown
            if sort == "created":
                assert "todos_endpoint_created_idx" in todo_scans[0] and "Presorted Key: t.created_at" in shown, shown
            if who == "human":
                endpoint_reads = [i for i, line in enumerate(plan) if "on endpoints e" in line]
                assert len(endpoint_reads) == 1, shown
                if sort == "updated":  # the endpoints are read first, once, then the todos once
                    assert any("InitPlan" in line for line in plan[:endpoint_reads[0]]), shown
        plan = await generic_plan(conn, QUERIES["todo_list_row_human"].sql)
        assert any("Index Scan using todos_pkey on todos t" in line for line in plan), plan


async def test_the_overview_reads_only_the_humans_index_entries_and_the_windows_attempts(store, db_url):
    """The Board's overview on a shared table: forty humans' todos, each with a closed attempt
    spread over two days. The counts read each of the human's endpoints' live todos through
    their partial indexes, keyed by the endpoint, and its rows of todo_counts (never the other
    humans' todos, never the history: the endpoint's created index is not read), and the chart the attempts closed in
    its window (keyed by ended_at) and the counts of those deleted (keyed by the human's
    endpoints and the window's first bucket)."""
    endpoints = []
    for i in range(40):
        user = await make_user(store, f"h{i}")
        endpoints.append((await make_agent(store, user=user, agent_id=f"a{i}", queues=("work", "other"))).endpoint_id)
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        # A synchronous commit: VACUUM marks a page all-visible only once the commit that
        # wrote its rows is flushed (the test server commits asynchronously).
        await conn.execute("SET synchronous_commit = on")
        await conn.execute(
            """
            WITH ins AS (
              INSERT INTO todos (id, endpoint_id, queue, title, state, attempt, attempts_total, created_at, updated_at)
              SELECT 'o' || g, (%(eps)s::uuid[])[1 + g %% 40], CASE WHEN g %% 3 = 0 THEN 'other' ELSE 'work' END,
                     'old ' || g, 'done', 1, 1, now() - g * interval '8 s', now() - g * interval '8 s'
                FROM generate_series(1, 20000) g
              RETURNING id, endpoint_id, created_at)
            INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, owner, claimed_at,
                                  lease_expires_at, ended_at, outcome, disposition)
            SELECT id, 1, 1, 'endpoint', endpoint_id, 'agent:x', created_at, created_at, created_at, 'completed',
                   'done' FROM ins
            """, {"eps": endpoints})
        # Vacuumed, so the visibility map is set, as autovacuum leaves a table whose old rows
        # no longer change.
        await conn.execute("VACUUM ANALYZE todos, attempts, todo_counts")
        counts = await generic_plan(conn, QUERIES["overview_counts"].sql)
        outcomes = await generic_plan(conn, QUERIES["overview_outcomes"].sql)
    text = "\n".join(counts)
    for index in ("todos_ready_idx", "todos_waiting_idx", "todos_scheduled_idx", "todos_claimed_idx",
                  "todos_interrupted_idx"):
        assert re.search(index + r" on todos \w+\n\s+Index Cond: \(endpoint_id = e(_\d+)?\.id\)", text), (index, text)
    # The counts: a row per endpoint, queue and kind, whatever the history (read by the
    # endpoint index, or whole while it is this small).
    assert "on todo_counts c" in text, text
    assert "todos_endpoint_created_idx" not in text and "Seq Scan on todos" not in text, text
    # The retrying todos through their index, filtered to the human's endpoints: few in all.
    assert [index for index, _ in unkeyed_scans(counts)] == ["todos_retry_idx"], text
    text = "\n".join(outcomes)
    assert re.search(r"Bitmap Index Scan on attempts_ended_brin\n\s+Index Cond: \(\(ended_at >=", text), text
    assert re.search(r"Index Scan using attempt_outcome_counts_pkey on attempt_outcome_counts c\n\s+Index Cond: "
                     r"\(\(endpoint_id = ANY \(\(InitPlan \d\).col1\)\) AND \(bucket >=", text), text
    assert unkeyed_scans(outcomes) == [], text


async def backlog(store, db_url, name: str):
    """One endpoint with a backlog of 30,000 pending todos in one queue (the bench's shape), analysed."""
    agent = await make_agent(store, user=await make_user(store, name), agent_id=name, queues=("work",))
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO todos (endpoint_id, queue, title, created_at)"
            " SELECT %(ep)s, 'work', 'job ' || g, now() + g * interval '1 us' FROM generate_series(1, 30000) g",
            {"ep": agent.endpoint_id})
        await conn.execute("VACUUM ANALYZE todos")
    return agent


async def test_claim_next_walks_the_pending_index_past_a_big_backlog_with_its_pause_check(store, db_url):
    """One endpoint with a backlog of pending todos in one queue (the bench's shape): the
    claim_next statements, with the check that skips paused queues, still take the oldest
    pending todo from the pending index; a filter the planner misjudged as matching nothing
    would make it scan and sort the whole table on every claim."""
    await backlog(store, db_url, "drain")
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        for name in ("todo_claim_fast", "todo_claim"):
            plan = await generic_plan(conn, QUERIES[name].sql)
            text = "\n".join(plan)
            assert "Index Scan using todos_ready_idx on todos" in text, f"{name}:\n{text}"
            assert "Seq Scan on todos" not in text, f"{name}:\n{text}"  # (attempts is empty here)


async def test_every_claim_and_close_reaches_its_rows_by_key_past_a_big_backlog(store, db_url):
    """The statements each serve an agent and the owning human (migration 0014's caller
    rules, inlined): past a backlog of 30,000 pending todos and a claimed set, every claim
    and close still reaches its todo through the primary key or the pending index, never
    through a scan the caller's scope would have keyed."""
    await seed_history(store, db_url)  # finished todos with their attempts
    agent = await backlog(store, db_url, "deep")
    for i in range(200):  # a claimed set the planner could prefer to walk
        await store.todo_claim_next(agent.on_session(f"s{i}"))
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("ANALYZE")
        for name in ("todo_claim_fast", "todo_claim", "todo_complete", "todo_fail_or_release", "todo_cancel_held",
                     "todo_cancel_unheld", "todo_retry", "todo_heartbeat", "attempt_note_add", "todo_get",
                     "todo_classify_miss"):
            plan = await generic_plan(conn, QUERIES[name].sql)
            text = "\n".join(plan)
            assert unkeyed_scans(plan) == [], f"{name}:\n{text}"
            by_id = [line for line in plan if re.search(r"Scan using \w+ on todos t(_\d+)?\b", line)
                     and "todos_ready_idx" not in line and "todos_claimed_idx" not in line]
            assert by_id and all("todos_pkey" in line for line in by_id), f"{name}:\n{text}"


async def assert_the_claim_reads_one_ready_row(conn, agent) -> None:
    """With 'the one' claimable todo added behind whatever the test wrote: both claim
    statements reach todos through the ready index, never a scan of the table, and running
    claim_next reads one index row and filters none out."""
    await conn.execute("INSERT INTO todos (endpoint_id, queue, title, priority) VALUES (%s, 'work', 'the one', 2)",
                       (agent.endpoint_id,))
    await conn.execute("VACUUM ANALYZE todos")
    for name in ("todo_claim_fast", "todo_claim"):
        text = "\n".join(await generic_plan(conn, QUERIES[name].sql))
        assert "Index Scan using todos_ready_idx on todos" in text, f"{name}:\n{text}"
        assert "Seq Scan on todos" not in text, f"{name}:\n{text}"
    params = {"id": None, "endpoint_id": agent.endpoint_id, "claimer_id": agent.endpoint_id, "queues": ["work"],
              "claim_queues": ["work"], "user_id": agent.user_id, "ignore_pauses": False, "limit": 1,
              "owner": agent.owner, "claimant": None, "lease_seconds": 60.0, "history_max": 50,
              "claimer_session": None, "token_hashes": None, "traceparent": None, "now": None, "prior_attempts": 5, "prior_notes": 3,
              "hook_urls": []}
    async with conn.transaction(force_rollback=True):
        cur = await conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
                                 + QUERIES["todo_claim_fast"].sql, params)
        plan = [row[0] for row in await cur.fetchall()]
    text = "\n".join(plan)
    scan = next(i for i, line in enumerate(plan) if "Index Scan using todos_ready_idx" in line)
    assert re.search(r"actual rows=1(\.00)? ", plan[scan]), text
    removed = [int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", "\n".join(plan[scan:scan + 4]))]
    assert sum(removed) == 0, text


async def test_claim_next_walks_only_claimable_todos_past_a_deep_schedule_and_other_priorities(store, db_url):
    """100,000 scheduled todos more urgent than anything claimable and 100,000 pending todos
    less urgent: both claim statements still reach the claimable todo through the ready
    index (its order, priority then age), and running one reads a handful of index rows, not
    the schedule."""
    agent = await make_agent(store, user=await make_user(store, "deep"), agent_id="deep", queues=("work",))
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO todos (endpoint_id, queue, title, priority, run_at, scheduled, created_at)"
            " SELECT %(ep)s, 'work', 'later ' || g, 0, now() + interval '1 day', true, now() - interval '1 hour'"
            " FROM generate_series(1, 100000) g", {"ep": agent.endpoint_id})
        await conn.execute(
            "INSERT INTO todos (endpoint_id, queue, title, priority, created_at)"
            " SELECT %(ep)s, 'work', 'low ' || g, 3 + g %% 2, now() - interval '1 hour' + g * interval '1 us'"
            " FROM generate_series(1, 100000) g", {"ep": agent.endpoint_id})
        await assert_the_claim_reads_one_ready_row(conn, agent)
    claimed = await store.todo_claim_next(agent)
    assert claimed["todo"]["title"] == "the one"


async def test_claim_next_walks_only_claimable_todos_past_100000_waiting_ones(store, db_url):
    """100,000 todos waiting for another todo, older and more urgent than the one claimable
    todo: both claim statements reach it through the ready index, and running one reads one
    index row, none of the waiting ones."""
    agent = await make_agent(store, user=await make_user(store, "plan"), agent_id="plan", queues=("work",))
    blocker = await store.todo_add(agent, queue="work", title="the blocker", priority=4)
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO todos (endpoint_id, queue, title, priority, after, waits, created_at)"
            " SELECT %(ep)s, 'work', 'waits ' || g, 0, ARRAY[%(blocker)s], 1, now() - interval '1 hour'"
            " FROM generate_series(1, 100000) g", {"ep": agent.endpoint_id, "blocker": blocker["id"]})
        await assert_the_claim_reads_one_ready_row(conn, agent)
    assert (await store.todo_claim_next(agent))["todo"]["title"] == "the one"
