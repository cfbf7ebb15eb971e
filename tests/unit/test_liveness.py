"""The derived liveness of an open attempt (board/store/liveness.py), the one function behind the
Board's drawer and MCP's get_todo: its four levels, note activity, and the settings."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from board.config import from_env
from board.errors import Invalid
from board.store.liveness import derive, waiting_for_person

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def attempt(claimed=-10, beat=None, note=None, lease=50, ended=None) -> dict:
    at = lambda s: None if s is None else NOW + timedelta(seconds=s)  # noqa: E731
    return {"claimed_at": at(claimed), "last_heartbeat_at": at(beat), "last_note_at": at(note),
            "lease_expires_at": at(lease), "ended_at": at(ended)}


def test_a_closed_attempt_has_no_liveness():
    assert derive(attempt(ended=-1), NOW) is None


def test_recent_activity_is_live_and_the_board_says_when_the_lease_ends():
    live = derive(attempt(claimed=-10, lease=50), NOW)
    assert live.level == "live" and live.last_activity_at == NOW - timedelta(seconds=10)
    assert live.explanation == "claimed, no heartbeat yet, 10 s ago; lease ends in 50 s"


def test_nothing_heard_for_over_half_the_lease_is_quiet():
    quiet = derive(attempt(claimed=-100, beat=-40, lease=20), NOW)  # a 60 s lease set 40 s ago
    assert quiet.level == "quiet" and quiet.explanation == "last heartbeat 40 s ago; lease ends in 20 s"


def test_a_note_is_activity_without_moving_the_lease():
    noted = derive(attempt(claimed=-100, beat=-40, note=-5, lease=20), NOW)
    assert noted.level == "live" and noted.last_activity_at == NOW - timedelta(seconds=5)
    assert noted.explanation == "last note 5 s ago; lease ends in 20 s"


def test_an_ended_lease_is_overdue_then_lapsed():
    overdue = derive(attempt(claimed=-70, lease=-10), NOW)
    assert overdue.level == "overdue" and overdue.explanation.startswith("lease lapsed 10 s ago;")
    assert derive(attempt(claimed=-100, lease=-40), NOW).level == "lapsed"
    assert derive(attempt(claimed=-100, lease=-40), NOW, lapsed_seconds=60).level == "overdue"


def test_the_quiet_threshold_is_a_setting():
    a = attempt(claimed=-20, lease=40)  # 20 s of a 60 s lease
    assert derive(a, NOW).level == "live"
    assert derive(a, NOW, quiet_fraction=0.25).level == "quiet"


def test_the_thresholds_and_the_note_cap_are_read_from_the_environment():
    s = from_env({"SWITCHBOARD_ATTEMPT_NOTES_MAX": "7", "SWITCHBOARD_LIVENESS_QUIET_FRACTION": "0.8",
                  "SWITCHBOARD_LIVENESS_LAPSED_SECONDS": "90"})
    assert (s.attempt_notes_max, s.liveness_quiet_fraction, s.liveness_lapsed_seconds) == (7, 0.8, 90.0)
    d = from_env({})
    assert (d.attempt_notes_max, d.liveness_quiet_fraction, d.liveness_lapsed_seconds) == (100, 0.5, 30.0)
    for env in ({"SWITCHBOARD_ATTEMPT_NOTES_MAX": "0"}, {"SWITCHBOARD_LIVENESS_QUIET_FRACTION": "1.5"}):
        with pytest.raises(Invalid) as e:
            from_env(env)
        assert e.value.argument == next(iter(env))


def test_an_unanswered_interrupt_waits_for_a_person_whatever_its_lease():
    asked = {"answered_at": None, "asked_at": NOW - timedelta(minutes=3),
             "question_expires_at": NOW + timedelta(minutes=27)}
    assert waiting_for_person("input_required", asked) == {"asked_at": asked["asked_at"],
                                                           "expires_at": asked["question_expires_at"]}
    assert waiting_for_person("auth_required", {"answered_at": None}) == {"asked_at": None, "expires_at": None}
    # times read from JSON are text
    assert waiting_for_person("input_required", {"asked_at": "2026-12-01T11:57:00+00:00"})["asked_at"] == \
        NOW - timedelta(minutes=3)


def test_an_answered_or_running_attempt_is_not_waiting_for_a_person():
    assert waiting_for_person("input_required", {"answered_at": NOW - timedelta(seconds=5),
                                                 "asked_at": NOW - timedelta(minutes=3)}) is None
    assert waiting_for_person("claimed", {"answered_at": None, "asked_at": NOW - timedelta(minutes=3)}) is None
