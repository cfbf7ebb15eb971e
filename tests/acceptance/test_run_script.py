"""scripts/run.sh installs only when it has to: a second run with nothing changed starts the
command without calling pip, and a changed pyproject.toml is installed again. Run in a copy
of the script beside a stand-in virtualenv whose python records each pip call and whose
`switchboard` prints what it was asked (so nothing is installed or started for real)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import ROOT

FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../pip-calls"
[ -z "$FAIL_PIP" ] || exit 1
"""
FAKE_SWITCHBOARD = """#!/bin/sh
echo "switchboard $*"
"""


def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "run.sh", root / "scripts" / "run.sh")
    (root / "pyproject.toml").write_text('[project]\nname = "switchboard"\nversion = "1"\n')
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON), ("switchboard", FAKE_SWITCHBOARD)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return root


def run(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(root / "scripts" / "run.sh"), *args], capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", **(env or {})})


def pip_calls(root: Path) -> list[str]:
    log = root / ".venv" / "pip-calls"
    return log.read_text().splitlines() if log.exists() else []


def test_run_sh_installs_once_and_again_only_when_pyproject_changes(tmp_path):
    root = checkout(tmp_path)
    first = run(root, "--help")
    assert first.returncode == 0 and first.stdout == "switchboard --help\n", first
    assert pip_calls(root) == ["-m pip install --quiet --disable-pip-version-check -e ."]

    second = run(root, "version")
    assert second.returncode == 0 and second.stdout == "switchboard version\n", second
    assert len(pip_calls(root)) == 1, "the second run called pip with nothing changed"

    with (root / "pyproject.toml").open("a") as f:
        f.write('dependencies = ["httpx"]\n')
    assert run(root, "--help").returncode == 0
    assert len(pip_calls(root)) == 2, "a changed pyproject.toml was not installed"
    assert run(root).stdout == "switchboard demo\n"
    assert len(pip_calls(root)) == 2


def test_run_sh_tries_again_after_a_failed_install(tmp_path):
    root = checkout(tmp_path)
    failed = run(root, "--help", env={"FAIL_PIP": "1"})
    assert failed.returncode != 0 and "switchboard" not in failed.stdout
    assert run(root, "--help").returncode == 0
    assert len(pip_calls(root)) == 2, "a failed install was taken for a finished one"
    assert run(root, "--help").returncode == 0
    assert len(pip_calls(root)) == 2
