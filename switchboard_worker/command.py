"""`switchboard work -- COMMAND [ARGS...]`: run a command for each claimed todo.

For each todo: the todo as JSON on standard input; SWITCHBOARD_TODO_ID, SWITCHBOARD_QUEUE,
SWITCHBOARD_TODO_TITLE, SWITCHBOARD_TODO_PRIORITY, SWITCHBOARD_TODO_RUN_AT and SWITCHBOARD_TODO_KEY
(empty when it has none), SWITCHBOARD_TODO_AFTER (JSON: the ids it waited for),
SWITCHBOARD_TODO_SCHEDULE_ID (empty when no schedule added it), SWITCHBOARD_ATTEMPT, SWITCHBOARD_ATTEMPT_SEQ, SWITCHBOARD_MAX_ATTEMPTS
and SWITCHBOARD_PRIOR_ATTEMPTS (JSON: seq, outcome, died, summary of up to five earlier
attempts, newest first) in the environment (the token is taken out of it), and TRACEPARENT
(the attempt's span) when the server exports traces. Lines on standard
error starting with `::note::`, `::summary::`, `::usage::` (JSON) or `::artifact::` talk to
Switchboard; the rest is the command's own. Exit 0 completes (standard output is the result:
JSON when it parses, else text), any other exit fails (the tail of standard error is the
summary). SIGTERM or SIGINT: claim nothing more, pass the signal to the running commands, wait
--grace seconds, then kill what is left and release its todo. docs/worker.md has the rest."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections import Counter, deque
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from switchboard_worker.connection import Closed, Lost, Refused, ToolError
from switchboard_worker.worker import Todo, Worker

NOTE, SUMMARY, USAGE, ARTIFACT = "::note::", "::summary::", "::usage::", "::artifact::"
TAIL_LINES = 20
LINE_LIMIT = 1024 * 1024  # the longest standard error line read whole
SUMMARY_BYTES = 2048
RESULT_CHARS = 60_000  # under the server's 64 KiB result bound once serialized
STDOUT_CAP = 4 * 1024 * 1024  # kept in memory at most; the result keeps the tail
TOKEN_ENV = ("SWITCHBOARD_TOKEN", "SWITCHBOARD_TOKEN_FILE")
USAGE_KEYS = {"input_tokens", "output_tokens", "cost_usd", "model"}
# What the worker cannot do without each verb of a worker's grant (claim_next it cannot work without).
WITHOUT = {
    "heartbeat": "a command running longer than the {lease:g} s lease loses it",
    "release": "a stop leaves its todo to the reaper, which uses up an attempt",
    "complete": "a command that exits 0 cannot complete its todo, whose lease lapses",
    "fail": "a command that fails cannot fail its todo, whose lease lapses",
}


class UsageError(Exception):
    pass


class Fatal(Exception):
    """The worker cannot go on (the server refused its queue, its command cannot start): the
    message is the one line it stops with."""


def shown(value: Any, limit: int = 60) -> str:
    """An untrusted value for a log line: control characters escaped, cut to `limit`."""
    text = str(value)
    out = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def now() -> str:
    return datetime.now(timezone.utc).strftime("%H:%M:%S")


def say(*parts: str) -> None:
    """A line of the worker's log, on standard output."""
    write(sys.stdout, now(), *parts)


def complain(*parts: str) -> None:
    """A line on standard error: why the worker stops."""
    write(sys.stderr, *parts)


def write(stream: Any, *parts: str) -> None:
    """Print a line; when nobody reads the stream any more (`switchboard work ... | head -3`),
    send this and every later line to /dev/null instead, and go on working: losing its reader
    must not stop the worker, nor keep a signal from stopping it."""
    try:
        print(*parts, file=stream, flush=True)
    except OSError:  # BrokenPipeError, or EIO from a closed terminal
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())  # what is still buffered goes there too
            os.close(devnull)


def cut_bytes(text: str, limit: int) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[-limit:].decode(errors="ignore")


class OneLine(logging.Formatter):
    """A library's log record as one escaped line on standard error, its exception named, never
    a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"{record.levelname.lower()}: {record.name}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({type(record.exc_info[1]).__name__})"
        return shown(text, 300)


def quiet_cancellations(record: logging.LogRecord) -> bool:
    """Drop what the MCP SDK logs when a call it was reading is cancelled (the stream it would
    hand the reply to is closed): the worker gave up on that call itself, at shutdown or on a
    reconnect."""
    exc = record.exc_info[1] if record.exc_info else None
    return type(exc).__name__ not in ("BrokenResourceError", "ClosedResourceError")


def setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine())
    handler.addFilter(quiet_cancellations)
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="switchboard work",
        description="Claim todos from a Switchboard server and run COMMAND for each (docs/worker.md).",
        usage="%(prog)s --url URL [--token-file PATH] [--queue Q] [--concurrency N] [--lease-seconds S] -- COMMAND [ARGS...]")
    p.add_argument("--url", default=os.environ.get("SWITCHBOARD_URL"),
                   help="the server's base URL (or SWITCHBOARD_URL), e.g. http://127.0.0.1:8000")
    p.add_argument("--token", help="the endpoint token; prefer SWITCHBOARD_TOKEN or --token-file (a command "
                                   "line is visible to other users of the machine)")
    p.add_argument("--token-file", default=os.environ.get("SWITCHBOARD_TOKEN_FILE"),
                   help="a file holding the token (or SWITCHBOARD_TOKEN_FILE)")
    p.add_argument("--queue", help="claim from this queue only (default: any the token may drain)")
    p.add_argument("--concurrency", type=int, default=1, help="commands run at once (default 1)")
    p.add_argument("--lease-seconds", type=float, default=60.0, help="the lease asked for; heartbeats every third")
    p.add_argument("--grace-seconds", type=float, default=10.0,
                   help="after SIGTERM or SIGINT, how long running commands get before they are killed (default 10)")
    p.add_argument("--poll-seconds", type=float, default=30.0,
                   help="the safety poll while the doorbell is quiet (default 30)")
    p.add_argument("--name", help="the claimant prefix (default host/pid); each claim adds /slot-N")
    p.add_argument("--max-todos", type=int, default=None, help="stop after this many todos")
    p.add_argument("--protocol", choices=("modern", "legacy"), default="modern",
                   help="MCP protocol generation: modern (2026-07-28, the default) or legacy (2025-11-25 sessions)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments, after --")
    return p


def read_token(args: argparse.Namespace) -> str:
    if args.token:
        return args.token.strip()
    if os.environ.get("SWITCHBOARD_TOKEN"):
        return os.environ["SWITCHBOARD_TOKEN"].strip()
    if args.token_file:
        try:
            token = Path(args.token_file).read_text().strip()
        except OSError as e:
            raise UsageError(f"cannot read --token-file: {e.strerror or e}") from None
        if not token:
            raise UsageError("--token-file is empty")
        return token
    raise UsageError("no token: set SWITCHBOARD_TOKEN, or pass --token-file PATH (or --token)")


def check(args: argparse.Namespace) -> list[str]:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError("no COMMAND: put it after --, e.g. switchboard work --url URL -- ./run.sh")
    if not args.url or not args.url.startswith(("http://", "https://")):
        raise UsageError("--url must be the server's http:// or https:// URL (or set SWITCHBOARD_URL)")
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if args.lease_seconds < 3:
        raise UsageError("--lease-seconds must be at least 3")
    if args.grace_seconds < 0:
        raise UsageError("--grace-seconds must not be negative")
    if args.poll_seconds <= 0:
        raise UsageError("--poll-seconds must be positive")
    if args.max_todos is not None and args.max_todos < 1:
        raise UsageError("--max-todos must be at least 1")
    if (why := unrunnable(command[0])) is not None:
        raise UsageError(f"cannot run the command {shown(command[0], 200)}: {why}")
    return command


def unrunnable(program: str) -> str | None:
    """Why the command's program cannot be started, found as the command will be (a path, or
    a name on PATH), or None: a worker that cannot run it must not fail every todo it claims."""
    if os.sep not in program:
        return None if shutil.which(program) else "not found on PATH (or not executable)"
    path = Path(program)
    if not path.exists():
        return "no such file"
    if path.is_dir():
        return "it is a directory"
    if not os.access(path, os.X_OK):
        return "not executable"
    return None


class Run:
    """One running command for one todo."""

    def __init__(self, todo: Todo, slot: int):
        self.todo, self.slot = todo, slot
        self.proc: asyncio.subprocess.Process | None = None
        self.notes: asyncio.Queue = asyncio.Queue()
        self.last_note: str | None = None
        self.summary: str | None = None
        self.artifact: str | None = None
        self.usage: dict | None = None
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.stdout = bytearray()
        self.signalled: str | None = None  # the signal the worker passed on, when it stopped it
        self.started = time.monotonic()


class CommandWorker:
    def __init__(self, args: argparse.Namespace, command: list[str], token: str):
        self.args, self.command = args, command
        self.worker = Worker(args.url, token, queue=args.queue, name=args.name, lease_seconds=args.lease_seconds,
                             poll_seconds=args.poll_seconds, grace_seconds=args.grace_seconds,
                             protocol=args.protocol)
        self.runs: set[Run] = set()
        self.counts: Counter[str] = Counter()
        self.claimed = 0
        self.reserved = 0
        self.stop_signal: str | None = None
        self.fatal: str | None = None  # why the worker stopped itself: its last line, on standard error
        self.granted: set[str] = set()  # the tools the token may call
        self.killing = asyncio.Event()
        self.shutdown = asyncio.Event()  # a signal came: running commands are being stopped

    # -- signals -------------------------------------------------------------------------

    def on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if not self.shutdown.is_set():
            self.begin_stop(name, signum)
        else:  # a second signal: no more grace
            self.killing.set()
            say("stopping now", f"({name})")

    def begin_stop(self, why: str, signum: int) -> None:
        """Claim nothing more and pass the signal to the running commands (their todos are
        released once they end, or when the grace is over); then say so."""
        self.stop_signal = why
        self.shutdown.set()
        self.worker.stop()
        for run in list(self.runs):
            self.signal_run(run, signum)
        say("stopping", f"({why}): claiming nothing more;",
            f"{len(self.runs)} running, {self.args.grace_seconds:g} s grace")

    def signal_run(self, run: Run, signum: int) -> None:
        run.signalled = signal.Signals(signum).name
        if run.proc is not None and run.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(run.proc.pid, signum)

    # -- the loop ------------------------------------------------------------------------

    async def main(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.on_signal, sig)
        try:
            if not await self.connected():
                return 0  # stopped before the server ever answered
        except Refused as e:
            complain(f"switchboard work: {e}")
            return 2
        try:
            self.granted = await self.worker.tools()
            refused = None if "claim_next" in self.granted else \
                "the token may not call claim_next, so it cannot work (vend one with the worker preset)"
        except Refused as e:
            refused = str(e)
        if refused is not None:
            await self.worker.conn.close()
            complain(f"switchboard work: {refused}")
            return 2
        say("working", f"on {shown(self.worker.conn.mcp_url, 200)}", f"queue {shown(self.args.queue or '(any)')},",
            f"concurrency {self.args.concurrency}, lease {self.args.lease_seconds:g} s")
        if missing := [verb for verb in WITHOUT if verb not in self.granted]:
            say("limited:", "; ".join(f"no {verb}: " + WITHOUT[verb].format(lease=self.args.lease_seconds)
                                      for verb in missing))
        slots = [asyncio.create_task(self.slot(n)) for n in range(self.args.concurrency)]
        try:
            await asyncio.gather(*slots)
        except (Refused, Fatal) as e:
            self.fatal = str(e)
        finally:
            self.worker.stop()
            for task in slots:
                task.cancel()
            await asyncio.gather(*slots, return_exceptions=True)
            if "release" in self.granted:
                await self.worker.release_held(self.release_summary())
            await self.worker.conn.close()
        c = self.counts
        say("stopped:", f"{self.claimed} claimed, {c['completed']} completed, {c['failed']} failed,",
            f"{c['released']} released, {c['lost']} lost" + (f", {c['left']} left to the reaper" if c["left"] else ""))
        if self.fatal is not None:
            complain(f"switchboard work: {self.fatal}")
            return 2
        return 0

    async def connected(self) -> bool:
        """Wait for the first connection, saying so once when the server is slow to answer;
        False when a signal stops the worker first."""
        with contextlib.suppress(asyncio.TimeoutError):
            await self.worker.conn.start(timeout=5)
            return True
        say("waiting", f"for {shown(self.worker.conn.mcp_url, 200)} to answer; retrying with backoff")
        start = asyncio.create_task(self.worker.conn.start())
        stop = asyncio.create_task(self.worker.stopping.wait())
        await asyncio.wait({start, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if start.done():
            start.result()  # Refused, raised
            return True
        start.cancel()
        await self.worker.conn.close()
        return False

    def release_summary(self) -> str:
        return f"released on shutdown ({self.stop_signal or 'stop'}): the worker stopped before the command finished"

    async def slot(self, n: int) -> None:
        while not self.worker.stopping.is_set():
            if self.args.max_todos is not None and self.reserved >= self.args.max_todos:
                self.worker.stop()
                return
            self.reserved += 1  # counted before the claim, so slots together claim at most --max-todos
            try:
                todo = await self.worker.claim(slot=n)
            except Refused:
                raise
            except Closed:
                return
            except ToolError as e:  # forbidden: a queue the token is not granted, or no claim_next
                raise Fatal(f"{self.args.queue and 'queue ' + shown(self.args.queue) + ': ' or ''}"
                            f"the server refused the claim: {shown(e.message, 200)}") from None
            finally:
                self.reserved -= 1
            if todo is None:
                return
            self.reserved += 1
            self.claimed += 1
            say("claimed", todo.id, f"queue {shown(todo.queue)}", f"attempt {todo.attempt}/{todo.max_attempts}",
                f"slot {n}:", shown(todo.title))
            await self.handle(todo, n)

    async def handle(self, todo: Todo, slot: int) -> None:
        run = Run(todo, slot)
        self.runs.add(run)
        try:
            await self.execute(run)
            await self.close(run)
        finally:
            self.runs.discard(run)

    def environment(self, todo: Todo) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in TOKEN_ENV}
        prior = [{"seq": a.get("seq"), "outcome": a.get("outcome"), "died": a.get("died"),
                  "summary": a.get("summary")} for a in todo.prior_attempts]
        env.update(SWITCHBOARD_TODO_ID=todo.id, SWITCHBOARD_QUEUE=todo.queue, SWITCHBOARD_TODO_TITLE=todo.title,
                   SWITCHBOARD_TODO_PRIORITY=str(todo.priority), SWITCHBOARD_TODO_RUN_AT=todo.run_at or "",
                   SWITCHBOARD_TODO_KEY=todo.key or "", SWITCHBOARD_TODO_AFTER=json.dumps(todo.after),
                   SWITCHBOARD_TODO_SCHEDULE_ID=todo.schedule_id or "",
                   SWITCHBOARD_ATTEMPT=str(todo.attempt), SWITCHBOARD_ATTEMPT_SEQ=str(todo.attempt_seq),
                   SWITCHBOARD_MAX_ATTEMPTS=str(todo.max_attempts), SWITCHBOARD_PRIOR_ATTEMPTS=json.dumps(prior))
        if todo.traceparent:  # the attempt's span, for the command's own spans (docs/tracing.md)
            env["TRACEPARENT"] = todo.traceparent
        return env

    async def execute(self, run: Run) -> None:
        todo = run.todo
        try:
            run.proc = await asyncio.create_subprocess_exec(
                *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self.environment(todo), start_new_session=True,
                limit=LINE_LIMIT)
        except OSError as e:  # it passed the check at start: since removed, or its #! interpreter is missing
            self.fatal = f"cannot run the command {shown(self.command[0], 200)}: {shown(e.strerror or e, 200)}"
            if not self.shutdown.is_set():
                self.begin_stop("the command cannot run", signal.SIGTERM)
            return
        if self.shutdown.is_set():  # signalled while it started
            self.signal_run(run, signal.SIGTERM)
        notes = asyncio.create_task(self.send_notes(run))
        feed = asyncio.create_task(self.feed(run))
        readers = [asyncio.create_task(self.read_stdout(run)), asyncio.create_task(self.read_stderr(run))]
        watch = asyncio.create_task(self.watch(run))
        try:
            await asyncio.gather(*readers)
            await run.proc.wait()
        finally:
            watch.cancel()
            feed.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
            await run.notes.put(None)
            with contextlib.suppress(Exception):
                await notes  # every note before the close

    async def feed(self, run: Run) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            run.proc.stdin.write(json.dumps(run.todo.data).encode() + b"\n")
            await run.proc.stdin.drain()
            run.proc.stdin.close()

    async def watch(self, run: Run) -> None:
        """Stop the command when its lease is lost, or after the grace period on shutdown."""
        lost = asyncio.create_task(run.todo.lease_lost.wait())
        stopping = asyncio.create_task(self.shutdown.wait())
        try:
            await asyncio.wait({lost, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if lost.done():
                say("lease lost", run.todo.id, "(lapsed and taken over, or reaped): stopping the command")
                self.signal_run(run, signal.SIGTERM)
            killing = asyncio.create_task(self.killing.wait())
            await asyncio.wait({killing}, timeout=self.args.grace_seconds)
            killing.cancel()
            self.signal_run(run, signal.SIGKILL)
        finally:
            lost.cancel()
            stopping.cancel()

    async def read_stdout(self, run: Run) -> None:
        while chunk := await run.proc.stdout.read(65536):
            run.stdout += chunk
            if len(run.stdout) > STDOUT_CAP:
                del run.stdout[: len(run.stdout) - STDOUT_CAP]

    async def read_stderr(self, run: Run) -> None:
        while True:
            try:
                line = await run.proc.stderr.readline()
            except ValueError:  # a line longer than LINE_LIMIT: keep its start in the tail
                line = await run.proc.stderr.read(LINE_LIMIT)
            if not line:
                return
            text = line.decode(errors="replace").rstrip("\r\n")
            if text.startswith(NOTE):
                note = text[len(NOTE):].strip()
                if note:
                    run.last_note = note
                    await run.notes.put(note)
            elif text.startswith(SUMMARY):
                run.summary = text[len(SUMMARY):].strip() or None
            elif text.startswith(ARTIFACT):
                run.artifact = text[len(ARTIFACT):].strip() or None
            elif text.startswith(USAGE):
                run.usage = self.parse_usage(run, text[len(USAGE):])
            else:
                run.tail.append(text)

    def parse_usage(self, run: Run, text: str) -> dict | None:
        try:
            usage = json.loads(text)
        except ValueError:
            usage = None
        if not isinstance(usage, dict) or not usage or not set(usage) <= USAGE_KEYS:
            say("ignored", run.todo.id, "a ::usage:: line that is not a JSON object of",
                ", ".join(sorted(USAGE_KEYS)))
            return run.usage
        return usage

    async def send_notes(self, run: Run) -> None:
        while (text := await run.notes.get()) is not None:
            try:
                await run.todo.note(text)
            except ToolError as e:
                say("note refused", run.todo.id, f"{e.code}" + (f" ({e.argument})" if e.argument else ""))
            except (Lost, Closed):
                return

    # -- closing -------------------------------------------------------------------------

    def result_of(self, run: Run) -> Any:
        text = run.stdout.decode(errors="replace")
        if not text.strip():
            return None
        with contextlib.suppress(ValueError):
            value = json.loads(text)
            if len(json.dumps(value)) <= RESULT_CHARS:
                return value
        return text if len(text) <= RESULT_CHARS else text[-RESULT_CHARS:]

    async def close(self, run: Run) -> None:
        todo, proc = run.todo, run.proc
        took = time.monotonic() - run.started
        if not todo.open:  # the lease was lost while it ran: nothing of ours to close
            self.counts["lost"] += 1
            say("lost", todo.id, f"after {took:.1f} s: the lease was no longer ours")
            return
        code = proc.returncode if proc is not None else None
        if proc is None:  # it never started: not the todo's fault, so it goes back unspent
            verb, args = "release", {"summary": f"released: the worker could not start its command ({self.fatal})"}
        elif run.signalled and self.shutdown.is_set():
            how = "was stopped" if code is None or code != 0 else "stopped and exited 0"
            verb, args = "release", {"summary": f"released on shutdown ({self.stop_signal}): the command {how} "
                                                f"after {took:.1f} s", "usage": run.usage}
        elif code == 0:
            summary = run.summary or run.last_note or f"the command exited 0 after {took:.1f} s"
            verb, args = "complete", {"result": self.result_of(run), "summary": summary, "artifact": run.artifact,
                                      "usage": run.usage}
        else:
            if code < 0:
                why = f"the command was killed by {signal.Signals(-code).name}"
            else:
                why = f"the command exited {code}"
            tail = "\n".join(run.tail).strip()
            summary = run.summary or (f"{why}: {tail}" if tail else why)
            verb, args = "fail", {"result": self.result_of(run), "summary": cut_bytes(summary, SUMMARY_BYTES),
                                  "artifact": run.artifact, "usage": run.usage}
        if verb not in self.granted:  # say, no release: stop heartbeating, and the reaper takes it
            todo.abandon()
            self.counts["left"] += 1
            say("left", todo.id, f"to the reaper after {took:.1f} s: the token may not {verb}")
            return
        outcome = await self.send_close(todo, verb, args)
        self.counts[outcome] += 1
        extra = " (replayed after a reconnect)" if todo.replayed else ""
        say(outcome, todo.id, f"in {took:.1f} s{extra}" + (f", exit {code}" if code else ""))

    async def send_close(self, todo: Todo, verb: str, args: dict) -> str:
        """Close; when an argument is refused as invalid (a credential-looking summary, a bad
        artifact), close again without it rather than leave the todo to lapse."""
        for _ in range(4):
            try:
                if verb == "release":
                    await todo.release(**{k: v for k, v in args.items() if k != "result"})
                elif verb == "complete":
                    await todo.complete(**args)
                else:
                    await todo.fail(**args)
                return todo.outcome or verb
            except ToolError as e:
                if e.code == "invalid" and e.argument in args and args[e.argument] is not None:
                    say("refused", todo.id, f"{e.argument} ({shown(e.message, 120)}); closing without it")
                    args = {**args, e.argument: None}
                    if e.argument in ("summary", "result"):
                        args["summary"] = f"the {e.argument} was refused by the server: {e.message}"[:SUMMARY_BYTES]
                    continue
                if e.code in ("conflict", "not_found"):
                    return "lost"
                say("close refused", todo.id, f"{verb}: {e.code}")
                return "lost"
            except (Lost, Closed):
                return "lost"
        return "lost"


def main(argv: list[str] | None = None, prog: str = "switchboard work") -> int:
    p = parser()
    p.prog = prog
    args = p.parse_args(argv)
    try:
        command = check(args)
        token = read_token(args)
    except UsageError as e:
        complain(f"{prog}: {e}")
        return 2
    setup_logging()
    try:
        return asyncio.run(CommandWorker(args, command, token).main())
    except KeyboardInterrupt:
        return 130
