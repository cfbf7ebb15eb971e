"""Every SQL statement Switchboard sends, loaded by name from the hand-written files in
board/store/sql/. Each statement starts with a `-- name: x` line and a `-- description: ...` line;
its body runs to the next name (a trailing semicolon dropped). The text is what Postgres
receives: psycopg turns each %(param)s into a $n parameter. A duplicate name, a missing
description or an empty body fails at import."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SQL_DIR = Path(__file__).with_name("sql")
_NAME = re.compile(r"^-- name: ([a-z][a-z0-9_]*)\s*$")
_DESCRIPTION = re.compile(r"^-- description: (\S.*)$")


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    sql: str
    file: str


def parse(text: str, file: str) -> list[Query]:
    """The statements of one file, in order."""
    queries, current = [], None
    for number, line in enumerate(text.splitlines(), 1):
        named = _NAME.match(line)
        if named:
            current = {"name": named.group(1), "line": number, "description": None, "body": []}
            queries.append(current)
        elif current is not None and current["description"] is None and not current["body"]:
            described = _DESCRIPTION.match(line)
            if described is None:
                raise ValueError(f"{file}:{number}: statement {current['name']} has no '-- description:' line")
            current["description"] = described.group(1).strip()
        elif current is not None:
            current["body"].append(line)
        elif line.strip() and not line.startswith("--"):
            raise ValueError(f"{file}:{number}: SQL before the first '-- name:' line")
    out = []
    for q in queries:
        sql = "\n".join(q["body"]).strip().removesuffix(";").strip()
        if not sql or all(not ln.strip() or ln.lstrip().startswith("--") for ln in sql.splitlines()):
            raise ValueError(f"{file}:{q['line']}: statement {q['name']} has an empty body")
        out.append(Query(q["name"], q["description"], sql, file))
    return out


def load(directory: Path = SQL_DIR) -> dict[str, Query]:
    """Every statement of every .sql file in directory, by name."""
    found: dict[str, Query] = {}
    for path in sorted(directory.glob("*.sql")):
        for q in parse(path.read_text(), f"board/store/sql/{path.name}"):
            if q.name in found:
                raise ValueError(f"statement {q.name} is defined twice ({found[q.name].file}, {q.file})")
            found[q.name] = q
    return found


QUERIES = load()


def query(name: str) -> Query:
    """The statement called name; a KeyError names what is missing."""
    try:
        return QUERIES[name]
    except KeyError:
        raise KeyError(f"no statement {name!r} in board/store/sql/") from None


async def execute(conn, q: Query, params: dict | None = None):
    """Run a loaded statement on an async connection: the one way the store sends SQL."""
    if not isinstance(q, Query):
        raise TypeError(f"execute takes a Query from board/store/sql/, not {type(q).__name__}")
    return await conn.execute(q.sql, params)


def execute_sync(conn, q: Query, params: dict | None = None):
    """The same on a synchronous connection (the embedded server's setup)."""
    if not isinstance(q, Query):
        raise TypeError(f"execute_sync takes a Query from board/store/sql/, not {type(q).__name__}")
    return conn.execute(q.sql, params)
