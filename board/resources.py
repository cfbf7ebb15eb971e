"""Where the files the code reads live: migrations/, templates/ and static/ sit beside the
package in a source checkout, and inside it (as board.migrations, ...) in an installed wheel
(pyproject.toml maps them there)."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """The folder `name` (migrations, templates or static) of this installation."""
    beside = _PACKAGE.parent / name
    return beside if beside.is_dir() else _PACKAGE / name
