"""No import cycles in ffcore or dashboard (issue #22): every `import` / `from … import` at any level of a
module, function-local ones included (they only hide a cycle), except those under `if TYPE_CHECKING:`."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("ffcore", "dashboard")


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _imports(path: Path, module: str, is_pkg: bool) -> set[str]:
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if is_pkg and isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                # A package's lazy re-export (PEP 562) runs when a caller asks the package for a public name,
                # never while its own modules import one another.
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_pkg else module.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                found.add(target)
                found.update(f"{target}.{a.name}" for a in node.names)  # `from pkg import submodule`
            for field in ("body", "orelse", "finalbody", "handlers"):
                visit(getattr(node, field, []) or [])

    visit(ast.parse(path.read_text()).body)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iteratively deep enough)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_there_is_no_import_cycle_in_ffcore_or_the_dashboard():
    mods = _modules()
    graph = {m: {d for d in _imports(p, m, pkg) if d in mods and d != m} for m, (p, pkg) in mods.items()}
    assert _cycles(graph) == []


def test_the_checker_sees_a_cycle_through_a_function_local_import():
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert _cycles(graph) == [["a", "b"]]
