"""`switchboard schedule add|list|pause|resume|remove` as an operator runs it: a schedule
added by cron in a time zone or every N seconds, listed as a table or JSON (its next run in
its zone, ticks added and skipped), paused, resumed and removed; a bad expression, zone or
number is one line on stderr naming the option, and exit status 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT, make_agent, make_user


def _cli(db_url: str):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}, "DATABASE_URL": db_url}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "board", "schedule", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)

    return cli


async def test_the_command_line_adds_lists_pauses_resumes_and_removes_a_schedule(store, db_url):
    ada = await make_user(store, "ada")
    await make_agent(store, user=ada, queues=("reports",))
    cli = _cli(db_url)
    ran = cli("add", "--user", "ada", "--queue", "reports", "--title", "weekday report", "--cron", "0 9 * * 1-5",
              "--timezone", "Europe/Berlin", "--payload", '{"kind": "daily"}', "--priority", "1")
    assert ran.returncode == 0, ran.stderr
    assert "cron 0 9 * * 1-5 (Europe/Berlin)" in ran.stdout and "T09:00:00+0" in ran.stdout
    ran = cli("add", "--user", "ada", "--queue", "reports", "--title", "poll", "--every", "30", "--overlap")
    assert ran.returncode == 0, ran.stderr
    listed = json.loads(cli("list", "--user", "ada", "--json").stdout)
    assert [(s["title"], s["cron"], s["every_seconds"], s["timezone"], s["overlap"], s["payload"], s["priority"])
            for s in listed] == [("weekday report", "0 9 * * 1-5", None, "Europe/Berlin", False, {"kind": "daily"}, 1),
                                 ("poll", None, 30, "UTC", True, {}, 2)]
    assert listed[0]["next_at"].endswith("T09:00:00+01:00") or listed[0]["next_at"].endswith("T09:00:00+02:00")
    table = cli("list", "--user", "ada").stdout.splitlines()
    assert table[0].split() == ["ID", "QUEUE", "TITLE", "WHEN", "NEXT", "RUN", "PAUSED", "ADDED", "SKIPPED"]
    assert listed[1]["id"] in table[2] and "every 30 s" in table[2]
    sid = listed[0]["id"]
    assert cli("pause", sid).stdout.strip() == f"paused schedule {sid}"
    assert cli("pause", sid).stdout.strip() == f"schedule {sid} was already paused"
    assert (await store.schedules_list(ada.user_id))[0]["paused"]
    assert cli("resume", sid).stdout.strip() == f"resumed schedule {sid}"
    assert cli("remove", sid).stdout.strip() == f"removed schedule {sid}"
    assert [s["title"] for s in await store.schedules_list(ada.user_id)] == ["poll"]


async def test_a_schedule_whose_queue_no_endpoint_is_granted_says_its_ticks_are_skipped(store, db_url):
    await make_user(store, "bea")
    cli = _cli(db_url)
    assert cli("add", "--user", "bea", "--queue", "reports", "--title", "t", "--every", "60").returncode == 0
    assert "no live endpoint is granted the queue: ticks are skipped" in cli("list", "--user", "bea").stdout


async def test_a_bad_expression_zone_or_number_is_one_line_naming_the_option_and_exit_status_2(store, db_url):
    await make_user(store, "ada")
    cli = _cli(db_url)
    base = ("add", "--user", "ada", "--queue", "reports", "--title", "t")
    for args, says in [(base + ("--cron", "0 25 * * *"), "(--cron)"),
                       (base + ("--cron", "0 9 * * 1-5", "--timezone", "Europe/Atlantis"), "(--timezone)"),
                       (base + ("--every", "0"), "(--every)"),
                       (base + ("--every", "soon"), "--every must be a whole number"),
                       (base + ("--every", "5", "--payload", "[1]"), "(--payload)"),
                       (base + ("--every", "5", "--payload", "{"), "--payload must be a JSON object"),
                       (base + ("--every", "5", "--max-attempts", "0"), "(--max-attempts)"),
                       (("add", "--user", "nobody", "--queue", "q", "--title", "t", "--every", "5"),
                        "no user named 'nobody'"),
                       (("pause", "not-an-id"), "no such schedule"),
                       (("remove", "00000000-0000-0000-0000-000000000000"), "no such schedule")]:
        refused = cli(*args)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1 and says in lines[0], (args, refused.stderr)
        assert lines[0].startswith("switchboard: ") and refused.stdout == ""
    assert await store.schedules_list(None) == []
