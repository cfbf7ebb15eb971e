"""The overview's pure parts: when a live stream refreshes it (a busy queue coalesces into
one refresh per gap), and how its chart and its text equivalent are drawn."""

from __future__ import annotations

from board.web.overview import CHART_HEIGHT, CHART_OUTCOMES, WINDOWS, RefreshSchedule, chart_bars, summary_text


def test_a_burst_of_changes_coalesces_into_one_refresh_per_gap():
    s = RefreshSchedule(sent_at=0.0, at=60.0, min_gap=2.0, idle=60.0)
    due = []
    for i in range(1000):  # a change every 10 ms for 10 s
        now = i * 0.01
        s.changed(now)
        if s.due(now):
            due.append(now)
            s.sent(now)
    # 1000 changes, 4 refreshes: the first change waits out the gap after the snapshot
    assert [round(t, 6) for t in due] == [2.0, 4.0, 6.0, 8.0]


def test_a_quiet_stream_refreshes_when_idle_and_a_change_after_a_quiet_spell_at_once():
    s = RefreshSchedule(sent_at=0.0, at=60.0, min_gap=2.0, idle=60.0)
    assert not s.due(59.9) and s.due(60.0)
    s.sent(60.0)
    s.changed(75.0)
    assert s.due(75.0)
    s.sent(75.0)
    s.at_once(75.5)  # a pause or resume: no gap
    assert s.due(75.5)


def test_the_chart_stacks_each_bucket_oldest_at_the_left_and_its_text_says_the_totals():
    empty = dict.fromkeys(CHART_OUTCOMES, 0)
    buckets = [dict(empty) for _ in range(WINDOWS["hour"].buckets)]
    buckets[-1] = dict(empty, completed=9, died=1)
    buckets[0] = dict(empty, failed=10)
    bars = chart_bars(buckets, scale=10)
    assert [(b["outcome"], b["x"]) for b in bars] == [("failed", 1), ("completed", 111), ("died", 111)]
    completed, died = bars[1], bars[2]
    assert completed["y"] + completed["h"] == CHART_HEIGHT and died["y"] + died["h"] == completed["y"]
    assert bars[0]["h"] == CHART_HEIGHT - 2  # the fullest bucket fills the height (less a margin)
    assert chart_bars(buckets, scale=1000)[0]["h"] == 1.0  # too small for the scale: still seen
    assert summary_text({"completed": 9, "released": 0, "failed": 10, "died": 1}) == \
        "9 completed, 0 released, 10 failed, 1 died"
    assert summary_text(dict.fromkeys(CHART_OUTCOMES, 0)) == "no attempts closed"


def test_every_window_draws_its_bars_across_the_whole_chart():
    from board.web.overview import CHART_WIDTH
    empty = dict.fromkeys(CHART_OUTCOMES, 0)
    for window in WINDOWS.values():
        assert window.bucket_seconds % 300 == 0  # whole five-minute buckets of the counts
        buckets = [dict(empty, completed=1) for _ in range(window.buckets)]
        bars = chart_bars(buckets, scale=1)
        assert len(bars) == window.buckets and bars[0]["x"] == 1
        assert round(bars[-1]["x"] + bars[-1]["w"] + 1, 2) == CHART_WIDTH, window.key
