"""The REQ-18 bench's verdict: the floor counts as met only when the whole confidence interval
of the attempts/baseline ratio clears it, never on a lucky mean. And its schema variants
(--variant NAME=SQL), refused when they name nothing to run."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from claim_contention import floor_verdict, parse_variants, ratio_interval  # noqa: E402


def test_steady_ratio_above_the_floor_is_met():
    mean, lo, hi = ratio_interval([0.95, 0.96, 0.94, 0.95, 0.96, 0.94, 0.95, 0.95])
    assert math.isclose(mean, 0.95, abs_tol=0.002)
    assert 0.93 < lo < 0.95 < hi < 0.97
    assert floor_verdict(lo, hi) == "met"


def test_mean_above_the_floor_with_wide_spread_stays_open():
    ratios = [0.80, 1.05, 0.85, 1.02, 0.88, 0.99, 0.83, 1.04]  # geometric mean about 0.93
    mean, lo, hi = ratio_interval(ratios)
    assert mean > 0.90
    assert lo < 0.90 < hi
    assert floor_verdict(lo, hi) == "open"


def test_steady_ratio_below_the_floor_is_missed():
    mean, lo, hi = ratio_interval([0.85, 0.86, 0.84, 0.85, 0.86, 0.84])
    assert hi < 0.90
    assert floor_verdict(lo, hi) == "missed"


def test_more_slices_narrow_the_interval():
    few = ratio_interval([0.88, 0.96] * 3)
    many = ratio_interval([0.88, 0.96] * 30)
    assert (many[2] - many[1]) < (few[2] - few[1]) / 3


def test_a_single_slice_shows_nothing():
    _, lo, hi = ratio_interval([0.97])
    assert floor_verdict(lo, hi) == "open"


def test_a_schema_variant_is_named_sql_or_a_file(tmp_path):
    sql_file = tmp_path / "v.sql"
    sql_file.write_text("DROP INDEX todos_updated_brin;")
    assert parse_variants(["no-fk=ALTER TABLE attempts DROP CONSTRAINT attempts_todo_id_fkey",
                           f"no-brin=@{sql_file}"]) == {
        "no-fk": "ALTER TABLE attempts DROP CONSTRAINT attempts_todo_id_fkey",
        "no-brin": "DROP INDEX todos_updated_brin;"}


def test_a_schema_variant_without_sql_or_with_a_taken_name_is_refused():
    for bad in (["no-sql"], ["x="], ["=SELECT 1"], ["attempts=SELECT 1"], ["a=SELECT 1", "a=SELECT 2"]):
        with pytest.raises(ValueError):
            parse_variants(bad)
