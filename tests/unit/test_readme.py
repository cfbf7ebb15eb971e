"""The README stays a five-minute read, and the configuration reference stays complete.

README.md is under 1,200 words, carries no specification or requirement ids, and names the
two commands; every environment variable board/config.py reads is in docs/configuration.md,
and every numeric default there matches the one in `Settings`. Everything is read from the
files (config.py is parsed, not imported)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"
CONFIG_PY = ROOT / "board" / "config.py"

WORD_LIMIT = 1200
ENV_NAME = re.compile(r"(?:SWITCHBOARD_[A-Z0-9_]+|DATABASE_URL)")


def _config_tree() -> ast.Module:
    return ast.parse(CONFIG_PY.read_text(encoding="utf-8"))


def env_vars_read() -> set[str]:
    """Every environment variable config.py names as a whole string: `get("X")`, `"X" in env`,
    `env["X"]`, the keys of its table of numbers, an error's `argument="X"`."""
    return {
        node.value
        for node in ast.walk(_config_tree())
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and ENV_NAME.fullmatch(node.value)
    }


def numeric_settings() -> dict[str, str]:
    """config.py's table of numeric variables: variable name -> Settings attribute."""
    for node in ast.walk(_config_tree()):
        if isinstance(node, ast.Dict) and node.keys and all(
            isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value.startswith("SWITCHBOARD_")
            for k in node.keys
        ):
            return {k.value: v.elts[0].value for k, v in zip(node.keys, node.values)}
    raise AssertionError("board/config.py no longer has its table of numeric variables")


def settings_defaults() -> dict[str, object]:
    """The literal defaults of the Settings dataclass's fields."""
    for node in ast.walk(_config_tree()):
        if isinstance(node, ast.ClassDef) and node.name == "Settings":
            return {
                stmt.target.id: stmt.value.value
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.value, ast.Constant)
            }
    raise AssertionError("board/config.py no longer defines Settings")


def documented_defaults() -> dict[str, str]:
    """docs/configuration.md's table: variable -> its default cell. A row naming several
    variables (`A` / `B`) gives them the defaults in the same order (`1` / `2`)."""
    found: dict[str, str] = {}
    for line in CONFIGURATION.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3:
            continue
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0])
        if not names or not all(ENV_NAME.fullmatch(n) for n in names):
            continue
        defaults = [d.strip().strip("`") for d in cells[2].split(" / ")]
        if len(defaults) != len(names):
            defaults = [cells[2]] * len(names)
        found.update(zip(names, defaults))
    return found


def test_readme_is_under_the_word_limit():
    words = len(README.read_text(encoding="utf-8").split())
    assert words < WORD_LIMIT, f"README.md has {words} words; keep it under {WORD_LIMIT} (move reference to docs/)"


def test_readme_has_no_spec_or_req_ids():
    text = README.read_text(encoding="utf-8")
    ids = sorted(set(re.findall(r"\b(?:SPEC|REQ)-\d+", text)))
    assert not ids, f"README.md names {ids}; say what is meant in plain words"


def test_readme_names_the_two_commands():
    text = README.read_text(encoding="utf-8")
    for command in ("scripts/run.sh", "scripts/test.sh"):
        assert command in text, f"README.md does not name {command}"


def test_every_variable_config_reads_is_documented():
    read = env_vars_read()
    # The parse must see the table of numbers too, or this test would pass on nothing.
    assert set(numeric_settings()) <= read
    assert len(read) >= 30, sorted(read)
    documented = documented_defaults()
    missing = sorted(read - set(documented))
    assert not missing, f"docs/configuration.md's table lacks {missing}"


def test_documented_numeric_defaults_match_settings():
    defaults = settings_defaults()
    documented = documented_defaults()
    wrong = {}
    for name, attr in numeric_settings().items():
        cell = documented.get(name)
        try:
            same = cell is not None and float(cell) == float(defaults[attr])
        except ValueError:
            same = False
        if not same:
            wrong[name] = (cell, defaults[attr])
    assert not wrong, f"docs/configuration.md's defaults differ from Settings (documented, actual): {wrong}"


def readme_sections() -> dict[str, str]:
    text = README.read_text(encoding="utf-8")
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_every_docs_page_the_readme_names_exists_and_every_page_is_named():
    text = README.read_text(encoding="utf-8")
    named = set(re.findall(r"docs/[\w./-]+\.md", text))
    assert {p for p in named if not (ROOT / p).is_file()} == set()
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}
    assert pages - named == set(), "README.md does not lead to these pages"


def test_connecting_an_agent_leads_to_the_agent_hosts_page():
    assert "`docs/agent-hosts.md`" in readme_sections()["Connecting an agent"]
