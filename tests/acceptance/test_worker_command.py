"""`switchboard work -- COMMAND` as a real subprocess against a real server: what the command
does (succeeds, fails, writes notes, reports usage, runs long, is stopped) is reflected exactly
in the todo's attempt history, read back over MCP with get_todo."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time

import pytest

from tests.acceptance.mcp_helpers import call, connect, make_team, vend
from tests.acceptance.worker_helpers import (PipedWorker, WorkerProcess, kill_pid_in, worker_argv, worker_env, working,
                                             write_command)
from tests.conftest import LOAD_SLACK_SECONDS, ROOT


@pytest.fixture
def server_settings(server_settings):
    # Retries due at once (the retry scheduler runs every 0.2 s), so a failed todo is claimable again soon.
    return server_settings.with_(retry_base_seconds=0, retry_max_seconds=0)


async def add(client, title: str, payload: dict, **extra) -> dict:
    return await call(client, "add_todo", {"queue": "q", "title": title, "payload": payload, **extra})


async def settled(client, todo_id: str, state: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        got = await call(client, "get_todo", {"id": todo_id, "notes_limit": 10})
        if got["state"] == state and all(a["ended_at"] for a in got["attempts"]):
            return got
        assert time.monotonic() < deadline, f"{todo_id} not {state} within {timeout} s: {got['state']}"
        await asyncio.sleep(0.1)


async def test_a_command_that_succeeds_completes_with_its_output_its_notes_and_its_usage(live_server, tmp_path):
    ep = await vend(live_server.store)
    usage = {"input_tokens": 1200, "output_tokens": 340, "cost_usd": 0.0087, "model": "m-1"}
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "build the thing", {"notes": ["reading the todo", "running make"], "usage": usage})
        async with working(live_server.url, ep.token, write_command(tmp_path), "--max-todos", "1") as worker:
            assert await worker.wait(60) == 0, worker.output
        got = await settled(client, todo["id"], "done")
    [attempt] = got["attempts"]
    assert attempt["outcome"] == "completed" and attempt["claimant"].endswith("/slot-0")
    assert attempt["summary"] == "running make"  # the last note, no ::summary:: line
    assert [n["text"] for n in attempt["notes"]] == ["running make", "reading the todo"]
    assert attempt["usage"] == usage
    result = got["result"]
    assert result["id"] == todo["id"] and result["queue"] == "q" and result["attempt"] == 1 and result["seq"] == 1
    assert result["title"] == result["stdin_title"] == "build the thing" and result["prior"] == []
    assert result["token_in_env"] is False  # the worker's token never reaches the command
    assert f"claimed {todo['id']}" in worker.output and f"completed {todo['id']} in " in worker.output
    assert "stopped: 1 claimed, 1 completed, 0 failed, 0 released, 0 lost" in worker.output


async def test_the_command_reads_the_todo_s_priority_run_at_and_key_in_its_environment(live_server, tmp_path):
    """SWITCHBOARD_TODO_PRIORITY, SWITCHBOARD_TODO_RUN_AT and SWITCHBOARD_TODO_KEY, empty for a
    todo without a run_at or a key; the P0 is claimed first although it was added last."""
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        plain = await add(client, "plain", {})
        keyed = await add(client, "keyed", {}, priority=0, key="nightly/2026-12-05", run_at="2026-01-01T09:00:00Z")
        async with working(live_server.url, ep.token, write_command(tmp_path), "--max-todos", "2") as worker:
            assert await worker.wait(60) == 0, worker.output
        got_keyed = (await settled(client, keyed["id"], "done"))["result"]
        got_plain = (await settled(client, plain["id"], "done"))["result"]
    assert got_keyed["order"] == ["0", keyed["run_at"], "nightly/2026-12-05"]
    assert got_keyed["stdin_order"] == [0, keyed["run_at"], "nightly/2026-12-05"]
    assert got_plain["order"] == ["2", "", ""] and got_plain["stdin_order"] == [2, None, None]
    assert worker.output.index(f"claimed {keyed['id']}") < worker.output.index(f"claimed {plain['id']}")


async def test_the_command_of_a_todo_added_with_after_reads_the_ids_it_waited_for_in_its_environment(
        live_server, tmp_path):
    """SWITCHBOARD_TODO_AFTER is the JSON array of the ids the todo waited for ([] when none)
    and SWITCHBOARD_TODO_SCHEDULE_ID is empty when no schedule added it; the waiting P0 runs
    only after the todo it waits for is done."""
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        first = await add(client, "first", {})
        then = await add(client, "then", {}, priority=0, after=[first["id"]])
        async with working(live_server.url, ep.token, write_command(tmp_path), "--max-todos", "2") as worker:
            assert await worker.wait(60) == 0, worker.output
        got_then = (await settled(client, then["id"], "done"))["result"]
        got_first = (await settled(client, first["id"], "done"))["result"]
    assert got_then["plan"] == [[first["id"]], ""] and got_then["stdin_plan"] == [[first["id"]], None]
    assert got_first["plan"] == [[], ""] and got_first["stdin_plan"] == [[], None]
    assert worker.output.index(f"completed {first['id']}") < worker.output.index(f"claimed {then['id']}")


async def test_a_failing_command_fails_with_its_stderr_tail_and_the_retry_reads_that_summary(live_server, tmp_path):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "flaky tests", {"fail_attempts": 1, "exit": 3, "stderr": ["collecting 12 tests"]},
                         max_attempts=3)
        async with working(live_server.url, ep.token, write_command(tmp_path), "--max-todos", "2") as worker:
            assert await worker.wait(60) == 0, worker.output
        got = await settled(client, todo["id"], "done")
    second, first = got["attempts"]
    assert (first["outcome"], first["disposition"]) == ("failed", "retry_scheduled")
    assert first["summary"] == "the command exited 3: collecting 12 tests\ntests red: 3 failed"
    assert second["outcome"] == "completed"
    # The retry's command was told what the failed attempt said, in SWITCHBOARD_PRIOR_ATTEMPTS.
    assert got["result"]["attempt"] == 2 and got["result"]["seq"] == 2
    assert got["result"]["prior"] == [{"seq": 1, "outcome": "failed", "died": False, "summary": first["summary"]}]
    assert f"failed {todo['id']} in " in worker.output and ", exit 3" in worker.output
    assert "2 claimed, 1 completed, 1 failed, 0 released, 0 lost" in worker.output


async def test_a_summary_line_wins_over_the_last_note(live_server, tmp_path):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "summarised", {"notes": ["a note"], "summary": "fixed the parser"})
        async with working(live_server.url, ep.token, write_command(tmp_path), "--max-todos", "1") as worker:
            assert await worker.wait(60) == 0, worker.output
        got = await settled(client, todo["id"], "done")
    assert got["attempts"][0]["summary"] == "fixed the parser"


async def test_a_ten_second_command_on_a_three_second_lease_keeps_its_lease(live_server, tmp_path):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "slow", {"seconds": 10})
        started = time.monotonic()
        async with working(live_server.url, ep.token, write_command(tmp_path), "--lease-seconds", "3",
                           "--max-todos", "1") as worker:
            await worker.wait_for_line(f"claimed {todo['id']}")
            # Meanwhile the reaper runs every 0.2 s and another worker keeps trying to take it.
            while worker.proc.poll() is None:
                assert (await call(client, "claim_next", {"queue": "q", "lease_seconds": 3}))["todo"] is None
                await asyncio.sleep(0.5)
            assert await worker.wait(60) == 0, worker.output
        got = await settled(client, todo["id"], "done")
    print(f"\n[worker] a 10 s command on a 3 s lease took {time.monotonic() - started:.1f} s")
    [attempt] = got["attempts"]
    assert attempt["outcome"] == "completed" and not attempt["died"] and attempt["last_heartbeat_at"]
    assert got["attempts_total"] == 1


async def test_sigterm_releases_the_running_todo_with_a_summary_and_claims_nothing_more(live_server, tmp_path):
    ep = await vend(live_server.store)
    marker = tmp_path / "running"
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "long", {"seconds": 60, "ignore_term": True, "marker": str(marker)})
        async with working(live_server.url, ep.token, write_command(tmp_path), "--grace-seconds", "1") as worker:
            await worker.wait_for_line(f"claimed {todo['id']}")
            while not marker.exists():
                await asyncio.sleep(0.05)
            waiting = await add(client, "next in line", {})
            worker.signal(signal.SIGTERM)
            assert await worker.wait(30) == 0, worker.output
        kill_pid_in(marker)  # it ignored SIGTERM; the worker killed it after the grace (this is a no-op then)
        got = await settled(client, todo["id"], "pending")
        untouched = await call(client, "get_todo", {"id": waiting["id"]})
    [attempt] = got["attempts"]
    assert (attempt["outcome"], attempt["disposition"]) == ("released", "requeued")
    assert attempt["summary"].startswith("released on shutdown (SIGTERM): the command was stopped after ")
    assert got["attempt"] == 1  # a release does not consume an attempt
    assert untouched["state"] == "pending" and untouched["attempts_total"] == 0
    assert "stopping (SIGTERM)" in worker.output and f"released {todo['id']}" in worker.output
    assert "1 claimed, 0 completed, 0 failed, 1 released, 0 lost" in worker.output


async def test_kill_9_of_the_worker_leaves_the_lease_to_lapse_and_the_reaper_records_a_death(live_server, tmp_path):
    ep = await vend(live_server.store)
    marker = tmp_path / "running"
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "orphaned", {"seconds": 60, "marker": str(marker)}, max_attempts=1)
        async with working(live_server.url, ep.token, write_command(tmp_path), "--lease-seconds", "3") as worker:
            await worker.wait_for_line(f"claimed {todo['id']}")
            while not marker.exists():
                await asyncio.sleep(0.05)
            worker.proc.kill()  # SIGKILL to the worker alone: no release, no more heartbeats
            worker.proc.wait(10)
        kill_pid_in(marker)  # the command ran in a session of its own, so it outlived the worker
        got = await settled(client, todo["id"], "failed", timeout=3 + 10 + LOAD_SLACK_SECONDS)
    [attempt] = got["attempts"]
    assert attempt["outcome"] == "reaped" and attempt["died"] and attempt["summary"] is None
    assert got["dead_letter"] is True


def claim_next_calls(metrics: str) -> float:
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith("switchboard_mcp_call_duration_seconds_count{") and 'tool="claim_next"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_an_idle_worker_waits_on_the_doorbell_and_only_the_safety_poll_calls(live_server, tmp_path):
    import httpx

    ep = await vend(live_server.store)
    idle_seconds, poll = 4.0, 30.0
    async with httpx.AsyncClient(base_url=live_server.url) as http, connect(live_server, ep.token) as client:
        async with working(live_server.url, ep.token, write_command(tmp_path), "--poll-seconds", str(poll)) as worker:
            await asyncio.sleep(0.5)  # its first claim_next, answered with nothing
            before = claim_next_calls((await http.get("/metrics")).text)
            await asyncio.sleep(idle_seconds)
            during = claim_next_calls((await http.get("/metrics")).text) - before
            print(f"\n[worker] claim_next calls while idle for {idle_seconds:g} s: {during:g} (safety poll {poll:g} s)")
            assert during <= 1  # no busy polling: at most one safety poll could fall in the window
            added = time.monotonic()
            todo = await add(client, "ring", {})
            await worker.wait_for_line(f"claimed {todo['id']}", timeout=poll)
            latency = time.monotonic() - added
            print(f"[worker] from add_todo to claimed (the doorbell): {latency:.3f} s")
            assert latency < 2 + LOAD_SLACK_SECONDS  # far below the 30 s poll: it was the doorbell
            await worker.wait_for_line(f"completed {todo['id']}")
            worker.signal(signal.SIGINT)
            assert await worker.wait(30) == 0, worker.output


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--url", "http://127.0.0.1:9", "--", "true"], {}, "no token: set SWITCHBOARD_TOKEN"),
    (["--url", "http://127.0.0.1:9"], {"SWITCHBOARD_TOKEN": "x"}, "no COMMAND: put it after --"),
    (["--url", "ftp://x", "--", "true"], {"SWITCHBOARD_TOKEN": "x"}, "--url must be the server's http://"),
    (["--url", "http://127.0.0.1:9", "--concurrency", "0", "--", "true"], {"SWITCHBOARD_TOKEN": "x"},
     "--concurrency must be at least 1"),
    (["--url", "http://127.0.0.1:9", "--lease-seconds", "1", "--", "true"], {"SWITCHBOARD_TOKEN": "x"},
     "--lease-seconds must be at least 3"),
    (["--url", "http://127.0.0.1:9", "--token-file", "/nonexistent/token", "--", "true"], {},
     "cannot read --token-file"),
])
def test_bad_arguments_exit_2_naming_what_was_wrong(args, env, message):
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    clean = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")} | env
    r = subprocess.run([sys.executable, "-m", "board", "work", *args], cwd=ROOT, env=clean, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


async def test_a_refused_token_from_a_file_exits_2_without_echoing_it(live_server, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("sb_wrong-token-value\n")
    worker = WorkerProcess(live_server.url, "", write_command(tmp_path), "--token-file", str(token_file),
                           env={"SWITCHBOARD_TOKEN": ""})
    try:
        assert await worker.wait(30) == 2
    finally:
        worker.kill()
    assert "the server refused the token (HTTP 401)" in worker.output
    assert "sb_wrong-token-value" not in worker.output and "Traceback" not in worker.output


async def test_a_summary_the_server_refuses_is_replaced_and_the_todo_still_completes(live_server, tmp_path):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "leaky", {"summary": ["deployed with AKIA", "IOSFODNN7EXAMPLE"]})
        async with working(live_server.url, ep.token, write_command(tmp_path), "--max-todos", "1") as worker:
            assert await worker.wait(60) == 0, worker.output
        got = await settled(client, todo["id"], "done")
    [attempt] = got["attempts"]
    assert attempt["outcome"] == "completed"
    assert attempt["summary"].startswith("the summary was refused by the server: ")
    assert "AKIAIOSFODNN7EXAMPLE" not in attempt["summary"] and "AKIAIOSFODNN7EXAMPLE" not in worker.output
    assert f"refused {todo['id']} summary" in worker.output


async def test_a_result_the_server_refuses_is_left_out_and_the_todo_still_completes(live_server, tmp_path):
    """The command prints a connection string with its password: the result is refused as
    holding a credential, and the worker completes without it, saying so in the summary."""
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "prints a dsn", {"print": ["postgresql://app:", "Winter2024@db/app"]})
        async with working(live_server.url, ep.token, write_command(tmp_path), "--max-todos", "1") as worker:
            assert await worker.wait(60) == 0, worker.output
        got = await settled(client, todo["id"], "done")
    [attempt] = got["attempts"]
    assert attempt["outcome"] == "completed" and got["result"] is None
    assert attempt["summary"].startswith("the result was refused by the server: result looks like it holds a "
                                         "credential (a URL with a password)")
    assert "Winter2024" not in attempt["summary"] and "Winter2024" not in worker.output
    assert f"refused {todo['id']} result" in worker.output


async def test_two_slots_run_two_commands_at_once_and_reaching_max_todos_lets_the_other_finish(live_server,
                                                                                              tmp_path):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        slow = await add(client, "slow", {"seconds": 2})
        quick = await add(client, "quick", {})
        extra = await add(client, "beyond the limit", {})
        async with working(live_server.url, ep.token, write_command(tmp_path), "--concurrency", "2",
                           "--max-todos", "2", "--grace-seconds", "0") as worker:
            assert await worker.wait(60) == 0, worker.output
        for todo in (slow, quick):
            got = await settled(client, todo["id"], "done")
            assert [a["outcome"] for a in got["attempts"]] == ["completed"]
        assert (await call(client, "get_todo", {"id": extra["id"]}))["attempts_total"] == 0
    assert "slot 0:" in worker.output and "slot 1:" in worker.output
    assert "2 claimed, 2 completed, 0 failed, 0 released, 0 lost" in worker.output


async def test_a_worker_with_a_team_endpoints_token_drains_what_the_teams_planner_added(live_server, tmp_path):
    """A team's planner endpoint adds; `switchboard work` with another endpoint of the team
    claims and completes every one of them (and nothing a person's endpoint added)."""
    team = await make_team(live_server.store)
    planner = await vend(live_server.store, user_id=team, agent_id="planner")
    worker_ep = await vend(live_server.store, user_id=team, agent_id="worker")
    person = await vend(live_server.store)
    async with connect(live_server, planner.token) as p, connect(live_server, person.token) as o:
        todos = [await add(p, f"team {i}", {}) for i in range(3)]
        theirs = await add(o, "a person's", {})
        async with working(live_server.url, worker_ep.token, write_command(tmp_path), "--max-todos", "3") as worker:
            assert await worker.wait(60) == 0, worker.output
        for todo in todos:
            got = await settled(p, todo["id"], "done")
            assert [a["outcome"] for a in got["attempts"]] == ["completed"]
        assert (await call(o, "get_todo", {"id": theirs["id"]}))["state"] == "pending"
    assert "3 claimed, 3 completed, 0 failed, 0 released, 0 lost" in worker.output


async def test_a_title_with_terminal_escapes_is_printed_escaped(live_server, tmp_path):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "evil\x1b[31m red\x07 \u202eright-to-left", {})
        async with working(live_server.url, ep.token, write_command(tmp_path), "--max-todos", "1") as worker:
            assert await worker.wait(60) == 0, worker.output
    [line] = [line for line in worker.lines if f"claimed {todo['id']}" in line]
    assert "\x1b" not in worker.output and "\x07" not in worker.output and "\u202e" not in worker.output
    assert line.endswith(r"slot 0: evil\x1b[31m red\x07 \u202eright-to-left"), line


async def test_a_todo_released_from_the_board_mid_run_stops_its_command_and_is_reported_lost(live_server,
                                                                                           tmp_path):
    from board.store.vocabulary import Human

    ep = await vend(live_server.store)
    marker = tmp_path / "running"
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "taken back", {"seconds": 60, "marker": str(marker)})
        async with working(live_server.url, ep.token, write_command(tmp_path), "--lease-seconds", "3",
                           "--grace-seconds", "1", "--max-todos", "1") as worker:
            await worker.wait_for_line(f"claimed {todo['id']}")
            while not marker.exists():
                await asyncio.sleep(0.05)
            # Its owner releases it on the Board (exempt from the fence): the next heartbeat is refused.
            await live_server.store.todo_release(Human(ep.user_id, "owner"), todo["id"], summary="taking it back")
            await worker.wait_for_line(f"lease lost {todo['id']}", timeout=3 + LOAD_SLACK_SECONDS)
            assert await worker.wait(30) == 0, worker.output
        kill_pid_in(marker)
        got = await call(client, "get_todo", {"id": todo["id"]})
    assert got["state"] == "pending" and [a["outcome"] for a in got["attempts"]] == ["released"]
    assert got["attempts"][0]["summary"] == "taking it back"  # the worker closed nothing after
    assert f"lost {todo['id']} after " in worker.output
    assert "1 claimed, 0 completed, 0 failed, 0 released, 1 lost" in worker.output


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_after_the_output_reader_is_gone_still_stops_the_worker_and_releases_its_todo(
        live_server, tmp_path, signum):
    ep = await vend(live_server.store)
    marker = tmp_path / "running"
    grace = 1
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "piped to head", {"seconds": 60, "marker": str(marker)})
        worker = PipedWorker(live_server.url, ep.token, write_command(tmp_path), "--grace-seconds", str(grace),
                             stderr_path=tmp_path / "stderr")
        try:
            await worker.read_until(f"claimed {todo['id']}")
            while not marker.exists():
                await asyncio.sleep(0.05)
            code = await worker.stop_without_reader(signum, grace + 3 + LOAD_SLACK_SECONDS)
        finally:
            worker.kill()
            kill_pid_in(marker)
        got = await settled(client, todo["id"], "pending")
    assert code == 0, worker.stderr
    [attempt] = got["attempts"]
    assert (attempt["outcome"], attempt["disposition"]) == ("released", "requeued")
    assert attempt["summary"].startswith(f"released on shutdown ({signum.name}): the command was stopped after ")
    assert "Traceback" not in worker.stderr and "BrokenPipeError" not in worker.stderr, worker.stderr


async def test_an_idle_worker_whose_output_reader_is_gone_stops_on_sigterm(live_server, tmp_path):
    ep = await vend(live_server.store)
    worker = PipedWorker(live_server.url, ep.token, write_command(tmp_path), stderr_path=tmp_path / "stderr")
    try:
        await worker.read_until(r"\bworking on ")
        code = await worker.stop_without_reader(signal.SIGTERM, 3 + LOAD_SLACK_SECONDS)
    finally:
        worker.kill()
    assert code == 0 and "Traceback" not in worker.stderr, worker.stderr


def run_worker(url: str, token: str, command: list[str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(worker_argv(url, command, *args), cwd=ROOT, env=worker_env(token), capture_output=True,
                          text=True, timeout=timeout)


async def test_a_queue_the_token_is_not_granted_stops_the_worker_with_one_line_naming_it(live_server, tmp_path):
    ep = await vend(live_server.store, queues=("q",))
    r = await asyncio.to_thread(run_worker, live_server.url, ep.token, write_command(tmp_path), "--queue", "builds",
                                "--concurrency", "2")
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr
    [line] = r.stderr.splitlines()
    assert line == ("switchboard work: queue builds: the server refused the claim: "
                    "this endpoint is not granted queue builds"), r.stderr


@pytest.mark.parametrize("problem", ["not found", "not executable", "not on PATH"])
def test_a_command_that_cannot_run_stops_the_worker_at_start_with_one_line_naming_it(tmp_path, problem):
    script = tmp_path / "build.sh"
    if problem == "not executable":
        script.write_text("#!/bin/sh\nexit 0\n")
        script.chmod(0o644)
    program, why = {"not found": (str(script), "no such file"), "not executable": (str(script), "not executable"),
                    "not on PATH": ("no-such-build-tool", "not found on PATH (or not executable)")}[problem]
    r = run_worker("http://127.0.0.1:9", "sb_unused", [program, "--fast"])
    assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
    [line] = r.stderr.splitlines()
    assert line == f"switchboard work: cannot run the command {program}: {why}", r.stderr


async def test_a_command_whose_interpreter_is_gone_stops_the_worker_and_releases_the_todo_unspent(live_server,
                                                                                               tmp_path):
    script = tmp_path / "agent.sh"
    script.write_text("#!/nonexistent/interpreter\n")
    script.chmod(0o755)
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "cannot start", {}, max_attempts=1)
        r = await asyncio.to_thread(run_worker, live_server.url, ep.token, [str(script)])
        got = await settled(client, todo["id"], "pending")
    assert r.returncode == 2, r.stdout + r.stderr
    [line] = r.stderr.splitlines()
    assert line == f"switchboard work: cannot run the command {script}: No such file or directory", r.stderr
    [attempt] = got["attempts"]
    assert attempt["outcome"] == "released" and got["attempt"] == 1 and not got["dead_letter"]
    assert attempt["summary"].startswith("released: the worker could not start its command (cannot run the command ")
    assert "1 claimed, 0 completed, 0 failed, 1 released, 0 lost" in r.stdout


async def test_a_token_without_release_or_heartbeat_is_said_at_start_and_a_stop_leaves_the_todo_to_the_reaper(
        live_server, tmp_path):
    ep = await vend(live_server.store, scope=("add_todo", "list_todos", "get_todo", "claim_next", "complete", "fail"))
    marker = tmp_path / "running"
    async with connect(live_server, ep.token) as client:
        todo = await add(client, "held without release", {"seconds": 60, "marker": str(marker)}, max_attempts=3)
        async with working(live_server.url, ep.token, write_command(tmp_path), "--lease-seconds", "3",
                           "--grace-seconds", "1") as worker:
            await worker.wait_for_line(f"claimed {todo['id']}")
            [limited] = [line for line in worker.lines if " limited: " in line]
            assert limited.split(" ", 1)[1] == (
                "limited: no heartbeat: a command running longer than the 3 s lease loses it; "
                "no release: a stop leaves its todo to the reaper, which uses up an attempt")
            while not marker.exists():
                await asyncio.sleep(0.05)
            worker.signal(signal.SIGTERM)
            assert await worker.wait(30) == 0, worker.output
        kill_pid_in(marker)
        got = await settled(client, todo["id"], "pending", timeout=3 + 10 + LOAD_SLACK_SECONDS)
    [attempt] = got["attempts"]
    assert attempt["outcome"] == "reaped" and attempt["died"] and got["attempt"] == 1
    assert f"left {todo['id']} to the reaper after " in worker.output
    assert "1 claimed, 0 completed, 0 failed, 0 released, 0 lost, 1 left to the reaper" in worker.output
    assert "Traceback" not in worker.output


async def test_a_token_with_every_verb_of_a_worker_says_nothing_of_limits(live_server, tmp_path):
    ep = await vend(live_server.store, scope=("claim_next", "heartbeat", "complete", "fail", "release"))
    async with working(live_server.url, ep.token, write_command(tmp_path)) as worker:
        worker.signal(signal.SIGTERM)
        assert await worker.wait(30) == 0, worker.output
    assert " limited: " not in worker.output


async def test_a_token_that_may_not_claim_stops_the_worker_with_one_line(live_server, tmp_path):
    ep = await vend(live_server.store, scope=("add_todo", "list_todos"))
    r = await asyncio.to_thread(run_worker, live_server.url, ep.token, write_command(tmp_path))
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.splitlines() == ["switchboard work: the token may not call claim_next, so it cannot work "
                                     "(vend one with the worker preset)"], r.stderr
