"""The question in the one todo detail view (board/view/todo_detail.py): an interrupted todo's
question comes first (what it waits for, the choices, the expiry in words, the answers so far),
an attempt's question is said in plain sentences (expired ones as expired), notes name their
kind in words and announce themselves as one line; the A2UI messages carrying it still
validate against the pinned v0.9 schemas."""

from __future__ import annotations

from datetime import timedelta

from board.view import a2ui
from board.view.todo_detail import answer_line, todo_detail
from tests.a2ui_schema import problems
from tests.unit.test_a2ui_messages import T0, every_kind_todo


def question(**over) -> dict:
    q = {"text": "Deploy to production now?", "truncated": False, "asked_at": T0 + timedelta(minutes=51),
         "choices": ["deploy now", "wait"], "expires_at": T0 + timedelta(minutes=61), "answers": [],
         "expired_at": None, "current": True}
    q.update(over)
    return q


def interrupted_todo(**q) -> dict:
    todo = every_kind_todo()
    todo["state"] = "input_required"
    todo["attempts"][0]["question"] = question(**q)
    todo["attempts"][0]["notes"] = [
        {"at": T0 + timedelta(minutes=52), "text": "deploy now", "truncated": False, "author_kind": "owner",
         "kind": "answer", "choice": "deploy now", "who": "ada"},
        {"at": T0 + timedelta(minutes=51), "text": "Deploy to production now?", "truncated": False,
         "author_kind": "endpoint", "kind": "question", "choices": ["deploy now", "wait"], "expires_at": None},
        {"at": T0 + timedelta(minutes=50), "text": "built", "truncated": False, "author_kind": "endpoint",
         "kind": "working"}]
    todo["attempts"][0]["notes_count"] = 3
    return todo


def test_an_interrupted_todo_waits_for_a_person_with_its_question_choices_and_expiry_in_words():
    detail = todo_detail(interrupted_todo(), T0 + timedelta(minutes=55))
    [waiting] = detail["waiting"]
    assert waiting["heading"] == "The agent asks"
    [q] = waiting["question"]
    assert q["text"] == "Deploy to production now?" and q["choices"] == ["deploy now", "wait"]
    assert q["expiry_words"] == "in 6 minutes" and q["expires_at"]["at"] == "2026-12-01T10:01:00.000Z"
    assert [line["text"] for line in q["lines"]] == [
        "The agent asked at 2026-12-01 09:51:00 UTC: Deploy to production now?",
        "Choices offered: deploy now, wait.",
        "Expires at 2026-12-01 10:01:00 UTC, in 6 minutes.",
        "Waiting for an answer."]
    assert todo_detail(interrupted_todo(), T0 + timedelta(minutes=62))["waiting"][0]["question"][0]["expiry_passed"]


def test_an_interrupt_with_no_question_still_waits_for_a_person_and_a_claimed_todo_does_not():
    todo = interrupted_todo()
    del todo["attempts"][0]["question"]
    todo["state"] = "auth_required"
    assert todo_detail(todo, T0)["waiting"] == [{"heading": "The agent needs authorization", "question": []}]
    todo["state"] = "claimed"
    assert todo_detail(todo, T0)["waiting"] == []


def test_answers_and_an_expiry_read_as_plain_sentences_and_notes_name_their_kind():
    answered = question(answers=[{"text": "deploy now", "choice": "deploy now", "who": "ada",
                                  "at": T0 + timedelta(minutes=52)}])
    todo = interrupted_todo(**answered)
    detail = todo_detail(todo, T0 + timedelta(minutes=55))
    [q] = detail["attempts"][0]["question"]
    assert q["lines"][-2:] == [{"text": "ada answered: deploy now (at 2026-12-01 09:52:00 UTC)"}, {"text": "Answered."}]
    assert q["expiry_words"] == ""  # answered: the expiry no longer matters
    notes = detail["attempts"][0]["notes"]
    assert [(n["author"], n["kind_words"], n["announce"]) for n in notes] == [
        ("ada", "answered", "ada answered: deploy now"),
        ("agent", "asked", "The agent asks: Deploy to production now?"),
        ("agent", "", "Note on attempt 5: built")]
    assert notes[0]["byline"] == "ada answered, 2026-12-01 09:52:00 UTC"
    assert answer_line({"who": "bob", "text": "after the freeze", "choice": "wait"}) == "bob answered wait: after the freeze"

    released = every_kind_todo()
    released["attempts"][1]["question"] = question(current=False, expired_at=T0 + timedelta(minutes=61))
    [q] = todo_detail(released, T0 + timedelta(hours=2))["attempts"][1]["question"]
    assert q["expired"] and q["expired_mark"]
    assert q["status_text"] == "Expired unanswered at 2026-12-01 10:01:00 UTC; the todo was released for the next claimer."


def test_the_a2ui_messages_with_a_question_validate_and_keep_the_same_component_tree():
    with_question = a2ui.messages(todo_detail(interrupted_todo(), T0 + timedelta(minutes=55)))
    for message in with_question:
        assert problems(message) == [], message
    assert with_question[1] == a2ui.messages(todo_detail(every_kind_todo(), T0))[1]
    model = with_question[2]["updateDataModel"]["value"]["todo"]
    assert model["waiting"][0]["question"][0]["lines"][0]["text"].endswith("Deploy to production now?")
