"""Every third-party module the code imports is declared by the distribution that ships it,
not merely brought by another dependency (which may drop it in any release): board/ by
pyproject.toml's dependencies; switchboard_worker/ by worker/pyproject.toml's and by
pyproject.toml's (the server's distribution ships it too); tests/ and e2e/ by pyproject.toml's
dependencies and its test extra. Imports are read from the source (at the top, in functions,
under TYPE_CHECKING alike); an import name is mapped to its distributions by
importlib.metadata.packages_distributions()."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = {"board", "switchboard_worker", "tests", "e2e", "__future__"}
# The benchmarks' modules, which a few tests import from bench/ by path.
FIRST_PARTY |= {p.stem for p in (ROOT / "bench").glob("*.py")}


def distribution_key(name: str) -> str:
    """A distribution name compared as pip does (PEP 503): `prometheus_client` is `prometheus-client`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(pyproject: Path, *extras: str) -> set[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project.get("dependencies", []))
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    return {distribution_key(re.match(r"[A-Za-z0-9._-]+", r).group(0)) for r in requirements}


def imported(folder: Path) -> dict[str, str]:
    """Each top-level module imported under `folder` that is neither the standard library's nor
    the repository's, with one file that imports it."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        if "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY:
                    found.setdefault(top, path.relative_to(ROOT).as_posix())
    return found


def undeclared(modules: dict[str, str], declarations: set[str]) -> list[str]:
    """`module (file): its distributions` for each module no declared distribution provides."""
    distributions = importlib.metadata.packages_distributions()
    missing = []
    for module, file in sorted(modules.items()):
        provided_by = distributions.get(module, [])
        if not {distribution_key(d) for d in provided_by} & declarations:
            missing.append(f"{module} ({file}): {', '.join(provided_by) or 'not installed'}")
    return missing


SERVER = ROOT / "pyproject.toml"
WORKER = ROOT / "worker" / "pyproject.toml"


@pytest.mark.parametrize("folder, declarations", [
    ("board", declared(SERVER)),
    ("switchboard_worker", declared(WORKER)),
    ("switchboard_worker", declared(SERVER)),
    ("tests", declared(SERVER, "test")),
    ("e2e", declared(SERVER, "test")),
], ids=["board by the server", "the worker by its own", "the worker by the server", "tests", "e2e"])
def test_every_third_party_import_is_declared(folder, declarations):
    modules = imported(ROOT / folder)
    assert modules, f"no third-party import found under {folder}/: the scan is broken"
    assert undeclared(modules, declarations) == []


def test_an_import_that_only_comes_along_with_another_dependency_is_reported():
    """httpx2 and mcp_types come with mcp: imported but not declared, each is named."""
    modules = {"mcp": "board/mcp/server.py", "httpx2": "board/ops/hooks.py", "mcp_types": "board/mcp/tools.py",
               "jinja2": "board/web/templating.py", "not_a_module_anywhere": "board/x.py"}
    assert undeclared(modules, {"mcp", "jinja2"}) == [
        "httpx2 (board/ops/hooks.py): httpx2",
        "mcp_types (board/mcp/tools.py): mcp-types",
        "not_a_module_anywhere (board/x.py): not installed",
    ]
