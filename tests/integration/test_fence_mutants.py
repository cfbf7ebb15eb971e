"""The fence's guards, each broken on purpose in a copy of the package (scripts/mutants.py):
every one of these mutants must make a test fail. The whole list runs with
`scripts/mutants.py`; this is the part CI runs on every change."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_every_fence_mutant_is_killed_by_the_tests():
    ran = subprocess.run([sys.executable, str(ROOT / "scripts" / "mutants.py"), "--group", "fence"], cwd=ROOT,
                         capture_output=True, text=True, timeout=540)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "survived" in ran.stdout and "SURVIVED" not in ran.stdout, ran.stdout
