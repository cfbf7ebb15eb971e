"""Mutation testing of the store's guards: break one guard at a time and run the tests that
should notice; a mutant the tests do not kill is a guard nothing holds.

Each mutant names one exact piece of source text and what it becomes. The text must occur
exactly once in its file (the list fails loudly when the code moves on without it, so the
list is kept with the code: add a mutant with every new guard). A mutant is applied to a
copy of the package in a temporary folder, never to the work tree, and the tests run in a
subprocess that imports the copy.

    .venv/bin/python scripts/mutants.py              # every mutant
    .venv/bin/python scripts/mutants.py --group fence
    .venv/bin/python scripts/mutants.py --list

Exit status 0 when every mutant selected was killed, 1 when any survived, 2 when the list
is out of date with the code.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LIFECYCLE = "tests/integration/test_lifecycle.py"
FENCE = "tests/integration/test_fence.py"
RACES = "tests/integration/test_concurrency.py"
MODEL = "tests/integration/test_store_model.py"
INVARIANTS = "tests/integration/test_attempt_invariants.py"
BOUNDARIES = "tests/integration/test_boundaries.py"
PAUSES = "tests/integration/test_queue_pauses.py"
NOTES = "tests/integration/test_attempt_notes.py"


@dataclass(frozen=True)
class Mutant:
    name: str
    group: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]
    why: str


MUTANTS: tuple[Mutant, ...] = (
    # -- the fence (REQ-6) ---------------------------------------------------------------
    Mutant("fence-close-without-token", "fence", "board/statements.py",
           'fence="AND a.lease_token_hash IS NULL" if fence else "",', 'fence="",',
           (FENCE, LIFECYCLE), "complete, fail and release without a token close a fenced attempt"),
    Mutant("fence-heartbeat-without-token", "fence", "board/statements.py",
           "_HEARTBEAT, scope=_AGENT_SCOPE, fence=_FENCE_GUARD[mode],",
           '_HEARTBEAT, scope=_AGENT_SCOPE, fence="",',
           (FENCE,), "heartbeat without a token extends a fenced lease"),
    Mutant("fence-interrupt-without-token", "fence", "board/statements.py",
           "        fence=_FENCE_GUARD[mode],\n        todo_cols=compose(_TODO_COLS, r=\"upd\"),\n"
           "        notify=compose(_NOTIFY, r=\"upd\", kind=\"resumed\"",
           "        fence=\"\",\n        todo_cols=compose(_TODO_COLS, r=\"upd\"),\n"
           "        notify=compose(_NOTIFY, r=\"upd\", kind=\"resumed\"",
           (FENCE,), "interrupt and resume without a token move a fenced attempt"),
    Mutant("fence-note-without-token", "fence", "board/statements.py",
           'scope=_AGENT_SCOPE, owner="AND t.owner = %(owner)s", fence=_FENCE_GUARD[mode],',
           'scope=_AGENT_SCOPE, owner="AND t.owner = %(owner)s", fence="",',
           (FENCE,), "a note without a token lands on a fenced attempt"),
    Mutant("fence-any-token-matches", "fence", "board/store.py",
           "if stored is None or not hmac.compare_digest(bytes(stored), presented):", "if stored is None:",
           (FENCE,), "a wrong or stale token is accepted"),
    Mutant("fence-token-on-unfenced-attempt", "fence", "board/store.py",
           "if stored is None or not hmac.compare_digest(bytes(stored), presented):",
           "if stored is not None and not hmac.compare_digest(bytes(stored), presented):",
           (LIFECYCLE,), "a made-up token is accepted on an unfenced attempt"),
    # -- owner and state checks ----------------------------------------------------------
    Mutant("owner-close", "owner", "board/statements.py",
           'owner="AND t.owner = %(owner)s" if owner else "",', 'owner="",',
           (FENCE, LIFECYCLE), "another holder's attempt can be closed"),
    Mutant("owner-heartbeat", "owner", "board/statements.py",
           "_HEARTBEAT = \"\"\"\nWITH cur AS (\n  SELECT t.id, t.attempts_total FROM todos t\n"
           "   WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s",
           "_HEARTBEAT = \"\"\"\nWITH cur AS (\n  SELECT t.id, t.attempts_total FROM todos t\n"
           "   WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[])",
           (FENCE,), "another holder's lease can be extended"),
    Mutant("owner-interrupt", "owner", "board/statements.py",
           "_INTERRUPT = \"\"\"\nWITH cur AS (\n  SELECT t.id, t.attempts_total FROM todos t\n"
           "   WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s",
           "_INTERRUPT = \"\"\"\nWITH cur AS (\n  SELECT t.id, t.attempts_total FROM todos t\n"
           "   WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[])",
           (FENCE,), "another holder's attempt can be interrupted or resumed"),
    Mutant("owner-note", "owner", "board/statements.py",
           'scope=_AGENT_SCOPE, owner="AND t.owner = %(owner)s", fence=_FENCE_GUARD[mode],',
           'scope=_AGENT_SCOPE, owner="", fence=_FENCE_GUARD[mode],',
           (FENCE, NOTES), "another holder's attempt takes a note"),
    Mutant("state-heartbeat-on-interrupted", "state", "board/store.py",
           'params = self._params(caller, id=todo_id, lease_seconds=self._lease(lease_seconds), now=now,\n'
           '                              from_states=["claimed"])',
           'params = self._params(caller, id=todo_id, lease_seconds=self._lease(lease_seconds), now=now,\n'
           '                              from_states=["claimed", "input_required", "auth_required"])',
           (BOUNDARIES, FENCE), "a heartbeat revives an interrupted todo's lease"),
    # -- locks ---------------------------------------------------------------------------
    Mutant("lock-claim-by-id", "lock", "board/statements.py",
           "                                  AND t.attempt < t.max_attempts))\n   FOR UPDATE OF t\n)\"\"\"",
           "                                  AND t.attempt < t.max_attempts))\n)\"\"\"",
           (RACES,), "two by-id claims of one todo both win"),
    Mutant("lock-claim-next", "lock", "board/statements.py",
           "   ORDER BY t.created_at, t.id\n   LIMIT 1\n   FOR UPDATE OF t SKIP LOCKED",
           "   ORDER BY t.created_at, t.id\n   LIMIT 1",
           (RACES,), "two claim_next calls take the same todo"),
    # Not listed: dropping the reaper's FOR UPDATE SKIP LOCKED. The attempt's own
    # `outcome IS NULL`, re-checked after a row-lock wait, already keeps a double close out;
    # the lock keeps the todo-then-attempt lock order of every transition (so a takeover and
    # the reaper cannot deadlock), which no bounded test shows.
    # -- boundaries ----------------------------------------------------------------------
    Mutant("lease-boundary-takeover", "boundary", "board/statements.py",
           "     AND (t.state = 'pending' OR (t.state = 'claimed' AND t.lease_expires_at <= {NOW}",
           "     AND (t.state = 'pending' OR (t.state = 'claimed' AND t.lease_expires_at < {NOW}",
           (BOUNDARIES, LIFECYCLE), "a lease that lapses this instant cannot be taken over by id"),
    Mutant("lease-boundary-reaper", "boundary", "board/statements.py",
           "   WHERE t.state = 'claimed' AND t.lease_expires_at <= {NOW}\n",
           "   WHERE t.state = 'claimed' AND t.lease_expires_at < {NOW}\n",
           (BOUNDARIES, LIFECYCLE), "the reaper misses a lease that lapses this instant"),
    Mutant("cap-boundary-takeover", "boundary", "board/statements.py",
           "     AND (t.state = 'pending' OR (t.state = 'claimed' AND t.lease_expires_at <= {NOW}\n"
           "                                  AND t.attempt < t.max_attempts))",
           "     AND (t.state = 'pending' OR (t.state = 'claimed' AND t.lease_expires_at <= {NOW}\n"
           "                                  AND t.attempt <= t.max_attempts))",
           (BOUNDARIES, LIFECYCLE), "the last allowed attempt's lapsed lease is taken over instead of dead-lettered"),
    Mutant("cap-boundary-fail", "boundary", "board/statements.py",
           '"CASE WHEN t.attempt < t.max_attempts THEN {NOW} + least(',
           '"CASE WHEN t.attempt <= t.max_attempts THEN {NOW} + least(',
           (BOUNDARIES, LIFECYCLE), "a fail at max_attempts schedules a retry instead of a dead letter"),
    Mutant("cap-boundary-reaper", "boundary", "board/statements.py",
           "CASE WHEN cand.attempt < cand.max_attempts THEN 'requeued' ELSE 'dead_lettered' END",
           "CASE WHEN cand.attempt <= cand.max_attempts THEN 'requeued' ELSE 'dead_lettered' END",
           (BOUNDARIES, INVARIANTS), "the reaper requeues the last allowed attempt"),
    # -- the died mapping (REQ-4) --------------------------------------------------------
    Mutant("died-in-hook-payload", "died", "board/statements.py",
           "'died', {c}.outcome IN ('lease_expired', 'reaped'), 'summary'",
           "'died', {c}.outcome IN ('lease_expired'), 'summary'",
           ("tests/integration/test_hooks.py",), "a reaped dead letter's hook payload says it did not die"),
    Mutant("died-in-attempt-reads", "died", "migrations/0002_attempt_history.sql",
           "'died', coalesce(a.outcome IN ('lease_expired', 'reaped'), false),",
           "'died', coalesce(a.outcome IN ('lease_expired'), false),",
           (LIFECYCLE,), "get_todo and prior_attempts say a reaped attempt did not die"),
    # -- scope (REQ-10) ------------------------------------------------------------------
    Mutant("scope-agent-queues", "scope", "board/statements.py",
           '_AGENT_SCOPE = "t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)"',
           '_AGENT_SCOPE = "t.endpoint_id = %(endpoint_id)s"',
           (LIFECYCLE,), "an endpoint reaches its todos in a queue it is no longer granted"),
    Mutant("scope-human", "scope", "board/statements.py",
           '_HUMAN_SCOPE = "t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s)"',
           '_HUMAN_SCOPE = "t.endpoint_id IN (SELECT e.id FROM endpoints e)"',
           (LIFECYCLE,), "a human reaches another human's todos"),
    # -- notes on an attempt (migration 0004) --------------------------------------------
    Mutant("notes-cap", "notes", "board/statements.py",
           "x.n <= att.notes_count - %(notes_max)s", "x.n < att.notes_count - %(notes_max)s",
           (NOTES,), "one note more than the per-attempt cap is kept"),
    Mutant("notes-pruned-count", "notes", "board/statements.py",
           "coalesce(a.notes_count, 0) + 1 - %(notes_max)s), 0),", "0), 0),",
           (NOTES,), "notes deleted past the cap are not counted"),
    Mutant("notes-scope-human", "notes", "board/statements.py",
           'SQL_NOTE_HUMAN = compose(_NOTE, scope=_HUMAN_SCOPE,',
           'SQL_NOTE_HUMAN = compose(_NOTE, scope="true",',
           (NOTES,), "a human notes on another human's todo"),
    # -- queue pauses and the overview (migration 0003) --------------------------------
    Mutant("pause-claims", "pause", "board/statements.py",
           '_NOT_PAUSED = {_AGENT_SCOPE: " AND " + _NOT_PAUSED_ROW, _HUMAN_SCOPE: ""}',
           '_NOT_PAUSED = {_AGENT_SCOPE: "", _HUMAN_SCOPE: ""}',
           (PAUSES,), "an agent claims in a paused queue, next or by id"),
    Mutant("pause-scope", "pause", "board/statements.py",
           "FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)",
           "FROM queue_pauses p WHERE p.queue = t.queue)",
           (PAUSES,), "one human's pause holds another human's agents back"),
    Mutant("overview-counts-scope", "pause", "board/statements.py",
           "     WHERE e.user_id = %(user_id)s\n     GROUP BY x.queue) c",
           "     GROUP BY x.queue) c",
           (PAUSES,), "the overview counts another human's todos"),
    Mutant("overview-chart-scope", "pause", "board/statements.py",
           "   AND t.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))",
           "   AND t.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e))",
           (PAUSES,), "the overview's chart counts another human's attempts"),
)

# The tests run from the copy (pytest puts its rootdir first on sys.path, so a copy of the
# package alone would be shadowed by the work tree's).
COPIED = ("board", "migrations", "tests", "pyproject.toml")
LINKED = ("templates", "static", "e2e", "bench")


def check(mutants) -> list[str]:
    """Each mutant's text must occur exactly once in its file."""
    problems = []
    for m in mutants:
        count = (ROOT / m.file).read_text().count(m.find)
        if count != 1:
            problems.append(f"{m.name}: its text occurs {count} times in {m.file}")
    return problems


def run(m: Mutant, pytest_args: list[str]) -> tuple[bool, float, str]:
    """Apply one mutant to a copy and run its tests; returns (killed, seconds, last line)."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{m.name}-") as tmp:
        copy = Path(tmp)
        for name in COPIED:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
            else:
                shutil.copy2(ROOT / name, copy / name)
        if (ROOT / "tests" / "clients" / "node_modules").exists():
            (copy / "tests" / "clients" / "node_modules").symlink_to(ROOT / "tests" / "clients" / "node_modules")
        for name in LINKED:
            (copy / name).symlink_to(ROOT / name)
        target = copy / m.file
        target.write_text(target.read_text().replace(m.find, m.replace, 1))
        env = {**os.environ, "SWITCHBOARD_TEST_DATA_DIR": str(ROOT / ".switchboard" / "mutants")}
        probe = subprocess.run([sys.executable, "-c", "import board; print(board.__file__)"], cwd=copy, env=env,
                               capture_output=True, text=True)
        if not probe.stdout.startswith(str(copy)):
            raise RuntimeError(f"the mutant's copy is not what imports: {probe.stdout}{probe.stderr}")
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
             *pytest_args, *m.tests], cwd=copy, env=env, capture_output=True, text=True)
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        # Killed means a test failed; an error starting the tests is not a kill.
        killed = proc.returncode == 1 and any(" failed" in line for line in lines[-3:])
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"{m.name}: pytest exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
        return killed, time.monotonic() - started, lines[-1] if lines else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--group", action="append", help="only this group (repeatable)")
    ap.add_argument("--name", action="append", help="only this mutant (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("pytest_args", nargs="*", help="extra arguments for pytest")
    args = ap.parse_args()
    chosen = [m for m in MUTANTS if (not args.group or m.group in args.group) and (not args.name or m.name in args.name)]
    if args.list:
        for m in chosen:
            print(f"{m.group:9} {m.name:34} {m.why}")
        return 0
    problems = check(chosen)
    if problems:
        print("the mutant list is out of date with the code:", *problems, sep="\n  ")
        return 2
    survivors = []
    for m in chosen:
        killed, seconds, last = run(m, args.pytest_args)
        print(f"{'killed  ' if killed else 'SURVIVED'} {m.name:34} {seconds:5.1f} s  {last}", flush=True)
        if not killed:
            survivors.append(m)
    print(f"{len(chosen) - len(survivors)} of {len(chosen)} mutants killed; {len(survivors)} survived")
    for m in survivors:
        print(f"  survivor {m.name}: {m.why} ({m.file}; tests {', '.join(m.tests)})")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
