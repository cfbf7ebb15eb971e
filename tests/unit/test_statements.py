"""Every SQL statement Switchboard sends is a named, described statement of board/store/sql/, loaded
by board/store/queries.py: no Python module builds or holds SQL text, the store executes only
loaded statements, and every loaded statement is run by some code path."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from board.store import db

from board.store import queries

from board.store import base
from board.store.queries import QUERIES, Query, parse
from board.store.vocabulary import NOTIFY_CHANNEL

BOARD = Path(queries.__file__).parent
LOADER = BOARD / "queries.py"
MODULES = sorted(p for p in BOARD.rglob("*.py") if p != LOADER)

# SQL-shaped text, in the upper-case keywords every statement here is written in: a
# statement's leading words, a LISTEN/NOTIFY/VACUUM/EXPLAIN line of its own, or a call only SQL
# makes. (Lower-case SQL would pass unseen; prose uses these words in lower case.)
SQL_SHAPED = re.compile(
    r"\b(SELECT\b|INSERT\s+INTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b|WITH\s+(RECURSIVE\s+)?\w+\s+AS\s*\("
    r"|CREATE\s+(OR\s+REPLACE\s+|UNIQUE\s+)?(TABLE|DATABASE|INDEX|FUNCTION|VIEW|TRIGGER|DOMAIN|TYPE)\b"
    r"|ALTER\s+(TABLE|SYSTEM|DATABASE|FUNCTION|VIEW)\b|DROP\s+(TABLE|DATABASE|INDEX|FUNCTION|VIEW)\b|TRUNCATE\s+\w)"
    r"|^\s*(UNLISTEN|LISTEN|NOTIFY|VACUUM|EXPLAIN|ANALYZE)(\s+[\w$(]+)?\s*;?\s*$"
    r"|\bpg_(advisory_\w+|notify|sleep|terminate_backend|cancel_backend)\s*\(", re.MULTILINE)


def _strings(tree: ast.AST):
    """(line, text) of every string constant, the literal parts of f-strings included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            value = node.value.decode(errors="replace") if isinstance(node.value, bytes) else node.value
            yield node.lineno, value


def sql_in_python(paths) -> list[str]:
    found = []
    for path in paths:
        for line, text in _strings(ast.parse(path.read_text(), str(path))):
            hit = SQL_SHAPED.search(text)
            if hit:
                found.append(f"{path.name}:{line}: {hit.group(0)!r} in {text[:80]!r}")
    return found


def test_no_python_module_holds_sql_text():
    """SQL lives in board/store/sql/*.sql and migrations/: no string constant or f-string of a
    board module looks like a statement (docstrings included: prose says "the claim", not
    the statement's words)."""
    found = sql_in_python(MODULES)
    assert not found, "SQL text outside board/store/sql/:\n" + "\n".join(found)


def test_the_scan_sees_sql_in_every_shape(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('A = "SELECT id FROM todos"\nB = f"UPDATE todos SET x = {1}"\n'
                      'C = "SELECT " + "1"\nD = b"LISTEN chan"\nE = "pg_advisory_lock(%s)"\n'
                      'F = "WITH upd AS (x)"\nG = "Select a todo, then update the docs"\n'
                      'H = "The LISTEN fan-out: one connection"\nI = "LISTEN connection lost (%s)"\n')
    found = sql_in_python([sample])
    assert sorted(int(f.split(":")[1]) for f in found) == [1, 2, 3, 4, 5, 6], found


def test_every_statement_has_a_name_a_description_and_a_body():
    assert len(QUERIES) > 60
    for name, q in QUERIES.items():
        assert q.name == name and re.fullmatch(r"[a-z][a-z0-9_]*", name)
        assert q.description and "\n" not in q.description, name
        assert q.sql.strip() and not q.sql.rstrip().endswith(";"), name


@pytest.mark.parametrize("text, problem", [
    ("-- name: a\nSELECT 1;\n", "no '-- description:' line"),
    ("-- name: a\n-- description: one\n\n-- name: b\n-- description: two\nSELECT 2;\n", "empty body"),
    ("-- name: a\n-- description: one\n-- only a comment\n;\n", "empty body"),
    ("SELECT 1;\n-- name: a\n-- description: one\nSELECT 1;\n", "before the first"),
])
def test_the_loader_refuses_a_statement_without_its_parts(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse(text, "x.sql")


def test_the_loader_refuses_a_name_defined_twice(tmp_path):
    (tmp_path / "a.sql").write_text("-- name: x\n-- description: one\nSELECT 1;\n")
    (tmp_path / "b.sql").write_text("-- name: x\n-- description: two\nSELECT 2;\n")
    with pytest.raises(ValueError, match="defined twice"):
        queries.load(tmp_path)


def _query_calls():
    """Every query(...) call in the board modules: (file, line, the name or None when not a literal)."""
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "query":
                arg = node.args[0] if node.args else None
                name = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
                yield path.name, node.lineno, name


def test_every_loaded_statement_is_run_by_name_and_every_name_is_loaded():
    calls = list(_query_calls())
    assert not [c for c in calls if c[2] is None], "query() takes a literal name"
    used = {name for _, _, name in calls}
    assert used - set(QUERIES) == set(), "names with no statement"
    assert set(QUERIES) - used == set(), "statements no code path runs"


def test_only_the_loader_sends_sql():
    """Every conn.execute of a board module is the loader's execute (which takes a Query)."""
    found = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("execute", "executemany", "copy")):
                found.append(f"{path.name}:{node.lineno}")
    assert not found, found


async def test_execute_refuses_text():
    with pytest.raises(TypeError):
        await queries.execute(None, "SELECT 1")
    with pytest.raises(TypeError):
        queries.execute_sync(None, "SELECT 1")


def test_the_statements_retried_after_a_dead_connection_change_nothing():
    """The store runs a statement of READS a second time when its connection died under it;
    only a statement that writes nothing and notifies no one may be one (a SELECT, or a WITH
    whose parts are SELECTs)."""
    writes = re.compile(r"\b(INSERT|UPDATE|DELETE|pg_notify|FOR UPDATE|FOR SHARE|nextval)\b", re.IGNORECASE)
    assert base.READS and all(isinstance(q, Query) for q in base.READS)
    for q in base.READS:
        assert q.sql.lstrip().upper().startswith(("SELECT", "WITH")), q.name
        assert not writes.search(q.sql), q.name
    assert QUERIES["todo_add"] not in base.READS and QUERIES["endpoint_touch"] not in base.READS


def test_the_fixed_names_in_the_statements_are_the_codes():
    """The NOTIFY channel and the embedded database are fixed text in the statements."""
    channels = set()
    for q in QUERIES.values():
        channels |= set(re.findall(r"pg_notify\('([^']+)'", q.sql))
    assert channels == {NOTIFY_CHANNEL}
    assert QUERIES["notify_listen"].sql == f"LISTEN {NOTIFY_CHANNEL}"
    assert QUERIES["embedded_database_create"].sql == f"CREATE DATABASE {db.EMBEDDED_DATABASE}"
