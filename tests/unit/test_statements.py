"""Every SQL statement of board/statements.py as the store sends it, committed in
board/statements.sql so that a review sees each change to SQL in a diff. The statements are
composed from a few shared parts; this test renders them and fails when the rendered and
the committed texts differ. After a deliberate change, write the file anew with
`python -m tests.unit.test_statements`."""

from __future__ import annotations

import re
from pathlib import Path

from board import statements as store

STORE_SOURCE = Path(store.__file__)
STATEMENTS_FILE = STORE_SOURCE.parent / "statements.sql"
HEADER = """-- Every statement the store sends to Postgres, rendered from board/statements.py
-- (psycopg turns each %(name)s into a $n parameter). Generated: do not edit; a test fails
-- when this file and the store differ. Regenerate with `python -m tests.unit.test_statements`.
"""


def _comment_above(name: str, source: list[str]) -> list[str]:
    """The comment block right above `name = ...` or above its template `_NAME = ...`."""
    for target in (name, "_" + name.removeprefix("SQL_")):
        for i, line in enumerate(source):
            if line.startswith(f"{target} = "):
                block = []
                j = i - 1
                while j >= 0 and source[j].startswith("#"):
                    block.insert(0, "-- " + source[j].lstrip("# ").removeprefix("-- ").rstrip())
                    j -= 1
                if block:
                    return block
    return []


def render() -> str:
    source = STORE_SOURCE.read_text().splitlines()
    out = [HEADER]
    for name in sorted(n for n in dir(store) if re.fullmatch(r"SQL_[A-Z_]+", n)):
        value = getattr(store, name)
        variants = value.items() if isinstance(value, dict) else [(None, value)]
        comment = _comment_above(name, source)
        for key, text in variants:
            label = name if key is None else f"{name}[{key!r}]"
            out.append(f"-- name: {label}")
            out.extend(comment)
            out.append(text.strip() + ";")
            out.append("")
    return "\n".join(out)


def test_the_committed_statements_are_the_ones_the_store_sends():
    assert STATEMENTS_FILE.read_text() == render(), (
        "board/statements.sql differs from board/statements.py; regenerate it if the change is meant")


def test_a_one_character_change_to_a_statement_shows(monkeypatch):
    monkeypatch.setattr(store, "SQL_ENDPOINT_TOUCH", store.SQL_ENDPOINT_TOUCH.replace("now()", "now( )"))
    assert STATEMENTS_FILE.read_text() != render()


if __name__ == "__main__":
    STATEMENTS_FILE.write_text(render())
    print(f"wrote {STATEMENTS_FILE}")


def test_the_statements_retried_after_a_dead_connection_change_nothing():
    """The store runs a statement of READS a second time when its connection died under it;
    only a statement that writes nothing and notifies no one may be one."""
    writes = re.compile(r"\b(INSERT|UPDATE|DELETE|pg_notify|FOR UPDATE|nextval)\b", re.IGNORECASE)
    assert store.READS
    for text in store.READS:
        assert text.lstrip().upper().startswith("SELECT"), text
        assert not writes.search(text), text
    assert store.SQL_ADD not in store.READS and store.SQL_ENDPOINT_TOUCH not in store.READS
