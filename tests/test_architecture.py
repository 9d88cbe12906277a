"""The rooms and the doors between them (docs/architecture.md), checked on the source.

Each rule here is one a reader relies on to find their way: a broken one fails with the
file and the import that broke it, not with a figure."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("core", "tenancy", "memory", "governance", "dashboard", "config")
MAX_MODULE_LINES = 800

# The doors memory may use into governance: the audit writer and the audited admin, the
# redaction gates, the hold check, and the read ledger's recorder.
MEMORY_DOORS_INTO_GOVERNANCE = (
    "governance.audit",
    "governance.redaction.gates",
    "governance.holds",
    "governance.ledger.buffer",
)


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the module imported from
    names: tuple[str, ...]
    line: int
    top_level: bool  # run when the module is imported (not in a function, not typing-only)

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.target} {list(self.names)}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> Iterator[Path]:
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def _imports(path: Path) -> Iterator[Import]:
    module = _module_name(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    top_level_nodes = {id(node) for node in tree.body}
    for block in tree.body:  # imports inside a module-level try: run at import too
        if isinstance(block, ast.Try):
            top_level_nodes |= {id(node) for node in block.body}
    for node in ast.walk(tree):
        top = id(node) in top_level_nodes and id(node) not in typing_only
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = tuple(alias.name for alias in node.names)
            yield Import(module, node.module, names, node.lineno, top)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, (), node.lineno, top)


def _app_of(target: str) -> str:
    return target.split(".")[0]


ALL_IMPORTS = [imported for path in _sources() for imported in _imports(path)]
MODULES = {_module_name(path) for path in _sources()}


def test_no_module_outside_tests_migrations_and_bench_is_over_800_lines() -> None:
    too_long = {
        str(path.relative_to(ROOT)): lines
        for path in _sources()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert too_long == {}, "split these by concern (docs/architecture.md says where)"


def test_core_imports_no_app() -> None:
    offending = [
        str(imported)
        for imported in ALL_IMPORTS
        if _app_of(imported.module) == "core"
        and _app_of(imported.target) in {"tenancy", "memory", "governance", "dashboard"}
    ]
    assert offending == []


def test_memory_reaches_governance_only_through_its_doors() -> None:
    offending = [
        str(imported)
        for imported in ALL_IMPORTS
        if _app_of(imported.module) == "memory"
        and _app_of(imported.target) == "governance"
        and not imported.target.startswith(MEMORY_DOORS_INTO_GOVERNANCE)
    ]
    assert offending == []


def test_the_mcp_package_uses_only_public_names_of_the_rest_api() -> None:
    offending = [
        str(imported)
        for imported in ALL_IMPORTS
        if imported.module.startswith("memory.mcp")
        and imported.target.startswith("memory.api")
        and (
            imported.target not in {"memory.api.inputs", "memory.api.presenters"}
            or any(name.startswith("_") for name in imported.names)
        )
    ]
    assert offending == []


def test_the_dashboard_never_imports_an_api_module() -> None:
    offending = [
        str(imported)
        for imported in ALL_IMPORTS
        if _app_of(imported.module) == "dashboard"
        and (imported.target.startswith(("memory.api", "governance.api", "memory.mcp")))
    ]
    assert offending == []


def test_no_import_circle_between_files() -> None:
    """Only imports that run when a module is imported count: an import inside a function
    or under TYPE_CHECKING is how a deliberate late binding is written."""
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for imported in ALL_IMPORTS:
        if not imported.top_level:
            continue
        targets = {imported.target} | {f"{imported.target}.{name}" for name in imported.names}
        graph[imported.module] |= {t for t in targets if t in MODULES and t != imported.module}
    circles = _strongly_connected(graph)
    assert circles == [], f"import circles: {circles}"


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize(
    "graph, circles",
    [
        ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_the_circle_finder_finds_circles(
    graph: dict[str, set[str]], circles: list[list[str]]
) -> None:
    assert _strongly_connected(graph) == circles
