"""`switchboard queue limit --user NAME QUEUE N` as an operator runs it: it sets how many of
a user's queue's todos may be held at once, which claims then honour, 0 removes it, and what
is in force is printed; a bad user, queue or limit is one line on stderr and exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT, make_agent, make_user


def _cli(db_url: str):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}, "DATABASE_URL": db_url}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "board", "queue", "limit", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)

    return cli


async def test_the_command_line_limits_a_users_queue_and_0_removes_the_limit(store, db_url):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, queues=("builds",))
    for title in ("one", "two"):
        await store.todo_add(agent, queue="builds", title=title)
    cli = _cli(db_url)
    ran = cli("--user", "ada", "builds", "1")
    assert ran.returncode == 0 and ran.stdout.strip() == "queue builds of ada: at most 1 held at once", ran.stderr
    assert (await store.todo_claim_next(agent))["todo"] is not None
    assert (await store.todo_claim_next(agent))["todo"] is None  # the queue holds its one
    assert [(r["queue"], r["username"], r["max_held"], r["held"]) for r in await store.queue_limits_held()] == [
        ("builds", "ada", 1, 1)]
    ran = cli("--user", "ada", "builds", "0")
    assert ran.returncode == 0 and ran.stdout.strip() == "queue builds of ada: no limit", ran.stderr
    assert await store.queue_limits_held() == []
    assert (await store.todo_claim_next(agent))["todo"] is not None


async def test_a_bad_user_queue_or_limit_is_one_line_and_exit_status_2(store, db_url):
    await make_user(store, "ada")
    cli = _cli(db_url)
    for args, says in [(("--user", "nobody", "builds", "3"), "no user named 'nobody'"),
                       (("--user", "ada", "no spaces", "3"), "queue must be"),
                       (("--user", "ada", "builds", "-1"), "the limit must be an integer from 0 (none) to"),
                       (("--user", "ada", "builds", "three"), "the limit must be a whole number, 0 to remove it")]:
        refused = cli(*args)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1 and says in lines[0], (args, refused.stderr)
        assert lines[0].startswith("switchboard: ") and refused.stdout == ""
    assert await store.queue_limits_held() == []
