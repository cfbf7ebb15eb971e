"""What the demo's banner tells a newcomer about what it keeps and what it deletes."""

from __future__ import annotations

from pathlib import Path

from board.demo import Credentials, Limits
from board.demo.banner import banner


def test_demo_banner_says_it_keeps_your_todos_and_deletes_only_its_own(capsys):
    banner("http://127.0.0.1:8000", Path("/tmp/sb/demo"), Credentials("demo", "pw", "sb_token", 1), Limits(), None)
    lines = capsys.readouterr().out.splitlines()
    keeps = [line for line in lines if line.startswith("  keeps ")]
    assert len(keeps) == 1, lines
    assert "every todo you add" in keeps[0] and "deletes only its own finished todos" in keeps[0]
