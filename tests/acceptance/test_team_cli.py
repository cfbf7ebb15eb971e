"""`switchboard team ...`, `switchboard endpoint vend --team` and `switchboard audit` as an
operator runs them: a team created with its owner as admin, members added, their roles
changed and removed (never the last admin), listed as text or JSON; a team endpoint whose
token claims what another endpoint of the team added; the record printed newest first
since a time, as a table or JSON lines; bad input one line on stderr and exit status 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from board.store.vocabulary import VERBS
from tests.conftest import ROOT, make_user


def _cli(db_url: str):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}, "DATABASE_URL": db_url}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "board", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)

    return cli


async def test_an_operator_makes_a_team_manages_its_members_and_reads_what_they_did(store, db_url):
    for name in ("ada", "bob", "cy"):
        await make_user(store, name)
    cli = _cli(db_url)
    ran = cli("team", "create", "platform", "--owner", "ada")
    assert ran.returncode == 0 and "ada is its admin" in ran.stdout, ran.stderr
    assert cli("team", "add", "platform", "bob", "--role", "operator").stdout.strip() == \
        "added bob to platform as operator"
    assert cli("team", "add", "platform", "cy", "--role", "viewer").returncode == 0
    assert cli("team", "add", "platform", "bob", "--role", "admin").stdout.strip() == \
        "bob is admin of platform (was operator)"
    assert cli("team", "remove", "platform", "cy").stdout.strip() == "removed cy from platform (was viewer)"
    listed = json.loads(cli("team", "list", "--json").stdout)
    assert [(t["name"], t["members"]) for t in listed] == [
        ("platform", [{"username": "ada", "role": "admin"}, {"username": "bob", "role": "admin"}])]
    assert cli("team", "list").stdout.strip() == "platform: ada (admin), bob (admin)"

    vend = cli("endpoint", "vend", "--team", "platform", "--agent-id", "planner", "--queue", "builds",
               "--scope", ",".join(VERBS), "--json")
    assert vend.returncode == 0, vend.stderr
    worker = json.loads(cli("endpoint", "vend", "--team", "platform", "--agent-id", "worker", "--queue", "builds",
                            "--scope", "claim_next,complete", "--json").stdout)
    planner = await store.endpoint_authenticate(json.loads(vend.stdout)["token"])
    added = await store.todo_add(planner, queue="builds", title="ship it")
    claimed = await store.todo_claim_next(await store.endpoint_authenticate(worker["token"]))
    assert claimed["todo"]["id"] == added["id"]
    assert cli("queue", "pause", "--team", "platform", "builds").stdout.strip() == "paused queue builds of platform"

    lines = [json.loads(line) for line in cli("audit", "--team", "platform", "--json").stdout.splitlines()]
    assert [(r["action"], r["who"], r["from"]) for r in lines] == [
        ("pause", None, "cli"), ("vend", None, "cli"), ("vend", None, "cli"), ("member_remove", None, "cli"),
        ("member_set", None, "cli"), ("member_set", None, "cli"), ("member_set", None, "cli"),
        ("team_create", None, "cli")]
    assert lines[3]["detail"] == {"username": "cy"}
    table = cli("audit", "--team", "platform", "--since", "1h").stdout.splitlines()
    assert table[0].split() == ["AT", "WHO", "ACTION", "TODO", "QUEUE", "FROM", "DETAIL"]
    assert "(command line)" in table[1] and "pause" in table[1] and "builds" in table[1]
    assert cli("audit", "--team", "platform", "--since", "2999-01-01").stdout.strip() == "no records"


async def test_the_command_line_refuses_what_would_leave_a_team_without_an_admin_or_names_what_is_wrong(
        store, db_url):
    await make_user(store, "ada")
    cli = _cli(db_url)
    assert cli("team", "create", "ops", "--owner", "ada").returncode == 0
    for args, said in ((("team", "remove", "ops", "ada"), "ada is the last admin of ops"),
                       (("team", "add", "ops", "ada", "--role", "viewer"), "ada is the last admin of ops"),
                       (("team", "create", "ops", "--owner", "ada"), "the name ops is taken"),
                       (("team", "create", "ada", "--owner", "ada"), "the name ada is taken"),
                       (("team", "create", "new", "--owner", "nobody"), "no person named nobody"),
                       (("team", "add", "nope", "ada", "--role", "viewer"), "no team named nope"),
                       (("team", "add", "ops", "nobody", "--role", "viewer"), "no person named nobody"),
                       (("team", "remove", "ops", "nobody"), "nobody is not a member of ops"),
                       (("audit", "--team", "ops", "--since", "yesterday"), "--since must be"),
                       (("endpoint", "vend", "--team", "nope", "--agent-id", "a", "--queue", "q", "--scope",
                         "claim_next"), "no team named nope")):
        ran = cli(*args)
        assert ran.returncode == 2 and said in ran.stderr and "Traceback" not in ran.stderr, (args, ran.stderr)
    ran = cli("team", "add", "ops", "ada", "--role", "owner")
    assert ran.returncode == 2 and "invalid choice" in ran.stderr
