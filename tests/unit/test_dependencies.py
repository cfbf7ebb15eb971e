"""Every third-party module the code imports is declared by the distribution that ships it,
not merely brought by another dependency (which may drop it in any release): board/ by
pyproject.toml's dependencies; switchboard_worker/ by worker/pyproject.toml's and by
pyproject.toml's (the server's distribution ships it too); tests/ and e2e/ by pyproject.toml's
dependencies and its test extra. Imports are read from the source (at the top, in functions,
under TYPE_CHECKING alike); an import name is mapped to its distributions by
importlib.metadata.packages_distributions()."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
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


# OpenTelemetry's modules share one namespace package, `opentelemetry`, across a distribution
# each (the API, the SDK, the exporter, each instrumentation), so a top-level name says nothing:
# each module imported is traced to the distribution whose files hold it.
NAMESPACE = "opentelemetry"


def namespace_imports(folder: Path) -> dict[str, str]:
    """Each module under NAMESPACE imported under `folder` (a `from a import b` counts a.b when
    b is a module), with one file that imports it."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
                names = [n if importlib.util.find_spec(n.rsplit(".", 1)[0]) and _is_module(n) else node.module
                         for n in names]
            else:
                continue
            for name in names:
                if name.split(".")[0] == NAMESPACE:
                    found.setdefault(name, path.relative_to(ROOT).as_posix())
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@functools.cache
def _namespace_files() -> dict[Path, str]:
    """Each Python file of a NAMESPACE distribution -> that distribution."""
    return {Path(dist.locate_file(f)).resolve(): distribution_key(dist.metadata["Name"])
            for dist in importlib.metadata.distributions()
            if distribution_key(dist.metadata["Name"] or "").startswith(NAMESPACE)
            for f in dist.files or [] if f.suffix == ".py"}


def namespace_distribution(module: str) -> str:
    """The distribution whose files hold the module (its package's __init__ for a package)."""
    origin = Path(importlib.util.find_spec(module).origin).resolve()
    return _namespace_files().get(origin, f"none holds {origin}")


@pytest.mark.parametrize("folder, declarations", [
    ("board", declared(SERVER)),
    ("tests", declared(SERVER, "test")),
], ids=["board by the server", "tests"])
def test_every_opentelemetry_module_imported_comes_from_a_declared_distribution(folder, declarations):
    modules = namespace_imports(ROOT / folder)
    assert modules, f"no {NAMESPACE} import found under {folder}/: the scan is broken"
    held = {f"{module} ({file}): {namespace_distribution(module)}" for module, file in modules.items()
            if namespace_distribution(module) not in declarations}
    assert held == set()


def test_the_worker_imports_nothing_of_opentelemetry():
    """It installs alone, with the MCP SDK and nothing of the server's tracing."""
    assert namespace_imports(ROOT / "switchboard_worker") == {}
