"""Every repository path the prose names exists: the comments of the SQL files
(board/store/sql/*.sql and migrations/*.sql), the Markdown (README.md, docs/*.md and the
rest), and the docstrings and comments of the Python. A file moves, and a comment naming its
old place is caught here rather than by the next reader.

A path is a word that starts at one of the repository's top-level folders and goes on with
`/`-separated names (`board/live/pause_cache.py`, `docs/mcp.md`, `scripts/`, `tests/unit`);
a test id's `::name` is not part of it. A pattern is not a path: a word with `*`, `<`, `{`,
`...` or a placeholder (NNNN, NAME) is skipped. A name that ends a longer word (`/static/x.css`
in a URL, `<old checkout>/board/...`) is not one either. Read from the files, nothing imported.

Migrations are forward-only and never edited, so a path an old migration names that has
moved since is excused in GONE, with where it went; so is a path of older checkouts that the
benchmark comparing with them names on purpose. Nothing else is excused. A Markdown link to
a file of the repository (`[mcp.md](mcp.md#batched-verbs)`, relative to its page) leads to
one too."""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TOP_LEVEL = ("board", "switchboard_worker", "tests", "e2e", "docs", "scripts", "migrations", "bench", "worker",
             "templates", "static")
# Not preceded by a character that would make it the tail of a longer path, URL or word.
PATH = re.compile(r"(?<![\w./@:-])((?:" + "|".join(TOP_LEVEL) + r")/[\w./*<>{}-]*)")
PLACEHOLDER = re.compile(r"[*<>{}]|\.\.\.|NNNN|\bNAME\b")

# (file, path): a path the file names though it is gone, each for a reason.
GONE = {
    # Landed migrations keep their words.
    ("migrations/0002_attempt_history.sql", "board/store.py"),  # now board/store/store.py
    ("migrations/0004_working_context.sql", "board/vocabulary.py"),  # now board/store/vocabulary.py
    # The claim benchmark loads the statements of an older checkout, laid out as it was.
    ("bench/claim_contention.py", "board/statements.py"),
    ("bench/claim_contention.py", "board/sql"),
    ("docs/performance.md", "board/statements.py"),
}

SKIPPED_FOLDERS = {"node_modules", "__pycache__", "switchboard.egg-info"}  # and every .folder (.venv, .git, ...)


def tracked(suffix: str) -> list[Path]:
    """The repository's files ending in `suffix`, outside the virtualenv and the caches."""
    found = []
    for folder, subfolders, names in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if name not in SKIPPED_FOLDERS and not name.startswith(".")]
        found += [Path(folder) / name for name in names if name.endswith(suffix)]
    return sorted(found)


def paths_in(text: str) -> list[str]:
    """The repository paths `text` names, each as written, less a sentence's full stop."""
    found = []
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".")
        if PLACEHOLDER.search(path):
            continue
        found.append(path)
    return found


def exists(path: str) -> bool:
    return (ROOT / path).exists()


def sql_comments(text: str) -> str:
    return "\n".join(line.split("--", 1)[1] for line in text.splitlines() if "--" in line)


def python_prose(text: str) -> str:
    """The docstrings and the comments of a Python module."""
    parts = [tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                parts.append(docstring)
    return "\n".join(parts)


def prose_files() -> list[tuple[Path, str]]:
    """Every file whose prose is checked, with that prose."""
    files = [(p, sql_comments(p.read_text(encoding="utf-8"))) for p in tracked(".sql")]
    files += [(p, p.read_text(encoding="utf-8")) for p in tracked(".md")]
    for module in tracked(".py"):
        # Only a module whose whole text names a path that is gone can name one in its prose:
        # the others are not parsed (parsing every module takes seconds).
        text = module.read_text(encoding="utf-8")
        files.append((module, python_prose(text) if not all(map(exists, paths_in(text))) else text))
    return files


def missing_paths(files: list[tuple[Path, str]], base: Path = ROOT) -> list[str]:
    """`file: path` for each path a file names that is not in the repository."""
    missing = []
    for file, prose in files:
        for path in paths_in(prose):
            named_by = file.relative_to(base).as_posix()
            if not exists(path) and (named_by, path) not in GONE:
                missing.append(f"{named_by}: {path}")
    return missing


def test_every_path_the_sql_markdown_and_python_prose_names_exists():
    files = prose_files()
    kinds = {p.suffix for p, _ in files}
    assert {".sql", ".md", ".py"} <= kinds and len(files) > 100, "the scan found too few files to mean anything"
    assert missing_paths(files) == []


MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def broken_links(page: Path, text: str) -> list[str]:
    """The targets of the page's relative links that lead to no file (anchors not checked)."""
    broken = []
    for match in MARKDOWN_LINK.finditer(text):
        target = match.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:|#", target):  # a URL, a mailto or an anchor of the page
            continue
        if not (page.parent / target.split("#", 1)[0]).exists():
            broken.append(f"{page.relative_to(ROOT).as_posix()}: {target}")
    return broken


def test_every_relative_markdown_link_leads_to_a_file():
    pages = tracked(".md")
    assert broken_links(ROOT / "docs" / "x.md", "[gone](gone.md#top) [there](mcp.md#a) [web](https://x.org/a.md)") \
        == ["docs/x.md: gone.md#top"]
    assert [b for page in pages for b in broken_links(page, page.read_text(encoding="utf-8"))] == []


def test_a_path_excused_as_gone_is_still_named_and_still_gone():
    """GONE stays exact: each of its paths is named by its file and absent."""
    prose = {p.relative_to(ROOT).as_posix(): text for p, text in prose_files()}
    for file, path in sorted(GONE):
        assert path in paths_in(prose[file]), f"{file} no longer names {path}: drop it from GONE"
        assert not exists(path), f"{path} exists again: drop it from GONE"


@pytest.mark.parametrize("text, named", [
    ("-- cache (board/pause_cache.py) vouches", ["board/pause_cache.py"]),
    ("see tests/acceptance/test_demo.py::test_demo_settles.", ["tests/acceptance/test_demo.py"]),
    ("the files of migrations/, run as they are", ["migrations/"]),
    ("[batched verbs](docs/mcp.md#batched-verbs)", ["docs/mcp.md"]),
    ("migrations/NNNN_name.sql and board/store/sql/*.sql", []),
    ("GET /static/board.css and https://example.com/docs/x.md", []),
    ("demo/fixer-1/run-1, board_url", []),
])
def test_a_path_is_told_from_a_pattern_a_url_and_a_word(text, named):
    assert paths_in(text) == named


def test_a_stale_path_in_a_sql_comment_a_markdown_file_or_a_docstring_is_reported(tmp_path):
    sql = tmp_path / "sql" / "claims.sql"
    markdown = tmp_path / "moved.md"
    module = tmp_path / "moved.py"
    for file in (sql, markdown, module):
        file.parent.mkdir(exist_ok=True)
    files = [(sql, sql_comments("-- cache (board/pause_cache.py) vouches\nSELECT 1;  -- board/live/pause_cache.py")),
             (markdown, "See `board/vocabulary.py` and docs/mcp.md."),
             (module, python_prose('"""Loaded by board/store/queries.py."""\nx = 1  # tests/unit/gone.py::test_x\n'))]
    assert missing_paths(files, tmp_path) == ["sql/claims.sql: board/pause_cache.py", "moved.md: board/vocabulary.py",
                                              "moved.py: tests/unit/gone.py"]
