"""The `switchboard` command line: serve, migrate, user add, team create/add/remove/list,
endpoint vend/revoke, queue pause/resume/limit, schedule add/list/pause/resume/remove, audit,
demo, and work (the worker, `switchboard_worker`, which is a client of the server
and has a parser of its own)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import json
import logging
import sys
from typing import AsyncIterator

from board import logs
from board.store.auth import hash_password
from board.config import Settings, from_env
from board.store.db import DatabaseUnusable, MigrationError, reachable, unusable_reported
from board.errors import Invalid, SwitchboardError
from board.store.vocabulary import ROLES

log = logging.getLogger("switchboard")


class CliError(Exception):
    pass


@contextlib.asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator["Store"]:  # noqa: F821
    """A migrated store for one command, on DATABASE_URL or the embedded Postgres."""
    from board.store.db import EmbeddedPostgres, migrate, open_pool
    from board.store.store import Store

    embedded = None
    url = settings.database_url
    if not url:
        embedded = EmbeddedPostgres(settings.data_dir)
        url = await asyncio.to_thread(embedded.start)
    try:
        with unusable_reported(settings.database_url):
            await migrate(url)
            pool = await open_pool(url, min_size=1, max_size=4)
        try:
            yield Store(pool, settings)
        finally:
            await pool.close()
    finally:
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="switchboard", description="A Postgres-backed work queue for AI agents.")
    sub = p.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="migrate, then serve the Board, /mcp and /metrics")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="the port to listen on (default: 8000)")
    serve.add_argument("--workers", type=_workers, default=1, metavar="N",
                       help="serving processes on the port, each replaced if it dies; `auto`: one per core "
                            "(default: 1)")

    sub.add_parser("migrate", help="apply pending migrations and exit")

    user = sub.add_parser("user", help="manage Board users").add_subparsers(dest="user_command", required=True)
    add = user.add_parser("add", help="create a Board user")
    add.add_argument("name", help="the user's sign-in name")
    add.add_argument("--password-stdin", action="store_true", help="read the password from standard input")

    team = sub.add_parser("team", help="teams: spaces several people share, each with a role").add_subparsers(
        dest="team_command", required=True)
    create = team.add_parser("create", help="create a team; its owner is its first admin")
    create.add_argument("name", help="the team's name (a person and a team cannot share a name)")
    create.add_argument("--owner", required=True, help="the Board user who is its first admin")
    member = team.add_parser("add", help="add a person to a team with a role, or change their role")
    member.add_argument("name", help="the team's name")
    member.add_argument("user", help="the Board user")
    member.add_argument("--role", required=True, choices=ROLES,
                        help="viewer: sees everything, changes nothing; operator: also acts on todos; "
                             "admin: also manages members, endpoints, pauses, limits and schedules")
    gone = team.add_parser("remove", help="remove a person from a team (its last admin stays)")
    gone.add_argument("name", help="the team's name")
    gone.add_argument("user", help="the Board user")
    teams = team.add_parser("list", help="every team with its members and their roles")
    teams.add_argument("--json", action="store_true", help="print JSON rather than a table")

    audit = sub.add_parser("audit", help="the record of people's actions in a team (or a user's own space), "
                                         "newest first")
    whose = audit.add_mutually_exclusive_group(required=True)
    whose.add_argument("--team", help="the team whose record to print")
    whose.add_argument("--user", help="the Board user whose own space's record to print")
    audit.add_argument("--since", help="only records from this time: an ISO 8601 date or time (UTC unless it "
                                       "says), or an age such as 30m, 24h or 7d")
    audit.add_argument("--limit", type=int, default=100, help="at most this many records (default: 100)")
    audit.add_argument("--json", action="store_true", help="print JSON lines rather than a table")

    endpoint = sub.add_parser("endpoint", help="manage agent endpoints").add_subparsers(
        dest="endpoint_command", required=True)
    vend = endpoint.add_parser("vend", help="create an endpoint credential; prints its token once")
    owner = vend.add_mutually_exclusive_group(required=True)
    owner.add_argument("--user", help="the Board user who owns the endpoint")
    owner.add_argument("--team", help="the team whose todos the endpoint shares with the team's other endpoints")
    vend.add_argument("--agent-id", required=True, help="the agent's id, shown on the Board")
    vend.add_argument("--queue", action="append", required=True, dest="queues",
                      help="a queue the endpoint may use; repeat for more")
    vend.add_argument("--scope", required=True, help="comma-separated verbs, e.g. claim_next,heartbeat,complete")
    vend.add_argument("--name", help="a name for the endpoint (default: the agent id)")
    vend.add_argument("--json", action="store_true", help="print the endpoint and its token as JSON")
    revoke = endpoint.add_parser("revoke", help="revoke an endpoint; its held todos are dead-lettered")
    revoke.add_argument("endpoint_id", help="the endpoint's id, as `endpoint vend` printed it")

    queue = sub.add_parser("queue", help="pause, resume or limit a user's queue").add_subparsers(
        dest="queue_command", required=True)
    for verb, helptext in (("pause", "agents claim nothing in the queue until it is resumed"),
                           ("resume", "agents may claim in the queue again; listening agents are told"),
                           ("limit", "how many of the queue's todos may be held (claimed or waiting for a "
                                     "person) at once; 0 removes the limit")):
        q = queue.add_parser(verb, help=helptext)
        whose = q.add_mutually_exclusive_group(required=True)
        whose.add_argument("--user", help="the Board user whose queue it is")
        whose.add_argument("--team", help="the team whose queue it is")
        q.add_argument("queue", help="the queue's name")
    queue.choices["limit"].add_argument("limit", metavar="N", help="the most held at once (0: no limit)")

    schedule = sub.add_parser("schedule", help="add, list, pause, resume or remove a user's schedules "
                                               "(each tick adds a todo)").add_subparsers(
        dest="schedule_command", required=True)
    add = schedule.add_parser("add", help="a schedule that adds a todo at each tick of a cron expression or "
                                          "every N seconds")
    whose = add.add_mutually_exclusive_group(required=True)
    whose.add_argument("--user", help="the Board user whose schedule it is")
    whose.add_argument("--team", help="the team whose schedule it is")
    add.add_argument("--queue", required=True, help="the queue its todos go to")
    add.add_argument("--title", required=True, help="the title of each todo it adds")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help='a five-field cron expression, e.g. "0 9 * * 1-5"')
    when.add_argument("--every", metavar="SECONDS", help="a tick every this many seconds")
    add.add_argument("--timezone", default=None, help="the IANA time zone the cron expression is read in "
                                                      "(default: UTC)")
    add.add_argument("--payload", default=None, help="each todo's payload, a JSON object")
    add.add_argument("--priority", default=None, help="each todo's priority, 0 (most urgent) to 4 (default: 2)")
    add.add_argument("--max-attempts", default=None, help="each todo's attempts before it is dead-lettered")
    add.add_argument("--overlap", action="store_true",
                     help="add a tick's todo even while the previous one is live (default: skip the tick and count it)")
    listing = schedule.add_parser("list", help="a user's schedules, their next run and ticks added and skipped")
    whose = listing.add_mutually_exclusive_group(required=True)
    whose.add_argument("--user", help="the Board user whose schedules to list")
    whose.add_argument("--team", help="the team whose schedules to list")
    listing.add_argument("--json", action="store_true", help="print JSON rather than a table")
    for verb, helptext in (("pause", "the schedule adds nothing until it is resumed"),
                           ("resume", "the schedule ticks again from its next run after now"),
                           ("remove", "remove the schedule; the todos it added stay")):
        schedule.add_parser(verb, help=helptext).add_argument("id", help="the schedule's id, as `schedule list` prints it")

    demo = sub.add_parser("demo", help="a live demo: server, embedded Postgres, seeded todos, simulated agents")
    demo.add_argument("--port", type=int, default=8000, help="the port the Board and /mcp listen on (default: 8000)")
    demo.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    demo.add_argument("--duration", type=float, default=None,
                      help="stop after this many seconds (default: run until Ctrl-C)")

    # Listed for --help only: main() hands `work` and everything after it to the worker's parser.
    sub.add_parser("work", add_help=False, help="claim todos and run a command for each (docs/worker.md; "
                                                "`switchboard work --help`)")
    return p


async def _user_add(settings: Settings, name: str, password_stdin: bool) -> str:
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != password:
            raise CliError("the passwords differ")
    if len(password) < 8:
        raise CliError("the password must be at least 8 characters")
    async with open_store(settings) as store:
        row = await store.user_insert(name, hash_password(password))
    return f"created user {row['username']} (id {row['id']})"


async def _endpoint_vend(settings: Settings, args) -> str:
    scope = [v.strip() for v in args.scope.split(",") if v.strip()]
    async with open_store(settings) as store:
        space = await _space(store, args)
        row, token = await store.endpoint_vend(space, name=args.name or args.agent_id, agent_id=args.agent_id,
                                               queues=args.queues, scope=scope)
    if args.json:
        return json.dumps({"endpoint_id": row["id"], "token": token, "agent_id": row["agent_id"],
                           "queues": row["queues"], "scope": row["scope"], "name": row["name"]})
    return (f"endpoint {row['id']} for agent {row['agent_id']}\n"
            f"queues: {', '.join(row['queues'])}\nscope: {', '.join(row['scope'])}\n"
            f"token (shown once, store it now): {token}")


async def _endpoint_revoke(settings: Settings, endpoint_id: str) -> str:
    from board.store.store import Human

    async with open_store(settings) as store:
        owner = await store.endpoint_owner(endpoint_id) if _uuid(endpoint_id) else None
        # recorded in the endpoint's space, as the command line's action
        n = await store.endpoint_revoke(endpoint_id, user_id=None if owner is None else Human(owner, "", via="cli"))
    return f"revoked endpoint {endpoint_id}; {n} held todo(s) dead-lettered"


async def _queue_toggle(settings: Settings, args) -> str:
    async with open_store(settings) as store:
        human = await _space(store, args)
        if args.queue_command == "pause":
            done = await store.queue_pause(human, args.queue)
        else:
            done = await store.queue_resume(human, args.queue)
    whose = args.team or args.user
    if not done["changed"]:
        return f"queue {args.queue} of {whose} was {'already' if args.queue_command == 'pause' else 'not'} paused"
    return f"{args.queue_command}d queue {args.queue} of {whose}"


async def _queue_limit(settings: Settings, args) -> str:
    try:
        limit = int(args.limit)
    except ValueError:
        raise CliError(f"the limit must be a whole number, 0 to remove it (got {args.limit!r})") from None
    async with open_store(settings) as store:
        now = await store.queue_limit_set(await _space(store, args), args.queue, limit)
    whose = args.team or args.user
    if now is None:
        return f"queue {args.queue} of {whose}: no limit"
    return f"queue {args.queue} of {whose}: at most {now} held at once"


def _whole(text: str | None, option: str) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise CliError(f"{option} must be a whole number (got {text!r})") from None


async def _schedule_add(settings: Settings, args) -> str:
    payload = None
    if args.payload is not None:
        try:
            payload = json.loads(args.payload)
        except ValueError:
            raise CliError(f"--payload must be a JSON object (got {args.payload!r})") from None
    fields = {"queue": args.queue, "title": args.title, "cron": args.cron,
              "every_seconds": _whole(args.every, "--every"), "timezone": args.timezone, "payload": payload,
              "priority": _whole(args.priority, "--priority"),
              "max_attempts": _whole(args.max_attempts, "--max-attempts"), "overlap": args.overlap}
    async with open_store(settings) as store:
        space = await _space(store, args)
        try:
            s = await store.schedule_add(space, **fields)
        except Invalid as e:  # name the option as typed
            raise CliError(f"{e.message} (--{(e.argument or '').replace('_seconds', '').replace('_', '-')})") from None
    return f"schedule {s['id']} added: {_when(s)}, next run {_local(s['next_at'], s)}"


def _when(s: dict) -> str:
    if s["cron"] is not None:
        return f"cron {s['cron']} ({s['timezone']})"
    return f"every {s['every_seconds']} s"


def _local(at, s: dict) -> str:
    from zoneinfo import ZoneInfo
    return at.astimezone(ZoneInfo(s["timezone"])).isoformat(timespec="seconds")


async def _space(store, args) -> "Human":  # noqa: F821
    """The space a command acts in (--team, else --user), as the command line acting there:
    for --user, that person (their own space); for --team, no one in particular."""
    from board.store.store import Human

    if getattr(args, "team", None):
        return await store.team_space(args.team)
    user = await store.user_by_name(args.user)
    if user is None:
        raise CliError(f"no user named {args.user!r}; create one with `switchboard user add {args.user}`")
    return Human(user["id"], user["username"], via="cli")


def _uuid(text: str) -> bool:
    import uuid
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


async def _team(settings: Settings, args) -> str:
    async with open_store(settings) as store:
        if args.team_command == "create":
            team = await store.team_create(args.name, owner=args.owner)
            return f"created team {team['name']} (id {team['id']}); {args.owner} is its admin"
        if args.team_command == "list":
            teams = await store.teams_all()
            if args.json:
                return json.dumps([{"name": t["name"], "created_at": t["created_at"].isoformat(),
                                    "members": t["members"]} for t in teams], indent=2)
            if not teams:
                return "no teams yet (switchboard team create NAME --owner USER)"
            return "\n".join(f"{t['name']}: " + ", ".join(f"{m['username']} ({m['role']})" for m in t["members"])
                             for t in teams)
        space = await store.team_space(args.name)
        if args.team_command == "add":
            out = await store.team_member_set(space, args.user, args.role)
            if out["was"] is None:
                return f"added {args.user} to {args.name} as {out['role']}"
            return f"{args.user} is {out['role']} of {args.name} (was {out['was']})"
        out = await store.team_member_remove(space, args.user)
        return f"removed {args.user} from {args.name} (was {out['was']})"


def _since(text: str | None):
    """--since: an ISO 8601 date or time (UTC unless it says), or an age (30m, 24h, 7d)."""
    import re
    from datetime import datetime, timedelta, timezone

    if text is None:
        return None
    age = re.fullmatch(r"(\d{1,6})([smhd])", text.strip())
    if age:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[age.group(2)]
        return datetime.now(timezone.utc) - timedelta(**{unit: int(age.group(1))})
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CliError(f"--since must be an ISO 8601 date or time, or an age such as 30m, 24h or 7d "
                       f"(got {text!r})") from None
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


async def _audit(settings: Settings, args) -> str:
    since = _since(args.since)
    async with open_store(settings) as store:
        space = await _space(store, args)
        rows = await store.audit_list(space, since=since, limit=args.limit)
    if args.json:
        return "\n".join(json.dumps({"at": r["at"].isoformat(), "who": r["actor_name"], "action": r["action"],
                                     "todo_id": r["todo_id"], "queue": r["queue"], "from": r["source"],
                                     "detail": r["detail"]}) for r in rows)
    if not rows:
        return "no records"
    table = [("AT", "WHO", "ACTION", "TODO", "QUEUE", "FROM", "DETAIL")]
    for r in rows:
        table.append((r["at"].isoformat(timespec="seconds"), logs.field(r["actor_name"]) if r["actor_name"] else "(command line)",
                      r["action"], r["todo_id"] or "-", logs.field(r["queue"] or "-"), r["source"],
                      " ".join(f"{k}={logs.field(str(v))}" for k, v in sorted(r["detail"].items()))))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in table).rstrip()


async def _schedule_list(settings: Settings, args) -> str:
    async with open_store(settings) as store:
        rows = await store.schedules_list((await _space(store, args)).user_id)
    if args.json:
        return json.dumps([r | {"next_at": _local(r["next_at"], r), "created_at": r["created_at"].isoformat(),
                                "last_tick_at": r["last_tick_at"] and r["last_tick_at"].isoformat()}
                           for r in rows], indent=2)
    table = [("ID", "QUEUE", "TITLE", "WHEN", "NEXT RUN", "PAUSED", "ADDED", "SKIPPED")]
    for r in rows:
        table.append((r["id"], r["queue"], r["title"], _when(r), _local(r["next_at"], r),
                      "yes" if r["paused"] else "no", str(r["ticks_added"]),
                      str(r["ticks_skipped"]) + ("" if r["endpoint_live"] else
                                                 " (no live endpoint is granted the queue: ticks are skipped)")))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in table).rstrip()


async def _schedule_toggle(settings: Settings, args) -> str:
    async with open_store(settings) as store:
        if args.schedule_command == "remove":
            await store.schedule_remove(None, args.id)
            return f"removed schedule {args.id}"
        if args.schedule_command == "pause":
            changed = await store.schedule_pause(None, args.id)
        else:
            changed = await store.schedule_resume(None, args.id)
    if not changed:
        return f"schedule {args.id} was {'already' if args.schedule_command == 'pause' else 'not'} paused"
    return f"{args.schedule_command}d schedule {args.id}"


async def _migrate(settings: Settings) -> str:
    async with open_store(settings):
        pass
    return "migrations are up to date"


def _workers(text: str) -> int:
    """--workers: a whole number from 1, or `auto` (the cores this process may run on)."""
    import os

    if text.strip().lower() == "auto":
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        return max(1, cores or 1)
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1, or auto (got {text!r})")
    return n


def _serve(settings: Settings, host: str, port: int, workers: int) -> None:
    from board.app import serve

    if not settings.secret_key or settings.secret_key in ("change-me", "secret", "changeme"):
        raise CliError("SWITCHBOARD_SECRET_KEY must be set to a long random value to serve "
                       "(try: export SWITCHBOARD_SECRET_KEY=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))'))")
    if len(settings.secret_key) < 16:
        raise CliError("SWITCHBOARD_SECRET_KEY must be at least 16 characters")
    if settings.database_url:  # a bad DATABASE_URL is one line here, not a failed startup's traceback
        asyncio.run(reachable(settings.database_url))
    log.info("listening on http://%s:%d (Board at /, MCP at /mcp, metrics at /metrics)%s", host, port,
             f" with {workers} worker processes" if workers > 1 else "")
    serve(settings, host, port, workers)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["work"]:  # the worker needs no server settings, database or logging setup
        from switchboard_worker.command import main as work

        return work(argv[1:])
    args = _parser().parse_args(argv)
    settings = None
    try:
        settings = from_env()
        logs.configure(settings.log_format)
        if args.command == "serve":
            _serve(settings, args.host, args.port, args.workers)
            return 0
        if args.command == "demo":
            from board.demo import run_demo
            return run_demo(settings, host=args.host, port=args.port, duration=args.duration)
        if args.command == "migrate":
            out = asyncio.run(_migrate(settings))
        elif args.command == "user":
            out = asyncio.run(_user_add(settings, args.name, args.password_stdin))
        elif args.command == "queue" and args.queue_command == "limit":
            out = asyncio.run(_queue_limit(settings, args))
        elif args.command == "queue":
            out = asyncio.run(_queue_toggle(settings, args))
        elif args.command == "schedule" and args.schedule_command == "add":
            out = asyncio.run(_schedule_add(settings, args))
        elif args.command == "schedule" and args.schedule_command == "list":
            out = asyncio.run(_schedule_list(settings, args))
        elif args.command == "schedule":
            out = asyncio.run(_schedule_toggle(settings, args))
        elif args.command == "team":
            out = asyncio.run(_team(settings, args))
        elif args.command == "audit":
            out = asyncio.run(_audit(settings, args))
        elif args.command == "endpoint" and args.endpoint_command == "vend":
            out = asyncio.run(_endpoint_vend(settings, args))
        else:
            out = asyncio.run(_endpoint_revoke(settings, args.endpoint_id))
        print(out)
        return 0
    except SwitchboardError as e:
        arg = f" ({e.argument})" if e.argument else ""
        print(f"switchboard: {e.message}{arg}", file=sys.stderr)
        return 2
    except (CliError, MigrationError) as e:
        print(f"switchboard: {e}", file=sys.stderr)
        return 2
    except DatabaseUnusable as e:  # DATABASE_URL malformed, its host unknown, refused, or auth failed
        print(f"switchboard: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
