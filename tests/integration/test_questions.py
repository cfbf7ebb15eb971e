"""An agent asks, a human answers, against Postgres: the question is written with the
interrupt or not at all, an answer is fenced by the todo's state and the human's ownership,
resume hands the answers to the agent, an expired question releases the todo with a note
saying so, an answered todo whose holder died is reaped, and the next claimer reads the
question and the answers in prior_attempts. Races use real parallel connections."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from board.errors import Conflict, Invalid, NotFound
from board.store.store import Store
from board.view.todo_detail import todo_detail
from tests.conftest import RULE_BREAKERS, make_agent, make_user, sql_rows

LATER = timedelta(hours=2)


async def notes_of(db_url, todo_id) -> list[dict]:
    return await sql_rows(db_url, "SELECT seq, n, kind::text AS kind, author_kind::text AS author_kind, text, "
                                  "choices, expires_at, choice, author FROM attempt_notes WHERE todo_id = %s "
                                  "ORDER BY seq, n", (todo_id,))


async def asking(store, owner, agent, **question):
    todo = await store.todo_add(agent, queue="q", title="deploy")
    await store.todo_claim(agent, todo["id"])
    out = await store.todo_interrupt(agent, todo["id"], **question)
    return todo["id"], out


@pytest.fixture
async def people(store):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada)
    return ada, agent


async def test_the_question_is_written_with_the_interrupt_and_read_where_the_agent_and_board_look(store, db_url, people):
    ada, agent = people
    todo_id, out = await asking(store, ada, agent, question="Deploy to production now?\x07",
                                choices=["yes", " no ", "wait an hour"], expires_in_seconds=600)
    assert out["state"] == "input_required"
    assert out["question"]["text"] == "Deploy to production now?"
    assert out["question"]["choices"] == ["yes", "no", "wait an hour"]
    [note] = await notes_of(db_url, todo_id)
    assert (note["kind"], note["author_kind"], note["text"], note["choices"]) == (
        "question", "endpoint", "Deploy to production now?", ["yes", "no", "wait an hour"])
    assert note["expires_at"] == out["question"]["expires_at"]
    got = await store.todo_get(ada, todo_id)
    [attempt] = got["attempts"]
    assert attempt["notes"][0]["kind"] == "question" and attempt["notes"][0]["choices"] == ["yes", "no", "wait an hour"]
    assert attempt["question"]["text"] == "Deploy to production now?" and attempt["question"]["answers"] == []


@pytest.mark.parametrize("bad, argument", [
    ({"question": "?", "choices": [str(i) for i in range(11)]}, "choices"),
    ({"question": "?", "choices": ["yes", "yes"]}, "choices"),
    ({"question": "?", "choices": ["yes", 2]}, "choices"),
    ({"question": "?", "choices": []}, "choices"),
    ({"question": "?", "choices": ["x" * 201]}, "choices"),
    ({"question": " \x07 "}, "question"),
    ({"question": 5}, "question"),
    ({"choices": ["yes"]}, "choices"),
    ({"question": "?", "expires_in_seconds": 0}, "expires_in_seconds"),
    ({"question": "?", "expires_in_seconds": True}, "expires_in_seconds"),
    ({"question": "paste ghp_" + "a" * 36}, "question"),
])
async def test_a_bad_question_is_refused_naming_the_argument_and_the_todo_stays_claimed(store, db_url, people, bad,
                                                                                      argument):
    ada, agent = people
    todo = await store.todo_add(agent, queue="q", title="deploy")
    await store.todo_claim(agent, todo["id"])
    with pytest.raises(Invalid) as e:
        await store.todo_interrupt(agent, todo["id"], **bad)
    assert e.value.argument == argument and argument in e.value.message
    assert (await store.todo_get(agent, todo["id"]))["state"] == "claimed"
    assert await notes_of(db_url, todo["id"]) == []


async def test_a_question_under_a_wrong_lease_token_writes_nothing(store, db_url, people):
    ada, agent = people
    todo = await store.todo_add(agent, queue="q", title="fenced")
    await store.todo_claim(agent, todo["id"], require_fence=True)
    with pytest.raises(Conflict):
        await store.todo_interrupt(agent, todo["id"], question="Which branch?", lease_token="not-the-token")
    assert (await store.todo_get(agent, todo["id"]))["state"] == "claimed"
    assert await notes_of(db_url, todo["id"]) == []


async def test_a_second_interrupt_while_one_is_open_is_a_conflict(store, db_url, people):
    ada, agent = people
    todo_id, _ = await asking(store, ada, agent, question="First?")
    with pytest.raises(Conflict, match="input_required"):
        await store.todo_interrupt(agent, todo_id, question="Second?")
    assert [n["text"] for n in await notes_of(db_url, todo_id)] == ["First?"]


async def test_the_answer_reaches_the_agent_on_resume_and_one_after_resume_is_refused(store, db_url, people):
    ada, agent = people
    todo_id, _ = await asking(store, ada, agent, question="Which fix?", choices=["revert", "patch"])
    first = await store.todo_answer(ada, todo_id, choice="patch")
    second = await store.todo_answer(ada, todo_id, text="and add a test\x1b")
    assert first["answer"]["who"] == "ada" and second["answer"]["text"] == "and add a test"
    resumed = await store.todo_resume(agent, todo_id)
    assert resumed["state"] == "claimed"
    assert [(a["text"], a["choice"], a["who"]) for a in resumed["answers"]] == [
        ("patch", "patch", "ada"), ("and add a test", None, "ada")]
    assert resumed["answers"][0]["at"] == first["answer"]["at"]
    with pytest.raises(Conflict, match="no longer waiting for an answer"):
        await store.todo_answer(ada, todo_id, text="too late")
    assert [n["kind"] for n in await notes_of(db_url, todo_id)] == ["question", "answer", "answer"]
    # A later interrupt starts afresh: its resume returns only its own answers.
    await store.todo_interrupt(agent, todo_id, state="auth_required")
    await store.todo_answer(ada, todo_id, text="code 314159")
    again = await store.todo_resume(agent, todo_id)
    assert [a["text"] for a in again["answers"]] == ["code 314159"]


@pytest.mark.parametrize("meanwhile", ["resume", "release", "cancel"])
async def test_an_answer_to_a_todo_no_longer_interrupted_is_refused_and_writes_nothing(store, db_url, people, meanwhile):
    ada, agent = people
    todo_id, _ = await asking(store, ada, agent, question="Go?")
    if meanwhile == "resume":
        await store.todo_resume(agent, todo_id)
    elif meanwhile == "release":
        await store.todo_release(ada, todo_id)
    else:
        await store.todo_cancel(ada, todo_id)
    with pytest.raises(Conflict, match="no longer waiting for an answer"):
        await store.todo_answer(ada, todo_id, text="yes")
    assert [n["kind"] for n in await notes_of(db_url, todo_id)] == ["question"]


async def test_a_choice_the_question_does_not_offer_is_refused_naming_the_choices(store, db_url, people):
    ada, agent = people
    todo_id, _ = await asking(store, ada, agent, question="Which?", choices=["red", "blue"])
    with pytest.raises(Invalid, match="red, blue") as e:
        await store.todo_answer(ada, todo_id, choice="green")
    assert e.value.argument == "choice"
    plain, _ = await asking(store, ada, agent, question="Anything?")
    with pytest.raises(Invalid, match="offers no choices"):
        await store.todo_answer(ada, plain, choice="red")
    with pytest.raises(Invalid, match="text or a choice"):
        await store.todo_answer(ada, plain)
    assert [n["kind"] for n in await notes_of(db_url, todo_id)] == ["question"]


async def test_another_human_cannot_answer_a_todo_that_is_not_theirs(store, db_url, people):
    ada, agent = people
    mallory = await make_user(store, "mallory")
    todo_id, _ = await asking(store, ada, agent, question="Go?")
    with pytest.raises(NotFound):
        await store.todo_answer(mallory, todo_id, text="yes")
    assert [n["kind"] for n in await notes_of(db_url, todo_id)] == ["question"]


async def test_an_expired_question_releases_the_todo_with_a_note_and_the_next_claimer_reads_it(store, db_url, people):
    ada, agent = people
    todo_id, out = await asking(store, ada, agent, question="Approve?", choices=["yes", "no"], expires_in_seconds=60)
    assert await store.sweep_questions() == 0  # not yet expired
    assert await store.sweep_questions(now=out["question"]["expires_at"] + timedelta(seconds=1)) == 1
    todo = await store.todo_get(ada, todo_id)
    assert todo["state"] == "pending" and todo["owner"] is None
    [attempt] = todo["attempts"]
    assert (attempt["outcome"], attempt["disposition"], attempt["died"]) == ("released", "requeued", False)
    assert attempt["notes"][0]["kind"] == "expired" and attempt["notes"][0]["author_kind"] == "system"
    assert "expired unanswered" in attempt["notes"][0]["text"]
    assert attempt["question"]["expired_at"] is not None
    with pytest.raises(Conflict, match="no longer waiting"):
        await store.todo_answer(ada, todo_id, text="yes")
    claimed = await store.todo_claim(agent, todo_id)
    [prior] = claimed["prior_attempts"]
    assert prior["question"]["text"] == "Approve?" and prior["question"]["expired_at"] is not None
    assert await sql_rows(db_url, RULE_BREAKERS) == []


async def test_an_answered_question_does_not_expire(store, people):
    ada, agent = people
    todo_id, out = await asking(store, ada, agent, question="Approve?", expires_in_seconds=60)
    await store.todo_answer(ada, todo_id, text="yes")
    assert await store.sweep_questions(now=out["question"]["expires_at"] + timedelta(seconds=1)) == 0
    assert (await store.todo_get(ada, todo_id))["state"] == "input_required"


async def test_an_agent_that_died_waiting_is_reaped_after_the_answer_and_the_next_claimer_reads_both(store, db_url, people):
    ada, agent = people
    todo = await store.todo_add(agent, queue="q", title="deploy")
    long_ago = datetime.now(timezone.utc) - LATER
    await store.todo_claim(agent, todo["id"], now=long_ago)  # its lease lapsed long ago
    await store.todo_interrupt(agent, todo["id"], question="Which region?", choices=["eu", "us"], now=long_ago)
    todo_id = todo["id"]
    # Unanswered, the interrupt is never reaped, however old its lease.
    assert await store.sweep_reap() == 0
    answered = await store.todo_answer(ada, todo_id, choice="eu")
    assert await store.sweep_reap() == 0  # the answer gave the holder a lease to resume in
    assert await store.sweep_reap(now=answered["answer"]["at"] + timedelta(seconds=store.settings.lease_seconds + 1)) == 1
    todo = await store.todo_get(ada, todo_id)
    assert todo["state"] == "pending"
    assert (todo["attempts"][0]["outcome"], todo["attempts"][0]["died"]) == ("reaped", True)
    claimed = await store.todo_claim(agent, todo_id, claimant="the next worker")
    [prior] = claimed["prior_attempts"]
    assert prior["question"]["text"] == "Which region?"
    assert [(a["choice"], a["who"]) for a in prior["question"]["answers"]] == [("eu", "ada")]
    assert [n["kind"] for n in prior["notes"]] == ["answer", "question"]
    assert await sql_rows(db_url, RULE_BREAKERS) == []


async def test_questions_and_answers_outlive_the_notes_cap_and_the_pruned_count_stays_exact(pool, settings, db_url):
    store = Store(pool, replace(settings, attempt_notes_max=2))
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada)
    todo_id, _ = await asking(store, ada, agent, question="Which?")
    await store.todo_answer(ada, todo_id, text="the second")
    await store.todo_resume(agent, todo_id)
    for i in range(5):
        out = await store.todo_note(agent, todo_id, text=f"working {i}")
    kinds = [(n["n"], n["kind"]) for n in await notes_of(db_url, todo_id)]
    assert kinds == [(1, "question"), (2, "answer"), (6, "working"), (7, "working")]
    assert (out["notes_count"], out["notes_pruned"]) == (7, 3)  # working notes 3, 4 and 5 went


async def test_the_interrupt_writes_a_signed_hook_event_with_the_question_and_no_token(pool, db_url):
    from board.config import Settings
    store = Store(pool, Settings(hook_urls=("https://hooks.example/in",), public_url="https://sb.example"))
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada)
    todo = await store.todo_add(agent, queue="q", title="deploy")
    claimed = await store.todo_claim(agent, todo["id"], require_fence=True)
    await store.todo_interrupt(agent, todo["id"], question="Ship it?", choices=["yes", "no"],
                               lease_token=claimed["lease_token"])
    [event] = await sql_rows(db_url, "SELECT event, url, payload FROM hook_events WHERE event <> 'todo.ready'")
    assert (event["event"], event["url"]) == ("todo.input_required", "https://hooks.example/in")
    payload = event["payload"]
    assert payload["question"]["text"] == "Ship it?" and payload["question"]["choices"] == ["yes", "no"]
    assert payload["board_url"] == f"https://sb.example/todos/{todo['id']}"
    assert payload["todo"]["state"] == "input_required"
    assert claimed["lease_token"] not in str(payload)


async def test_an_answer_racing_resume_is_either_in_the_resume_or_refused(store, people):
    """Parallel connections: the todo row lock orders them, so an answer that commits before
    resume is among its answers and one after it is refused; none is lost in between."""
    ada, agent = people
    for _ in range(15):
        todo_id, _ = await asking(store, ada, agent, question="Now?")
        answer, resume = await asyncio.gather(store.todo_answer(ada, todo_id, text="yes"),
                                              store.todo_resume(agent, todo_id), return_exceptions=True)
        assert not isinstance(resume, BaseException)
        if isinstance(answer, BaseException):
            assert isinstance(answer, Conflict) and resume["answers"] == []
        else:
            assert [a["at"] for a in resume["answers"]] == [answer["answer"]["at"]]
        await store.todo_complete(agent, todo_id)


async def test_expiry_racing_an_answer_leaves_exactly_one_of_them(store, people):
    """The sweep and the answer lock the todo row first: the todo is either released with its
    question expired or answered and still waiting, never both."""
    ada, agent = people
    for _ in range(15):
        todo_id, out = await asking(store, ada, agent, question="Now?", expires_in_seconds=1)
        swept, answer = await asyncio.gather(
            store.sweep_questions(now=out["question"]["expires_at"] + timedelta(seconds=1)),
            store.todo_answer(ada, todo_id, text="yes"), return_exceptions=True)
        state = (await store.todo_get(ada, todo_id))["state"]
        if isinstance(answer, BaseException):
            assert isinstance(answer, Conflict) and swept == 1 and state == "pending"
        else:
            assert swept == 0 and state == "input_required"
            await store.todo_cancel(ada, todo_id)


async def asked_key(store, owner, todo_id) -> str:
    """The key of the question waiting on the todo, as the Board's drawer draws it ("" none)."""
    waiting = todo_detail(await store.todo_get(owner, todo_id))["waiting"]
    return waiting[0]["question"][0]["key"] if waiting and waiting[0]["question"] else ""


async def test_an_answer_given_for_one_question_does_not_land_on_the_question_asked_after_it(store, db_url, people):
    """The agent resumed and asked again (or the todo was released and its next holder asked)
    between the drawer being drawn and the answer: the answer is refused naming asked, and
    nothing is written; the answer for the question now waiting lands."""
    ada, agent = people
    todo_id, _ = await asking(store, ada, agent, question="Deploy build 412 now?", choices=["yes", "not yet"])
    first = await asked_key(store, ada, todo_id)
    await store.todo_answer(ada, todo_id, choice="not yet", asked=first)
    await store.todo_resume(agent, todo_id)
    await store.todo_interrupt(agent, todo_id, question="Drop the old table?", choices=["yes", "no"])
    with pytest.raises(Conflict, match="asked something else") as stale:
        await store.todo_answer(ada, todo_id, choice="yes", asked=first)
    assert stale.value.argument == "asked"
    await store.todo_release(ada, todo_id)
    await store.todo_claim(agent, todo_id)
    await store.todo_interrupt(agent, todo_id, question="Deploy build 412 now?", choices=["yes", "not yet"])
    with pytest.raises(Conflict, match="asked something else"):
        await store.todo_answer(ada, todo_id, text="yes, go", asked=first)
    assert [(n["seq"], n["kind"]) for n in await notes_of(db_url, todo_id)] == [
        (1, "question"), (1, "answer"), (1, "question"), (2, "question")]
    now = await asked_key(store, ada, todo_id)
    assert now != first
    answered = await store.todo_answer(ada, todo_id, choice="yes", asked=now)
    assert answered["attempt_seq"] == 2 and answered["answer"]["choice"] == "yes"


async def test_an_answer_given_while_no_question_waited_does_not_land_on_a_question_asked_since(store, db_url, people):
    """Drawn for an interrupt with no question ("" asked): it lands on such an interrupt,
    even one after a question was answered, but not on one that asks a question."""
    ada, agent = people
    todo_id, _ = await asking(store, ada, agent, question="Which region?")
    await store.todo_answer(ada, todo_id, text="eu-west", asked=await asked_key(store, ada, todo_id))
    await store.todo_resume(agent, todo_id)
    await store.todo_interrupt(agent, todo_id, state="auth_required")
    assert await asked_key(store, ada, todo_id) == ""
    await store.todo_answer(ada, todo_id, text="approved on the phone", asked="")
    await store.todo_resume(agent, todo_id)
    await store.todo_interrupt(agent, todo_id, question="Delete the bucket?")
    with pytest.raises(Conflict, match="asked something else"):
        await store.todo_answer(ada, todo_id, text="approved on the phone", asked="")
    assert [n["kind"] for n in await notes_of(db_url, todo_id)] == ["question", "answer", "answer", "question"]


@pytest.mark.parametrize("asked", ["yesterday", "2026-12-05T10:00:00", 5])
async def test_an_answer_for_a_question_key_that_is_not_one_is_refused_naming_asked(store, db_url, people, asked):
    ada, agent = people
    todo_id, _ = await asking(store, ada, agent, question="Go?")
    with pytest.raises(Invalid) as e:
        await store.todo_answer(ada, todo_id, text="yes", asked=asked)
    assert e.value.argument == "asked"
    assert [n["kind"] for n in await notes_of(db_url, todo_id)] == ["question"]


async def test_an_answer_by_choice_to_a_todo_not_waiting_or_not_theirs_is_refused_for_that_reason(store, db_url,
                                                                                                people):
    """The choice is not blamed: another human's todo is not found (its choices are not named),
    and a todo the agent resumed is no longer waiting, whatever the choice."""
    ada, agent = people
    mallory = await make_user(store, "mallory")
    todo_id, _ = await asking(store, ada, agent, question="Ship it?", choices=["yes", "no"])
    key = await asked_key(store, ada, todo_id)
    for asked in (None, key):
        with pytest.raises(NotFound):
            await store.todo_answer(mallory, todo_id, choice="yes", asked=asked)
        with pytest.raises(NotFound):
            await store.todo_answer(mallory, todo_id, choice="maybe", asked=asked)
    await store.todo_resume(agent, todo_id)
    for asked in (None, key):
        with pytest.raises(Conflict, match="no longer waiting for an answer"):
            await store.todo_answer(ada, todo_id, choice="yes", asked=asked)
    assert [n["kind"] for n in await notes_of(db_url, todo_id)] == ["question"]
