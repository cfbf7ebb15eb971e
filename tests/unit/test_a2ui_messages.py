"""The A2UI todo detail messages (board/view/a2ui.py) against the pinned A2UI v0.9 schemas
(tests/a2ui_schemas/), for a todo with every kind of attempt; and the view's own promises."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from board.view import a2ui
from board.view.todo_detail import DIED_LABEL, todo_detail
from tests.a2ui_schema import problems

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)


def attempt(seq: int, outcome: str | None, **over) -> dict:
    closed = outcome is not None
    row = {"seq": seq, "attempt": seq, "claimer_kind": "endpoint", "claimant": f"run-{seq}",
           "claimed_at": T0 + timedelta(minutes=10 * seq), "last_heartbeat_at": None,
           "lease_expires_at": T0 + timedelta(minutes=10 * seq + 5),
           "ended_at": T0 + timedelta(minutes=10 * seq + 4) if closed else None, "outcome": outcome,
           "disposition": {"completed": "done", "failed": "retry_scheduled", "released": "requeued"}.get(
               outcome, "requeued") if closed else None,
           "died": outcome in ("lease_expired", "reaped"), "summary": None, "summary_truncated": False,
           "artifact": None, "notes_count": 0, "notes_pruned": 0, "last_note_at": None, "notes": [], "usage": None}
    row.update(over)
    return row


def every_kind_todo() -> dict:
    attempts = [
        attempt(5, None, liveness="live", last_heartbeat_at=T0 + timedelta(minutes=51)),
        attempt(4, "failed", summary="<script>alert(1)</script>", summary_truncated=True,
                artifact="mcp://cairn/abc-1", notes_count=3, notes_pruned=1,
                notes=[{"at": T0, "text": "tried **bold**", "truncated": False, "author_kind": "endpoint"}]),
        attempt(3, "reaped"),
        attempt(2, "released", artifact="https://example.test/run/2", claimer_kind="owner", claimant=None,
                usage={"input_tokens": 1200, "output_tokens": 30, "cost_usd": 0.5, "model": "m"}),
        attempt(1, "completed", summary="done"),
    ]
    return {"id": "0197a1f0-0000-7000-8000-000000000001", "queue": "q", "title": "Fix the build", "state": "claimed",
            "owner": "agent:w", "attempt": 5, "max_attempts": 6, "lease_expires_at": T0 + timedelta(hours=1),
            "next_retry_at": None, "dead_letter": False, "payload": {}, "routing": {}, "result": None,
            "attempts_total": 5, "attempts_pruned": 0, "created_at": T0, "updated_at": T0, "attempts": attempts,
            "attempt_outcomes": {}, "continues_id": None, "continued_by_id": None,
            "chain": [{"id": "0197a1f0-0000-7000-8000-000000000001", "title": "Fix the build", "state": "claimed",
                       "dead_letter": False, "attempts_total": 5, "last_outcome": None, "last_summary": None,
                       "last_summary_cut": False}], "chain_truncated": False, "usage": None}


def test_every_message_validates_against_the_a2ui_v0_9_schemas():
    messages = a2ui.messages(todo_detail(every_kind_todo(), T0 + timedelta(hours=1)))
    assert [next(k for k in m if k != "version") for m in messages] == \
        ["createSurface", "updateComponents", "updateDataModel"]
    for message in messages:
        assert problems(message) == [], message
    assert problems(messages, "server_to_client_list.json") == []


def test_a_broken_message_fails_the_schema_check():
    """The check can fail: an unknown component and a missing surface id are both caught."""
    messages = a2ui.messages(todo_detail(every_kind_todo(), T0))
    components = json.loads(json.dumps(messages[1]))
    components["updateComponents"]["components"].append({"id": "x", "component": "Marquee", "text": "hi"})
    assert problems(components)
    assert problems({"version": "v0.9", "updateDataModel": {"value": {}}})


def test_the_component_tree_is_the_same_for_any_todo_so_a_change_is_a_data_model_update():
    before = a2ui.messages(todo_detail(every_kind_todo(), T0))
    changed = every_kind_todo()
    changed["attempts"] = changed["attempts"][1:]  # the open attempt gone, say
    changed["state"] = "failed"
    after = a2ui.messages(todo_detail(changed, T0))
    assert before[:2] == after[:2]
    assert before[2] != after[2]


def test_the_view_says_died_in_words_links_only_https_and_keeps_summaries_literal():
    detail = todo_detail(every_kind_todo(), T0 + timedelta(hours=1))
    by_seq = {a["seq"]: a for a in detail["attempts"]}
    assert [a["seq"] for a in detail["attempts"]] == [5, 4, 3, 2, 1]
    assert by_seq[3]["died_marker"] == [{"label": DIED_LABEL}] and DIED_LABEL == "died: no report"
    assert [a["seq"] for a in detail["attempts"] if a["died_marker"]] == [3]
    assert by_seq[4]["summary_text"] == "<script>alert(1)</script>" and by_seq[4]["truncated_mark"]
    assert by_seq[4]["artifact_link"] == [] and by_seq[4]["artifact_text"] == "mcp://cairn/abc-1"
    assert by_seq[2]["artifact_link"] == [{"url": "https://example.test/run/2"}] and by_seq[2]["artifact_text"] == ""
    assert detail["current"][0]["level"] == "live"
    text = json.dumps(detail)
    assert "claimer_session" not in text and "lease_token" not in text
