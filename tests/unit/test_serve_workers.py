"""`switchboard serve --workers`: a whole number from 1, or `auto` for one per core this
process may run on; anything else is refused with a line naming the option."""

from __future__ import annotations

import os

import pytest

from board.cli import _parser


def test_serve_workers_is_a_whole_number_from_1_or_auto_for_each_usable_core():
    parse = _parser().parse_args
    assert parse(["serve"]).workers == 1
    assert parse(["serve", "--workers", "3"]).workers == 3
    assert parse(["serve", "--workers", "auto"]).workers == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", ""])
def test_serve_workers_refuses_anything_else_naming_the_option(value, capsys):
    with pytest.raises(SystemExit) as stopped:
        _parser().parse_args(["serve", "--workers", value])
    assert stopped.value.code == 2
    assert f"argument --workers: must be a whole number from 1, or auto (got {value!r})" in capsys.readouterr().err
