"""No import cycle among switch's modules, counting every import wherever it stands (a function-level import
hides a cycle from the interpreter until the wrong module is imported first, and from import-linter's layers)."""

from __future__ import annotations

import ast

from hypothesis import given
from hypothesis import strategies as st

from tests.test_boundaries import absolute, module_name, source_files

Graph = dict[str, set[str]]


def imported_modules(source: str, importer: str, is_package: bool, modules: frozenset[str]) -> set[str]:
    """Every module of `modules` that `source` imports, at the top, in a function or under TYPE_CHECKING."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = absolute(importer, is_package, node)
            # `from package import name` imports the submodule `name` when there is one, else reads the package.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        found.update(_known(target, modules) for target in targets)
    found.discard("")
    found.discard(importer)
    return found


def _known(target: str, modules: frozenset[str]) -> str:
    """`target`, or the nearest enclosing module of ours ("" when it is not ours)."""
    parts = target.split(".")
    while parts:
        name = ".".join(parts)
        if name in modules:
            return name
        parts.pop()
    return ""


def find_cycle(graph: Graph) -> list[str] | None:
    """One cycle of `graph` as its modules in import order, first repeated last (None: there is none)."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, list[str]]] = [(start, sorted(graph.get(start, ())))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, pending = stack[-1]
            if not pending:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            child = pending.pop(0)
            if child in on_path:
                return [*path[path.index(child) :], child]
            if child not in done:
                stack.append((child, sorted(graph.get(child, ()))))
                path.append(child)
                on_path.add(child)
    return None


def import_graph() -> Graph:
    """Which of switch's and the dashboard's modules each one imports."""
    files = source_files()
    modules = frozenset(module_name(path)[0] for path in files)
    return {
        module_name(path)[0]: imported_modules(path.read_text(encoding="utf-8"), *module_name(path), modules)
        for path in files
    }


def test_no_import_cycle_even_through_function_level_imports() -> None:
    graph = import_graph()
    assert len(graph) > 100 and "switch.config" in graph
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


MODULES = frozenset({"switch.a", "switch.b", "switch.pkg", "switch.pkg.c"})


def test_the_walk_sees_imports_inside_functions_and_type_checking_blocks() -> None:
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from switch.b import B\n"
        "def f():\n    from switch.pkg import c\n    import switch.a.nothing\n"
    )
    assert imported_modules(source, "switch.x", False, MODULES) == {"switch.a", "switch.b", "switch.pkg.c"}
    assert imported_modules("from . import c\nfrom .c import name", "switch.pkg", True, MODULES) == {"switch.pkg.c"}


def test_a_cycle_hidden_in_a_function_is_found_and_printed_in_order() -> None:
    graph = {"switch.a": {"switch.b"}, "switch.b": {"switch.pkg.c"}, "switch.pkg.c": {"switch.a"}, "switch.x": set()}
    assert find_cycle(graph) == ["switch.a", "switch.b", "switch.pkg.c", "switch.a"]
    assert find_cycle({"switch.a": {"switch.b"}, "switch.b": set()}) is None


@given(st.dictionaries(st.integers(0, 7), st.sets(st.integers(0, 7), max_size=4), max_size=8))
def test_a_cycle_is_reported_exactly_when_the_graph_has_one(edges: dict[int, set[int]]) -> None:
    graph = {str(node): {str(child) for child in children} for node, children in edges.items()}
    cycle = find_cycle(graph)
    # Reference answer: a graph has no cycle exactly when repeatedly removing nodes without out-edges empties it.
    remaining = {node: set(children) for node, children in graph.items()}
    for children in list(remaining.values()):
        for child in children:
            remaining.setdefault(child, set())
    while True:
        sinks = {node for node, children in remaining.items() if not children & remaining.keys()}
        if not sinks:
            break
        for node in sinks:
            del remaining[node]
    assert (cycle is None) == (not remaining)
    if cycle is not None:
        assert cycle[0] == cycle[-1]
        assert all(after in graph.get(before, set()) for before, after in zip(cycle, cycle[1:], strict=False))
