"""Everything the demo prints: the banner with the credentials and the MCP client
configuration, one line per agent action, and the starting, settling and stopping notes.

The terminal never shows a lease token, a summary or an artifact; the endpoint token is
printed once, in the banner (its token line and the client configuration), because it is
what you paste into a client."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from board.demo.seeding import Credentials, Limits

AGENTS = ("fixer-1", "fixer-2", "reviewer-1", "flaky-1", "crasher-1", "hung-1", "rescuer-1")

_OUT_CLOSED = False


def out(text: str = "") -> None:
    """Print a demo line. When whoever reads our output has gone (`switchboard demo | head`),
    stop printing instead of failing: the demo must still stop cleanly, Postgres included."""
    global _OUT_CLOSED
    if _OUT_CLOSED:
        return
    try:
        print(text, flush=True)
    except (BrokenPipeError, ValueError):
        _OUT_CLOSED = True
        try:  # the interpreter flushes stdout again at exit; point it somewhere harmless
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass


def error(text: str) -> None:
    print(f"switchboard demo: {text}", file=sys.stderr, flush=True)


def short(title: str, limit: int = 44) -> str:
    return title if len(title) <= limit else title[: limit - 1] + "…"


def action(name: str, verb: str, queue: str = "", what: str = "", detail: str = "") -> None:
    """One action line: the time, who, what they did, the queue, the todo (or a count) and
    what came of it."""
    line = f"{time.strftime('%H:%M:%S')}  {name:<10} {verb:<11} {queue:<7} {what}"
    if detail:
        line += f"  {detail}"
    out(line.rstrip())


def todo_action(name: str, verb: str, todo: dict | None = None, detail: str = "") -> None:
    if todo is None:
        return action(name, verb, detail=detail)
    action(name, verb, todo["queue"], f'"{short(todo["title"])}"', detail)


def banner(base_url: str, data_dir: Path, creds: Credentials, limits: Limits, duration: float | None) -> None:
    from board.web.context import client_snippet

    mcp_url = f"{base_url}/mcp"
    snippet = client_snippet(mcp_url, creds.token, "switchboard-demo")
    out()
    out("Switchboard demo is running.")
    out()
    out(f"  Board     {base_url}/login")
    out(f"  user      {creds.username}")
    out(f"  password  {creds.password}")
    out()
    out(f"  MCP       {mcp_url}")
    out(f"  token     {creds.token}")
    out("  MCP client configuration (paste into your client's MCP settings):")
    for line in snippet.splitlines():
        out("    " + line)
    out("  A host that signs in with OAuth needs only the MCP URL: it sends you to the Board to approve.")
    out()
    out(f"  data      {data_dir}  (a second run reuses it; delete it to start over)")
    out(f"  settles   at most {limits.live_todos} live todos and {limits.max_todos} in all of its own")
    out("  keeps     every todo you add (on the Board or with your own agents); it deletes only "
        "its own finished todos, the oldest first")
    stop = "Ctrl-C stops it" if duration is None else f"stops in {duration:g} s, or on Ctrl-C"
    out(f"  agents    {', '.join(AGENTS)}; {stop}.")
    out()


def ignoring_database_url() -> None:
    out("Note: the demo ignores DATABASE_URL; it always runs its own embedded Postgres.")


def starting(pgdata: Path, fresh: bool) -> None:
    out(f"Starting Postgres in {pgdata}" + (" (first run: creating it)" if fresh else "") + " and the server ...")


def settled(limits: Limits) -> None:
    out(f"{time.strftime('%H:%M:%S')}  Every outcome is on the Board (completed, failed, released, reaped, "
        f"lease_expired, dead letters). Settling: the agents take breaks, at most {limits.live_todos} live "
        f"todos and {limits.max_todos} in all.")


def stopping(reason: str) -> None:
    out(f"\n{reason}: stopping the agents, then the server and Postgres ...")


def skipping_goodbyes(signame: str) -> None:
    out(f"{signame} again: skipping the agents' goodbyes; Postgres still stops cleanly ...")


def stopped() -> None:
    out("Stopped: agents, server and Postgres. Run `switchboard demo` again to pick up where it left off.")
