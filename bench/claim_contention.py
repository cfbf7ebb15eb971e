"""REQ-18: claim throughput under contention, with attempt history vs the pre-change baseline.

Runs claim_next + complete cycles through the store at several worker counts (one pooled
connection each), side by side in one run:

  attempts     - board.store.store as shipped, on today's schema: each claim opens an attempt, each
                 complete closes it
  baseline     - the system before SPEC-0034: its claim and complete (no attempt writes, no
                 prior_attempts read) on its schema (migration 0001 only), through the same
                 Store plumbing
  no-attempts  - with --same-schema: the pre-change statements on today's schema, so the
                 attempt writes' own cost shows apart from what the rest of the change saved

Every case starts from its own copy of a database that already holds a realistic history
(finished todos, with their attempts where the schema keeps them, analysed), so a claim that
walked past finished rows or a close that scanned attempts would show. The plans of the claim
and close statements are printed first. The machines here are shared and noisy, so the
variants run at once on their own databases, in short slices taken in rotating order
(baseline, attempts, then attempts, baseline, ...) for tens of seconds each: a slow spell of
the machine lands on all of them. The table reports throughput over all slices, the spread of
the per-slice ratios, a 95% confidence interval of the ratio with whether it shows the floor met
(the whole interval at or above 0.90), missed, or still open, and whether throughput held as
dead rows piled up.

    python bench/claim_contention.py                        # 1, 8, 32 workers, 10 slices of 3 s
    python bench/claim_contention.py --slices 20 --workers 8 32
    python bench/claim_contention.py --same-schema --workers 8
    python bench/claim_contention.py --workers 8 --variant rule-trigger=@bench/variants/attempt_rule_trigger.sql
    python bench/claim_contention.py --variant ordered=@bench/variants/claim_order_in_use.sql

--variant NAME=SQL runs the shipped store once more on today's schema changed by SQL (an
index, a constraint, a trigger), in the same rotating slices, and prints its throughput
against attempts with a confidence interval: a schema change measured side by side, where
separate runs would differ by more than the change.

--traced adds the variant traced: the shipped store with traces on (board/ops/tracing.py), each
claim and complete inside a span standing for its MCP call's, its statements instrumented, every
span exported over OTLP/HTTP to a local sink (a process of its own that reads and drops them),
in the same rotating slices; printed against attempts, which is the store with traces unset.

    python bench/claim_contention.py --workers 1 8 --traced

--statements NAME=PATH does the same for a change of statements: the store with the claim_next
and complete statements of PATH (another checkout's board/store/sql or board/sql folder, or the board/statements.py
of a checkout from before the SQL files; its schema must be today's), e.g. what a branch's
statements cost against those of the branch it started from:

    git archive BASE | tar -x -C /tmp/base
    python bench/claim_contention.py --workers 8 32 --statements base=/tmp/base/board/store/sql

Uses DATABASE_URL when set (it needs CREATE DATABASE), else an embedded Postgres under
./.switchboard/bench, restarted with shared_buffers 1GB (--shared-buffers) so that every
variant's database fits in the one buffer cache they share. Prints a table and the ratio
attempts/baseline (floor 0.90).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import math
import multiprocessing
import os
import re
import secrets
import socket
import statistics
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer
from psycopg.types.json import Jsonb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from board.store import store as st  # noqa: E402
from board.store import inputs, vocabulary  # noqa: E402
from board.store.queries import QUERIES, Query, load  # noqa: E402
from board.config import Settings  # noqa: E402
from board.store.db import EmbeddedPostgres, migrate, open_pool  # noqa: E402
from board.live.fanout import Fanout  # noqa: E402
from board.live.pause_cache import PauseCache  # noqa: E402
from board.ops.tracing import Tracing, new_provider  # noqa: E402

# The baseline is the system before SPEC-0034: its schema (migration 0001, with the CHECK
# constraints that 0002 turns into triggers, and no attempts table) and its claim and complete,
# frozen here exactly as SPEC-0003 had them (compare-and-set, SKIP LOCKED, pg_notify), returning
# the todo as it was then (no attempts_total, attempts_pruned or pruned_outcomes).
PRE_CHANGE_SCHEMA = 1

_PRE_CHANGE_TODO_COLS = """{r}.id, {r}.endpoint_id, {r}.queue, {r}.title, {r}.state::text AS state, {r}.owner,
  {r}.attempt, {r}.max_attempts, {r}.lease_expires_at, {r}.next_retry_at,
  ({r}.state = 'failed' AND {r}.next_retry_at IS NULL) AS dead_letter,
  {r}.payload, {r}.routing, {r}.result, {r}.created_at, {r}.updated_at"""

BASELINE_CLAIM_NEXT = """
WITH lapsed_cand AS (
  SELECT t.id
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s)
     AND t.state = 'claimed' AND t.lease_expires_at <= coalesce(%(now)s::timestamptz, now())
     AND t.attempt < t.max_attempts
   ORDER BY t.lease_expires_at
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
pending_cand AS (
  SELECT t.id
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s)
     AND t.state = 'pending'
   ORDER BY t.created_at, t.id
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
cand AS (
  SELECT * FROM pending_cand
  UNION ALL
  SELECT * FROM lapsed_cand WHERE NOT EXISTS (SELECT 1 FROM pending_cand)
),
upd AS (
  UPDATE todos t SET state = 'claimed', owner = %(owner)s,
         lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
         attempt = t.attempt + 1, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM cand WHERE t.id = cand.id
  RETURNING t.*
)
SELECT """ + _PRE_CHANGE_TODO_COLS.format(r="upd") + """, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'claimed')::text) FROM upd
"""

BASELINE_CLAIM_NEXT = Query("baseline_claim_next", "claim_next before SPEC-0034", BASELINE_CLAIM_NEXT, __file__)

BASELINE_COMPLETE = """
UPDATE todos t SET state = 'done', owner = NULL, lease_expires_at = NULL, result = %(result)s,
       updated_at = coalesce(%(now)s::timestamptz, now())
 WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
   AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
RETURNING """ + _PRE_CHANGE_TODO_COLS.format(r="t") + """, pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'complete')::text)
"""
BASELINE_COMPLETE = Query("baseline_complete", "complete before SPEC-0034", BASELINE_COMPLETE, __file__)
assert vocabulary.NOTIFY_CHANNEL == "switchboard_v1"


def pre_change_todo_out(row: dict) -> dict:
    """The todo as agents saw it before SPEC-0034."""
    keys = ("id", "queue", "title", "state", "owner", "attempt", "max_attempts", "lease_expires_at",
            "next_retry_at", "dead_letter", "payload", "routing", "result", "created_at", "updated_at")
    return {k: row[k] for k in keys}


# The endpoint lookup of the schema before SPEC-0034 (no OAuth tokens to look through).
BASELINE_AUTH = Query("baseline_endpoint_auth", "an endpoint by token hash, before SPEC-0034", """
SELECT id::text AS id, user_id, agent_id, scope, queues, false AS stale_use,
       NULL::float8 AS expires_at, NULL::text AS resource
  FROM endpoints WHERE token_hash = %(token_hash)s AND revoked_at IS NULL""", __file__)
BASELINE_VEND = Query("baseline_endpoint_insert", "an endpoint, before SPEC-0034", """
INSERT INTO endpoints (user_id, name, agent_id, token_hash, scope, queues)
VALUES (%(user_id)s, %(name)s, %(agent_id)s, %(token_hash)s, %(scope)s, %(queues)s)
RETURNING id::text, user_id, name, agent_id, scope, queues, created_at""", __file__)


class BaselineStore(st.Store):
    """The store as it was before SPEC-0034: the same plumbing, validation and committed-
    transition events, minus what the spec added (the attempt writes, the claimant label,
    prior_attempts, summary and artifact)."""

    async def endpoint_authenticate(self, token):
        row = await self._fetch(BASELINE_AUTH, {"token_hash": st.hash_token(token)}, op="auth", one=True)
        return st.Agent(row["id"], row["agent_id"], row["user_id"], frozenset(row["scope"]), tuple(row["queues"]))

    async def endpoint_vend(self, user_id, *, name, agent_id, queues, scope):
        token = "sb_" + secrets.token_urlsafe(32)
        row = await self._fetch(BASELINE_VEND, {"user_id": user_id, "name": name, "agent_id": agent_id,
                                                "token_hash": st.hash_token(token), "scope": scope,
                                                "queues": queues}, op="endpoint_vend", one=True)
        return row, token

    async def todo_claim_next(self, caller, *, queue=None, lease_seconds=None, now=None, **_):
        caller.require("claim_next")
        queues = list(caller.queues) if queue is None else [queue]
        params = self._params(caller, claim_queues=queues, lease_seconds=self._lease(lease_seconds), now=now)
        row = await self._fetch(BASELINE_CLAIM_NEXT, params, op="claim_next", one=True)
        if row is None:
            return {"todo": None}
        self._emit([st.Transition("claimed", row["id"], str(row["endpoint_id"]), row["queue"], "claimed")])
        return {"todo": pre_change_todo_out(row)}

    async def todo_complete(self, caller, todo_id, *, result=None, now=None, **_):
        todo_id = inputs.checked_todo_id(todo_id)
        if result is not None:
            inputs.json_value(result, "result")
        caller.require("complete")
        params = self._params(caller, id=todo_id, result=None if result is None else Jsonb(result), now=now,
                              from_states=["claimed"])
        row = await self._fetch(BASELINE_COMPLETE, params, op="complete", todo_id=todo_id, one=True)
        if row is None:
            raise await self._classify(caller, todo_id, "complete", params)
        self._emit([st.Transition("complete", row["id"], str(row["endpoint_id"]), row["queue"], row["state"])])
        return pre_change_todo_out(row)


HISTORY_SQL = """
WITH ins AS (
  INSERT INTO todos (id, endpoint_id, queue, title, state, attempt, attempts_total, created_at, updated_at)
  SELECT 'h' || g, %(ep)s, 'work', 'old job ' || g, 'done', 1 + (g %% 2), 1 + (g %% 2),
         now() - interval '2 days' + g * interval '1 ms', now() - interval '1 day'
    FROM generate_series(1, %(history)s) g
  RETURNING id, attempts_total
)
INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, owner, claimant, claimed_at,
                      lease_expires_at, ended_at, outcome, disposition, summary)
SELECT ins.id, s, s, 'endpoint', %(ep)s, 'agent:bench', 'bench', now() - interval '1 day',
       now() - interval '1 day', now() - interval '1 day',
       CASE WHEN s = ins.attempts_total THEN 'completed' ELSE 'failed' END::attempt_outcome,
       CASE WHEN s = ins.attempts_total THEN 'done' ELSE 'retry_scheduled' END::attempt_disposition,
       'history'
  FROM ins, generate_series(1, ins.attempts_total) s
"""

# The same finished todos on the pre-change schema, which kept no attempts.
PRE_CHANGE_HISTORY_SQL = """
INSERT INTO todos (id, endpoint_id, queue, title, state, attempt, created_at, updated_at)
SELECT 'h' || g, %(ep)s, 'work', 'old job ' || g, 'done', 1 + (g %% 2),
       now() - interval '2 days' + g * interval '1 ms', now() - interval '1 day'
  FROM generate_series(1, %(history)s) g
"""

PENDING_SQL = """
INSERT INTO todos (endpoint_id, queue, title, created_at)
SELECT %(ep)s, 'work', 'job ' || g, now() + g * interval '1 us' FROM generate_series(1, %(pending)s) g
"""


def _url(admin: str, db: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(admin)
    info["dbname"] = db
    return psycopg.conninfo.make_conninfo(**info)


# A --variant's SQL runs before the rows are written; what follows this line in it, after.
AFTER_THE_ROWS = "-- after the rows --"


async def prepare_template(admin: str, name: str, history: int, pending: int, *,
                           pre_change: bool = False, extra_sql: str | None = None) -> tuple[str, str]:
    """A database with finished history and pending todos, at today's schema or (pre_change)
    at the schema before SPEC-0034; extra_sql runs after the migrations, before any row is
    written (its part after AFTER_THE_ROWS, once they are). Returns its URL and an endpoint
    token for the queue."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = _url(admin, name)
    await migrate(url, target=PRE_CHANGE_SCHEMA if pre_change else None)
    pool = await open_pool(url, min_size=1, max_size=2)
    store = (BaselineStore if pre_change else st.Store)(pool, Settings())
    user = await store.user_insert("bench", "x")
    _, token = await store.endpoint_vend(user["id"], name="bench", agent_id="bench", queues=["work"],
                                         scope=list(vocabulary.VERBS))
    agent = await store.endpoint_authenticate(token)
    await pool.close()
    before, _, after = (extra_sql or "").partition(AFTER_THE_ROWS)
    with psycopg.connect(url, autocommit=True) as conn:
        if before.strip():
            conn.execute(before)
        conn.execute(PRE_CHANGE_HISTORY_SQL if pre_change else HISTORY_SQL, {"ep": agent.endpoint_id, "history": history})
        conn.execute(PENDING_SQL, {"ep": agent.endpoint_id, "pending": pending})
        if after.strip():
            conn.execute(after)
        conn.execute("VACUUM ANALYZE")
    return url, token


def clone(admin: str, template: str) -> tuple[str, str]:
    name = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template)))
    return name, _url(admin, name)


def drop(admin: str, name: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


async def show_plans(url: str, token: str) -> None:
    """The generic plans the pool runs (plan_cache_mode=force_generic_plan), scans only."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for title, text in (("claim (fast path)", QUERIES["todo_claim_fast"].sql),
                            ("claim (takeover/pruning path)", QUERIES["todo_claim"].sql),
                            ("complete", QUERIES["todo_complete"].sql)):
            query = PostgresQuery(Transformer(conn))
            query.convert(text, {name: None for name in re.findall(r"%\((\w+)\)s", text)})
            cur = await conn.execute(b"EXPLAIN (GENERIC_PLAN, COSTS OFF) " + query.query)
            lines = [r[0] for r in await cur.fetchall()]
            scans = [ln.strip().removeprefix("->  ") for ln in lines if "Scan using" in ln or "Seq Scan" in ln]
            print(f"plan of {title}: " + "; ".join(scans))
            if any("Seq Scan on todos" in ln or "Seq Scan on attempts" in ln for ln in lines):
                print(f"  WARNING: {title} has a sequential scan")


# The shipped statements a --statements variant replaces. Before one pair of claim
# statements served every claim, claim_next had its own pair (unpaused, as a server runs
# them, or with the pause probe), and a batch another.
SWAPPED = ("todo_claim_fast", "todo_claim", "todo_complete")
BEFORE = {"single": ("todo_claim_next_fast_unpaused", "todo_claim_next_unpaused"),
          "probed": ("todo_claim_next_fast", "todo_claim_next"),
          "batch": ("todos_claim_next_fast", "todos_claim_next")}


def other_statements(name: str, path: str) -> tuple[dict, bool]:
    """The claim and complete statements of path (a board/store/sql or board/sql folder, or a
    statements module of before the SQL files), and whether they are of before the one pair
    of claim statements: then by the kind of claim ({"single": (fast, full), ...,
    "todo_complete": complete}), else by the shipped names they stand for."""
    if Path(path).is_dir():
        found = load(Path(path))
        if "todo_claim_next_fast" not in found:  # (before, todo_claim_fast was the claim by id's)
            return {n: found[n] for n in SWAPPED}, False
        return {kind: tuple(found[n] for n in names) for kind, names in BEFORE.items()
                if all(n in found for n in names)} | {"todo_complete": found["todo_complete"]}, True
    spec = importlib.util.spec_from_file_location(f"bench_statements_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    texts = (getattr(mod, "SQL_CLAIM_NEXT_FAST_UNPAUSED", mod.SQL_CLAIM_NEXT_FAST),
             getattr(mod, "SQL_CLAIM_NEXT_UNPAUSED", mod.SQL_CLAIM_NEXT),
             mod.SQL_CLOSE_AGENT[("complete", "unfenced")])
    fast, full, complete = (Query(f"{name}_{i}", f"statement {i} of {path}", text, path) for i, text in enumerate(texts))
    return {"single": (fast, full), "todo_complete": complete}, True


def statements_store(name: str, path: str) -> type[st.Store]:
    """The shipped store, but its claim_next and complete send the statements of path (the
    --statements variants). Statements of before the one claim pair are picked by the claim's
    kind; a single claim's take one token hash and do not return it, so the store's
    parameters and rows are adapted around them."""
    swapped, before = other_statements(name, path)

    class StatementsStore(st.Store):
        async def _fetch(self, sql, params, **kw):
            if sql.name not in SWAPPED:
                return await super()._fetch(sql, params, **kw)
            if not before or sql.name == "todo_complete":
                return await super()._fetch(swapped[sql.name], params, **kw)
            full = sql.name == "todo_claim"
            if params["limit"] > 1 and "batch" in swapped:
                return await super()._fetch(swapped["batch"][full], params, **kw)
            kind = "single" if params["ignore_pauses"] or "probed" not in swapped else "probed"
            token_hash = (params.get("token_hashes") or [None])[0]
            rows = await super()._fetch(swapped[kind][full], dict(params, token_hash=token_hash), **kw)
            return [dict(row, lease_token_hash=token_hash) for row in rows]

    return StatementsStore


class Case:
    """One variant on its own copy of the template database, with its pool and workers."""

    def __init__(self, admin: str, template: str, token: str, variant: str, workers: int,
                 store_class: type[st.Store] | None = None):
        self.admin, self.template, self.token, self.variant, self.workers = admin, template, token, variant, workers
        self.store_class = store_class
        self.slices: list[tuple[int, float]] = []  # (cycles, seconds) per slice
        self.latencies: list[float] = []
        self.on_connect = None  # each pool connection's setup (the traced case's instrumentation)

    async def open(self) -> None:
        self.name, url = clone(self.admin, self.template)
        self.pool = await open_pool(url, min_size=self.workers + 1, max_size=self.workers + 2,
                                    on_connect=self.on_connect)
        pre_change_statements = self.variant in ("baseline", "no-attempts")
        self.store = (self.store_class or (BaselineStore if pre_change_statements else st.Store))(self.pool, Settings())
        # One LISTEN connection, as a server process has, which every variant's notifications
        # reach; the shipped store's claims consult its pause cache, as a server's do.
        self.fanout = Fanout(url)
        if not pre_change_statements:
            self.store.use_pause_cache(PauseCache(self.store, self.fanout))
        await self.fanout.start()
        self.agent = await self.store.endpoint_authenticate(self.token)

    async def close(self) -> None:
        await self.fanout.stop()
        await self.pool.close()
        drop(self.admin, self.name)

    def call(self, tool: str):
        """What wraps each store call: nothing here; the traced case's span (TracedCase)."""
        return contextlib.nullcontext()

    async def run_slice(self, seconds: float) -> float:
        stop_at = time.perf_counter() + seconds

        async def worker(i: int) -> int:
            me = self.agent.on_session(f"w{i}")
            n = 0
            while time.perf_counter() < stop_at:
                t0 = time.perf_counter()
                with self.call("claim_next"):
                    res = await self.store.todo_claim_next(me)
                if res["todo"] is None:
                    raise SystemExit("the bench ran out of pending todos: raise --pending")
                with self.call("complete"):
                    await self.store.todo_complete(me, res["todo"]["id"])
                self.latencies.append(time.perf_counter() - t0)
                n += 1
            return n

        started = time.perf_counter()
        cycles = sum(await asyncio.gather(*(worker(i) for i in range(self.workers))))
        elapsed = time.perf_counter() - started
        self.slices.append((cycles, elapsed))
        return cycles / elapsed

    @property
    def rate(self) -> float:
        return sum(c for c, _ in self.slices) / sum(e for _, e in self.slices)

    def pct(self, q: float) -> float:
        lat = sorted(self.latencies)
        return lat[min(len(lat) - 1, int(len(lat) * q))] * 1000


class TracedCase(Case):
    """The shipped store with traces on, as a server with OTEL_EXPORTER_OTLP_ENDPOINT set runs
    it: its pool's statements instrumented, its claims recording their traceparent, its closes
    emitting attempt spans, each call in a span (the MCP SDK's, in a server), all exported in
    batches to the sink."""

    def __init__(self, *args, sink: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.sink = sink

    async def open(self) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.tracing = Tracing(new_provider(OTLPSpanExporter(endpoint=self.sink + "/v1/traces")))
        self.tracer = self.tracing.provider.get_tracer("bench")
        self.on_connect = self.tracing.instrument_connection
        await super().open()
        self.tracing.observe_store(self.store)

    def call(self, tool: str):
        from opentelemetry.trace import SpanKind

        return self.tracer.start_as_current_span(f"tools/call {tool}", kind=SpanKind.SERVER)

    async def close(self) -> None:
        await self.tracing.stop()
        self.tracing.shutdown()
        await super().close()


def run_sink(port: int) -> None:
    """An OTLP/HTTP receiver that reads each export and drops it (the traced case's collector)."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


FLOOR = 0.90  # SPEC-0034 REQ-18: attempts / baseline throughput

# Two-sided 95% quantiles of Student's t by degrees of freedom; between two keys the smaller
# key's (larger) value is used, so the interval errs wide.
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23,
        12: 2.18, 15: 2.13, 20: 2.09, 25: 2.06, 30: 2.04, 40: 2.02, 60: 2.00, 120: 1.98}


def ratio_interval(ratios: list[float]) -> tuple[float, float, float]:
    """The geometric mean of the per-slice ratios and its 95% confidence interval.

    Each slice pair ran back to back, so a slow spell of the machine lands on both halves of
    a pair; the pairs' log ratios are then treated as independent samples (t interval)."""
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), 0.0, math.inf
    half = _T95[max(k for k in _T95 if k <= len(logs) - 1)] * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def floor_verdict(lo: float, hi: float, floor: float = FLOOR) -> str:
    """met: the whole interval is at or above the floor; missed: all of it below; else open."""
    return "met" if lo >= floor else "missed" if hi < floor else "open"


VARIANTS = {
    "baseline": "the pre-change statements on the pre-change schema (REQ-18's baseline)",
    "attempts": "board.store.store as shipped, on today's schema",
    "no-attempts": "the pre-change statements on today's schema: what the attempt writes alone cost",
}


def parse_variants(specs: list[str]) -> dict[str, str]:
    """--variant NAME=SQL (or NAME=@path, the SQL read from a file) -> {NAME: SQL}."""
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"--variant takes NAME=SQL, not {spec[:40]!r}")
        if name in VARIANTS or name in out:
            raise ValueError(f"--variant {name!r}: the name is taken")
        if text.startswith("@"):
            text = Path(text[1:]).read_text()
        if not text.strip():
            raise ValueError(f"--variant {name!r} has no SQL")
        out[name] = text
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--slices", type=int, default=10, help="alternating slices per variant and worker count")
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one slice")
    ap.add_argument("--history", type=int, default=100_000, help="finished todos (with attempts) already there")
    ap.add_argument("--pending", type=int, default=None,
                    help="pending todos each case starts with (default: enough for 1,500 cycles/s over every slice)")
    ap.add_argument("--shared-buffers", default="1GB",
                    help="shared_buffers of the bench's own embedded server ('default' for initdb's 128MB); "
                         "ignored with DATABASE_URL")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=SQL",
                    help="also run the shipped store on today's schema changed by SQL (run after the "
                         "migrations; @path reads it from a file), compared with attempts in the same slices; "
                         "repeatable. Example: --variant no-fk='ALTER TABLE attempts DROP CONSTRAINT "
                         "attempts_todo_id_fkey'")
    ap.add_argument("--statements", action="append", default=[], metavar="NAME=PATH",
                    help="also run the store with the claim_next and complete statements of PATH (a "
                         "board/store/sql or board/sql folder, or an older board/statements.py, for today's schema), compared with attempts in the same slices; "
                         "repeatable")
    ap.add_argument("--traced", action="store_true",
                    help="also run the shipped store with traces on, exported to a local OTLP/HTTP sink, "
                         "compared with attempts (traces unset) in the same slices")
    ap.add_argument("--same-schema", action="store_true",
                    help="also run the pre-change statements on today's schema (the attempt writes' own cost)")
    args = ap.parse_args()
    if args.pending is None:
        args.pending = max(150_000, int(args.slices * args.seconds * 1_500))
    variants = ["baseline", "attempts"] + (["no-attempts"] if args.same_schema else [])
    try:
        schema_variants = parse_variants(args.variant)
    except ValueError as err:
        ap.error(str(err))
    variants += list(schema_variants)
    statement_variants = {}
    for spec in args.statements:
        name, _, path = spec.partition("=")
        if not path or name in variants:
            ap.error(f"--statements takes a new NAME=PATH, not {spec[:60]!r}")
        statement_variants[name] = statements_store(name, path)
    variants += list(statement_variants)
    sink = None
    if args.traced:
        variants.append("traced")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            sink_port = probe.getsockname()[1]
        sink = multiprocessing.Process(target=run_sink, args=(sink_port,), daemon=True)
        sink.start()
    # Every variant holds its pool open through a worker count's slices (workers + 2 each).
    connections = (max(args.workers) + 2) * len(variants) + 10

    embedded = None
    admin = os.environ.get("DATABASE_URL")
    if not admin:
        embedded = EmbeddedPostgres(Path(".switchboard/bench"), database="postgres")
        admin = embedded.start()
        # The variants' databases share one server and so one buffer cache, which a production
        # database has to itself; with initdb's 128MB their working sets evict each other at
        # every slice, and the larger one (with attempts) pays more. Restart with room for all.
        with psycopg.connect(admin, autocommit=True) as conn:
            if args.shared_buffers == "default":
                conn.execute("ALTER SYSTEM RESET shared_buffers")
            else:
                conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(args.shared_buffers)))
            conn.execute(sql.SQL("ALTER SYSTEM SET max_connections = {}").format(sql.Literal(max(100, connections))))
        embedded.stop()
        admin = embedded.start()
    with psycopg.connect(admin, autocommit=True) as conn:
        shared_buffers = conn.execute("SHOW shared_buffers").fetchone()[0]
        server_version = conn.execute("SHOW server_version").fetchone()[0]
        max_connections = int(conn.execute("SHOW max_connections").fetchone()[0])
    if max_connections < connections:
        if embedded:
            embedded.stop()
        raise SystemExit(f"{len(variants)} variants at {max(args.workers)} workers need {connections} connections; "
                         f"the server allows {max_connections}: raise max_connections, or run fewer at once")
    rows = []
    try:
        print(f"preparing {args.history:,} finished todos of history and {args.pending:,} pending, on the "
              "pre-change schema and on today's ...", flush=True)
        templates = {"pre-change": await prepare_template(admin, "bench_pre_change", args.history, args.pending,
                                                          pre_change=True),
                     "today": await prepare_template(admin, "bench_template", args.history, args.pending)}
        for i, (name, extra_sql) in enumerate(schema_variants.items()):
            templates[name] = await prepare_template(admin, f"bench_variant_{i}", args.history, args.pending,
                                                     extra_sql=extra_sql)
        await show_plans(*templates["today"])
        for workers in args.workers:
            cases = {}
            for v in variants:
                url, token = templates["pre-change" if v == "baseline" else v if v in schema_variants else "today"]
                database = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
                if v == "traced":
                    cases[v] = TracedCase(admin, database, token, v, workers, sink=f"http://127.0.0.1:{sink_port}")
                else:
                    cases[v] = Case(admin, database, token, v, workers, statement_variants.get(v))
            for case in cases.values():
                await case.open()
            try:
                ratios = []
                for i in range(args.slices):
                    # Rotate which variant goes first, so none always runs in the same place.
                    order = variants[i % len(variants):] + variants[:i % len(variants)]
                    rate = {v: await cases[v].run_slice(args.seconds) for v in order}
                    ratios.append(rate["attempts"] / rate["baseline"])
                    print(f"  {workers:3} workers, slice {i + 1:2}: " + "  ".join(f"{v} {rate[v]:6.0f}/s" for v in variants)
                          + f"  ratio {ratios[-1]:.2f}", flush=True)
            finally:
                for case in cases.values():
                    await case.close()
            rows.append((workers, cases, sorted(ratios)))
        drop(admin, "bench_pre_change")
        drop(admin, "bench_template")
        for i in range(len(schema_variants)):
            drop(admin, f"bench_variant_{i}")
    finally:
        if embedded:
            embedded.stop()
        if sink is not None:
            sink.terminate()

    print()
    print(f"claim_next + complete through the store, {args.slices} alternating slices of {args.seconds:g} s per "
          f"variant, {args.history:,} finished todos of history, PostgreSQL {server_version.split()[0]}, "
          f"shared_buffers {shared_buffers}")
    for v in variants:
        if v in VARIANTS:
            print(f"  {v:>11}: {VARIANTS[v]}")
    extra = f" | {'no-attempts/s':>13} {'attempts/no-attempts':>20}" if args.same_schema else ""
    print(f"{'workers':>7} | {'baseline/s':>10} {'p50 ms':>7} {'p99 ms':>7} | {'attempts/s':>10} {'p50 ms':>7} "
          f"{'p99 ms':>7} | {'ratio':>5} | {'slice ratios p10-p90':>20} | {'95% CI':>11} | {'floor':>6} | "
          f"{'holds':>5}{extra}")
    print("-" * (130 + len(extra)))
    for workers, cases, ratios in rows:
        b, a = cases["baseline"], cases["attempts"]
        lo, hi = ratios[len(ratios) // 10], ratios[-1 - len(ratios) // 10]
        _, ci_lo, ci_hi = ratio_interval(ratios)
        holds = a.slices[-1][0] / a.slices[-1][1] / (a.slices[0][0] / a.slices[0][1])
        line = (f"{workers:>7} | {b.rate:>10.0f} {b.pct(0.5):>7.2f} {b.pct(0.99):>7.2f} | {a.rate:>10.0f} "
                f"{a.pct(0.5):>7.2f} {a.pct(0.99):>7.2f} | {a.rate / b.rate:>5.2f} | {lo:>9.2f} - {hi:<8.2f} | "
                f"{ci_lo:>4.2f} - {ci_hi:<4.2f} | {floor_verdict(ci_lo, ci_hi):>6} | {holds:>5.2f}")
        if args.same_schema:
            n = cases["no-attempts"]
            line += f" | {n.rate:>13.0f} {a.rate / n.rate:>20.2f}"
        print(line)
    print("ratio = attempts / baseline throughput over all slices. Each slice pair ran back to back; 95% CI is")
    print("the confidence interval of the pairs' geometric mean ratio. floor: met when the whole interval is at")
    print(f"or above SPEC-0034 REQ-18's {FLOOR:.2f}, missed when all of it is below, open when the run cannot tell")
    print("(more slices narrow the interval). The interval covers the noise within this run only: on a shared")
    print("machine separate runs differ by more, so a verdict needs repeating before it is relied on.")
    print("holds = the attempts variant's last slice / its first (dead rows piling up would show below 1).")
    described = {name: "the shipped store on today's schema after: " + " ".join(" ".join(
        ln for ln in extra_sql.splitlines() if not ln.lstrip().startswith("--")).split())[:160] + " ..."
                 for name, extra_sql in schema_variants.items()}
    described |= {name: f"the store with the claim_next and complete statements of {spec.partition('=')[2]}"
                  for name, spec in zip(statement_variants, args.statements)}
    if args.traced:
        described["traced"] = ("the shipped store with traces on, exported over OTLP/HTTP to a local sink "
                               "(attempts: traces unset)")
    for name, description in described.items():
        print()
        print(f"variant {name}: {description}")
        for workers, cases, _ in rows:
            a, v = cases["attempts"], cases[name]
            pairs = [(cv / ev) / (ca / ea) for (cv, ev), (ca, ea) in zip(v.slices, a.slices)]
            mean, lo, hi = ratio_interval(pairs)
            print(f"  {workers:>3} workers: {v.rate:6.0f}/s, {name}/attempts {v.rate / a.rate:.3f} "
                  f"(95% CI of the slice pairs {lo:.3f}-{hi:.3f}), {name}/baseline "
                  f"{v.rate / cases['baseline'].rate:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
