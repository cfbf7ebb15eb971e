"""REQ-14 and SPEC-0023 through the real /metrics endpoint of a running server."""

from __future__ import annotations

import asyncio

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import LOAD_SLACK_SECONDS, make_agent, make_user, run_server


async def scrape(url: str, headers=None) -> dict[tuple, float]:
    async with httpx.AsyncClient(base_url=url) as client:
        r = await client.get("/metrics", headers=headers or {})
    assert r.status_code == 200, r.text
    out = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples, name, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def wait_for(predicate, timeout=10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_a_reap_counts_once_in_each_family(live_server):
    store = live_server.store
    agent = await make_agent(store, queues=("builds",))
    todo = await store.todo_add(agent, queue="builds", title="t")
    before = await scrape(live_server.url)
    await store.todo_claim(agent, todo["id"], lease_seconds=1)

    async def reaped():
        return (await store.todo_get(agent, todo["id"]))["state"] == "pending"

    await wait_for(reaped)
    after = await scrape(live_server.url)
    assert value(after, "switchboard_lease_expired_total", queue="builds") - value(
        before, "switchboard_lease_expired_total", queue="builds") == 1
    assert value(after, "switchboard_todo_attempts_closed_total", queue="builds", outcome="reaped") - value(
        before, "switchboard_todo_attempts_closed_total", queue="builds", outcome="reaped") == 1
    assert value(after, "switchboard_todos", queue="builds", state="pending") == 1


async def test_a_takeover_moves_lease_expired_by_exactly_one(server_settings):
    # The reaper is off: only the takeover can close the lapsed attempt.
    async with run_server(server_settings.with_(reaper_interval_seconds=0)) as server:
        store = server.store
        agent = await make_agent(store, queues=("builds",))
        todo = await store.todo_add(agent, queue="builds", title="t")
        from datetime import datetime, timedelta, timezone
        past = datetime.now(timezone.utc) - timedelta(minutes=5)
        await store.todo_claim(agent, todo["id"], lease_seconds=60, now=past)  # lapsed four minutes ago
        before = await scrape(server.url)
        res = await store.todo_claim_next(agent)
        assert res["todo"]["id"] == todo["id"] and res["attempt_seq"] == 2
        after = await scrape(server.url)
        [first] = [a for a in (await store.todo_get(agent, todo["id"]))["attempts"] if a["seq"] == 1]
    assert first["outcome"] == "lease_expired"
    assert value(after, "switchboard_lease_expired_total", queue="builds") - value(
        before, "switchboard_lease_expired_total", queue="builds") == 1
    for outcome, moved in (("lease_expired", 1), ("reaped", 0)):
        assert value(after, "switchboard_todo_attempts_closed_total", queue="builds", outcome=outcome) - value(
            before, "switchboard_todo_attempts_closed_total", queue="builds", outcome=outcome) == moved, outcome


async def test_metrics_never_carry_ids_summaries_or_claimants(live_server):
    store = live_server.store
    agent = await make_agent(store, queues=("q",))
    todo = await store.todo_add(agent, queue="q", title="secret title")
    await store.todo_claim(agent, todo["id"], claimant="claimant-label-xyz")
    await store.todo_fail(agent, todo["id"], summary="summary-text-xyz", artifact="https://artifact.example/xyz")
    async with httpx.AsyncClient(base_url=live_server.url) as client:
        text = (await client.get("/metrics")).text
    for secret in (todo["id"], "secret title", "claimant-label-xyz", "summary-text-xyz", "artifact.example",
                   agent.endpoint_id):
        assert secret not in text
    assert 'switchboard_todo_attempts_closed_total{outcome="failed",queue="q"} 1.0' in text


async def test_queue_labels_are_bounded(server_settings):
    async with run_server(server_settings.with_(metrics_queue_label_max=2)) as srv:
        store = srv.store
        queues = ("a", "b", "c", "d")
        agent = await make_agent(store, queues=queues)
        for q in queues:
            todo = await store.todo_add(agent, queue=q, title="t")
            await store.todo_claim(agent, todo["id"])
            await store.todo_complete(agent, todo["id"])
        samples = await scrape(srv.url)
    labels = {dict(k[1]).get("queue") for k in samples if k[0] == "switchboard_todo_attempts_closed_total"}
    assert labels == {"a", "b", "_other"}
    assert value(samples, "switchboard_todo_attempts_closed_total", queue="_other", outcome="completed") == 2


async def test_the_operator_token_guards_metrics(server_settings):
    async with run_server(server_settings.with_(metrics_token="op-token-123")) as srv:
        async with httpx.AsyncClient(base_url=srv.url) as client:
            assert (await client.get("/metrics")).status_code == 401
            assert (await client.get("/metrics", headers={"authorization": "Bearer nope"})).status_code == 401
        await scrape(srv.url, headers={"authorization": "Bearer op-token-123"})


async def test_reported_usage_moves_the_token_and_cost_counters_by_exactly_what_was_reported(live_server):
    store = live_server.store
    agent = await make_agent(store, queues=("llm",))
    before = await scrape(live_server.url)
    closes = (("complete", {"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.25, "model": "model-label-xyz"}),
              ("fail", {"input_tokens": 50, "cost_usd": 0.5}), ("release", {"output_tokens": 7}), ("complete", None))
    for verb, usage in closes:
        todo = await store.todo_add(agent, queue="llm", title="t")
        await store.todo_claim(agent, todo["id"])
        await getattr(store, f"todo_{verb}")(agent, todo["id"], usage=usage)
    after = await scrape(live_server.url)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("switchboard_attempt_tokens_total", queue="llm", kind="input") == 1250
    assert moved("switchboard_attempt_tokens_total", queue="llm", kind="output") == 307
    assert moved("switchboard_attempt_cost_usd_total", queue="llm") == 0.75
    async with httpx.AsyncClient(base_url=live_server.url) as client:
        assert "model-label-xyz" not in (await client.get("/metrics")).text


async def test_questions_are_counted_waiting_for_a_person_and_timed_to_their_first_answer_on_the_board(live_server):
    from datetime import datetime, timedelta, timezone

    from tests.acceptance.test_board_auth import client_for, make_human, sign_in

    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, queues=("ops", "idle"))
    asked = await store.todo_add(agent, queue="ops", title="deploy?")
    otp = await store.todo_add(agent, queue="ops", title="needs a code")
    await store.todo_add(agent, queue="idle", title="nobody asks here")
    for todo in (asked, otp):
        await store.todo_claim(agent, todo["id"], lease_seconds=3600)
    before = await scrape(live_server.url)
    # Asked 90 s ago (the question's time is the interrupt's), answered on the Board now.
    ninety_ago = datetime.now(timezone.utc) - timedelta(seconds=90)
    await store.todo_interrupt(agent, asked["id"], question="Ship it?", choices=["yes", "no"], now=ninety_ago)
    await store.todo_interrupt(agent, otp["id"], state="auth_required")
    waiting = await scrape(live_server.url)
    assert value(waiting, "switchboard_todos_waiting_for_person", queue="ops") == 2
    assert ("switchboard_todos_waiting_for_person", (("queue", "idle"),)) in waiting  # present, at 0
    assert value(waiting, "switchboard_todos_waiting_for_person", queue="idle") == 0
    assert value(waiting, "switchboard_todos", queue="ops", state="auth_required") == 1

    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        for form in ({"choice": "yes"}, {"text": "and tell me when it is out"}):  # a second answer: not timed
            r = await c.post(f"/todos/{asked['id']}/answer", data={"csrf_token": token, **form})
            assert r.status_code == 303
    answered = await scrape(live_server.url)

    def moved(name, **labels):
        return value(answered, name, **labels) - value(before, name, **labels)

    assert moved("switchboard_question_answer_seconds_count", queue="ops") == 1
    assert 90 <= moved("switchboard_question_answer_seconds_sum", queue="ops") <= 90 + 30 * LOAD_SLACK_SECONDS
    assert ("switchboard_question_answer_seconds_bucket", (("le", "60.0"), ("queue", "ops"))) in answered
    assert moved("switchboard_question_answer_seconds_bucket", queue="ops", le="60.0") == 0
    assert moved("switchboard_question_answer_seconds_bucket", queue="ops", le="300.0") == 1
    assert moved("switchboard_transitions_total", queue="ops", kind="answered") == 2
    # Answered is not resumed: the todo waits on its agent now, and still counts until it resumes.
    assert value(answered, "switchboard_todos_waiting_for_person", queue="ops") == 2
    await store.todo_resume(agent, asked["id"])
    resumed = await scrape(live_server.url)
    assert value(resumed, "switchboard_todos_waiting_for_person", queue="ops") == 1


async def test_an_open_board_stream_shows_as_a_subscriber_and_its_human_as_watched(live_server):
    from tests.acceptance.test_board_auth import client_for, make_human, sign_in
    from tests.acceptance.test_board_live import open_stream

    ada = await make_human(live_server.store, "ada")
    before = await scrape(live_server.url)
    assert value(before, "switchboard_watched_humans") == 0 and value(before, "switchboard_sse_subscribers") == 0
    async with client_for(live_server) as browser:
        await sign_in(browser, ada.username)
        async with open_stream(browser), open_stream(browser):  # two tabs, one human
            during = await scrape(live_server.url)
    assert value(during, "switchboard_watched_humans") == 1
    assert value(during, "switchboard_sse_subscribers") == 2  # the doorbell's own consumer is not a stream


async def test_the_charts_fold_lag_is_infinite_before_the_first_fold_and_seconds_once_it_keeps_up(server_settings):
    # The sweeps off, so the scrape sees the watermark before any fold; then the store's fold.
    async with run_server(server_settings.with_(reaper_interval_seconds=0)) as server:
        assert value(await scrape(server.url), "switchboard_chart_fold_lag_seconds") == float("inf")
        while await server.store.sweep_outcomes():
            pass
        lag = value(await scrape(server.url), "switchboard_chart_fold_lag_seconds")
        assert 10 <= lag < 60, lag


async def test_scheduled_todos_and_each_limited_queues_limit_and_held_count_are_read_at_scrape(live_server):
    store = live_server.store
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, queues=("builds", "docs"))
    for delay in (3600, 7200):
        await store.todo_add(agent, queue="builds", title="later", delay_seconds=delay)
    await store.todo_add(agent, queue="builds", title="now")
    await store.todo_add(agent, queue="docs", title="now")
    await store.queue_limit_set(ada.user_id, "builds", 2)
    await store.todo_claim_next(agent, queue="builds")
    samples = await scrape(live_server.url)
    assert value(samples, "switchboard_todos_scheduled", queue="builds") == 2
    assert ("switchboard_todos_scheduled", (("queue", "docs"),)) in samples  # every queue with todos, at 0
    assert value(samples, "switchboard_todos_scheduled", queue="docs") == 0
    assert value(samples, "switchboard_todos", queue="builds", state="pending") == 2  # scheduled are pending too
    assert value(samples, "switchboard_queue_limit", queue="builds", user="ada") == 2
    assert value(samples, "switchboard_queue_limit_held", queue="builds", user="ada") == 1
    assert not [k for k in samples if k[0].startswith("switchboard_queue_limit") and dict(k[1])["queue"] == "docs"]
    await store.queue_limit_set(ada.user_id, "builds", 0)  # removed: its series go
    samples = await scrape(live_server.url)
    assert not [k for k in samples if k[0].startswith("switchboard_queue_limit")]


async def test_todos_waiting_for_other_todos_are_counted_per_queue_at_scrape(live_server):
    """Pending todos whose after names a todo not done yet, per queue (every queue with todos
    at 0); the last dependency's complete takes its waiter out of the count."""
    store = live_server.store
    agent = await make_agent(store, queues=("builds", "docs"))
    first = await store.todo_add(agent, queue="builds", title="first")
    await store.todo_add(agent, queue="builds", title="then", after=[first["id"]])
    await store.todo_add(agent, queue="builds", title="and then", after=[first["id"]], delay_seconds=3600)
    await store.todo_add(agent, queue="docs", title="now")
    samples = await scrape(live_server.url)
    assert value(samples, "switchboard_todos_waiting", queue="builds") == 2
    assert value(samples, "switchboard_todos_waiting", queue="docs") == 0
    assert value(samples, "switchboard_todos", queue="builds", state="pending") == 3  # waiting are pending too
    await store.todo_claim(agent, first["id"])
    await store.todo_complete(agent, first["id"])
    assert value(await scrape(live_server.url), "switchboard_todos_waiting", queue="builds") == 0
