"""How the Board words a list row: relative times, the start of a summary, the one line a
changed attempt is announced with, and a todo waiting for a person."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from board.view.todo_detail import waiting_words
from board.web.templating import ENV, attempt_line, fmt_iso, fmt_relative, fmt_when, summary_start

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)


def test_relative_times_read_as_words_before_and_after_now():
    cases = {0: "just now", -9: "just now", -42: "42 s ago", -180: "3 min ago", 150: "in 3 min",
             -89 * 60: "89 min ago", -3 * 3600: "3 h ago", -35 * 3600: "35 h ago", -3 * 86400: "3 days ago",
             -150: "3 min ago"}  # 2.5 min rounds half up, as the page's script does
    for seconds, words in cases.items():
        assert fmt_relative(NOW + timedelta(seconds=seconds), NOW) == words, seconds
    assert fmt_relative(None, NOW) == ""


def test_a_summary_start_is_one_line_cut_on_a_character_boundary_near_80():
    assert summary_start("tests red\n\n  see the log") == "tests red see the log"
    long = "é" * 100
    assert summary_start(long) == "é" * 80 + "\u2026"
    words = " ".join(["word"] * 30)  # 149 characters: cut back to the last space before 80
    cut = summary_start(words)
    assert cut.endswith("word\u2026") and len(cut) <= 81
    assert summary_start("short", cut=True) == "short\u2026"  # the start of a longer text
    assert summary_start(None) == "" and summary_start("") == ""


def test_an_attempt_is_announced_in_one_short_line():
    assert attempt_line({"seq": 3, "outcome": "failed", "summary": "tests red"}) == "Attempt 3 failed: tests red"
    assert attempt_line({"seq": 4, "outcome": None, "claimant": "run-8"}) == "Attempt 4 opened by run-8"
    assert attempt_line({"seq": 5, "outcome": "lease_expired", "summary": None}) == \
        "Attempt 5 lease expired: died, no report"
    assert attempt_line({"seq": 6, "outcome": "completed", "summary": None}) == "Attempt 6 completed"
    line = attempt_line({"seq": 7, "outcome": "released", "summary": "x " * 2000})
    assert "\n" not in line and len(line) < 110


def test_an_attempt_opens_with_one_sentence_a_person_would_say():
    from datetime import datetime, timedelta, timezone

    from board.web.templating import attempt_sentence

    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    failed = {"seq": 3, "outcome": "failed", "claimed_at": t0, "ended_at": t0 + timedelta(minutes=4),
              "claimant": "fixer/run-7", "summary": "tests still red"}
    assert attempt_sentence(failed) == "Attempt 3, failed after 4 minutes, by fixer/run-7: tests still red"
    died = {"seq": 2, "outcome": "reaped", "claimed_at": t0, "ended_at": t0 + timedelta(seconds=90),
            "claimant": None, "claimer_kind": "endpoint", "summary": None}
    assert attempt_sentence(died) == "Attempt 2, died (its lease ran out with no report) after 2 minutes"
    board = {"seq": 1, "outcome": "completed", "claimed_at": t0, "ended_at": t0 + timedelta(seconds=1),
             "claimant": None, "claimer_kind": "owner", "summary": "done by hand"}
    assert attempt_sentence(board) == "Attempt 1, completed after 1 second, by the owner, on the Board: done by hand"
    open_ = {"seq": 4, "outcome": None, "claimed_at": t0, "claimant": "run-8"}
    assert attempt_sentence(open_, now=t0 + timedelta(hours=2)) == "Attempt 4, open for 2 hours, by run-8"


def test_every_template_is_compiled_before_the_first_page_or_live_update_needs_it(monkeypatch):
    from board.resources import resource_dir
    from board.web import templating

    templating.ENV.cache.clear()
    assert templating.compile_templates() == len(list(resource_dir("templates").glob("*.html")))

    def compiling(*args, **kwargs):
        raise AssertionError("a template was compiled at its first rendering")

    monkeypatch.setattr(templating.ENV, "compile", compiling)
    for name in ("_drawer.html", "_note_form.html", "_attempt_row.html", "board.html", "_todo_row.html"):
        templating.ENV.get_template(name)


def test_a_todo_waiting_for_a_person_is_worded_the_same_in_text_and_on_the_board():
    asked = {"asked_at": NOW - timedelta(minutes=3), "expires_at": NOW + timedelta(minutes=27)}
    cases = [(asked, "waiting for a person, asked 3 min ago, expires in 27 min"),
             ({"asked_at": NOW - timedelta(minutes=3), "expires_at": None}, "waiting for a person, asked 3 min ago"),
             ({"asked_at": None, "expires_at": None}, "waiting for a person, no question asked"),
             ({"asked_at": NOW - timedelta(minutes=31), "expires_at": NOW - timedelta(minutes=2)},
              "waiting for a person, asked 31 min ago, expired 2 min ago")]
    macro = ENV.from_string('{% from "_waiting.html" import waiting_line %}{{ waiting_line(w, now) }}')
    for waiting, words in cases:
        assert waiting_words(waiting, NOW) == words
        html = macro.render(w=waiting, now=NOW)
        assert re.sub(r"<[^>]+>", "", html) == words, html
        # each time relative in words, exact in its datetime and tooltip
        for key in ("asked_at", "expires_at"):
            if waiting[key]:
                assert f'datetime="{fmt_iso(waiting[key])}" title="{fmt_when(waiting[key])}" data-relative' in html
    assert "lapsed" not in "".join(macro.render(w=w, now=NOW) for w, _ in cases)
