"""The record of actions in words (board/view/records.py): a drawer's line, and what a team's
Board announces of another member's action."""

from __future__ import annotations

from board.view.records import activity_sentence, record_line

TODO = "3f2a9c1e-0000-4000-8000-000000000001"


def test_a_drawer_line_names_the_action_its_detail_and_who_or_the_command_line():
    assert record_line({"action": "cancel", "actor_name": "carol", "detail": {}}) == "Canceled by carol"
    assert record_line({"action": "set_priority", "actor_name": "ann", "detail": {"priority": 1}}) == \
        "Priority set to P1 by ann"
    assert record_line({"action": "answer", "actor_name": "bob", "detail": {"choice": "yes"}}) == "Answered yes by bob"
    assert record_line({"action": "retry", "actor_name": None, "detail": {}}) == "Retried by the command line"


def test_an_announcement_names_who_what_and_the_todo_by_title_else_its_short_id():
    event = {"kind": "activity", "actor": "bob", "action": "cancel", "count": 1, "todos": [TODO]}
    assert activity_sentence(event, "Deploy the API") == "Bob canceled todo Deploy the API"
    assert activity_sentence(event) == "Bob canceled todo 3f2a9c1e"
    assert activity_sentence(dict(event, count=3, todos=[TODO] * 3)) == "Bob canceled 3 todos"
    assert activity_sentence({"actor": None, "action": "pause", "count": 1, "todos": None, "queue": "builds"}) == \
        "The command line paused queue builds"
    assert activity_sentence({"actor": "ada", "action": "member_remove", "count": 1, "todos": None}) == \
        "Ada removed a member"
