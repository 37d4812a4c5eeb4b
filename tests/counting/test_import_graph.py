"""No import cycle in counting or agp, counting every import: those inside functions and those
under ``if TYPE_CHECKING:`` too.

``lint-imports`` (pyproject.toml) reads the graph with ``exclude_type_checking_imports``, so a
cycle closed by a type-only import was invisible to it: ``cli/common`` -> ``option_groups`` ->
``options`` -> ``common`` (a warning printed from inside a function) and ``backbones/base`` <->
``onnx_export`` (the export called from inside a method, the Backbone type read back). A module
that imports another only inside a function still runs it, and a type-only import still makes
the two modules one unit to read and to change.
"""

from __future__ import annotations

import grimp
import pytest


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's cycles as groups of modules that all reach each other (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_strongly_connected_finds_a_cycle_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


@pytest.fixture(scope="module")
def every_import() -> dict[str, set[str]]:
    graph = grimp.build_graph("counting", "agp", exclude_type_checking_imports=False, cache_dir=None)
    return {module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules}


def test_the_graph_holds_imports_inside_functions_and_type_only_ones(every_import: dict[str, set[str]]) -> None:
    # Inside a function: common reads the model file only when a command asks for it.
    assert "counting.model.counting_model" in every_import["counting.cli.common"]
    # Type-only: common names the option groups in its signatures.
    assert "counting.cli.option_groups" in every_import["counting.cli.common"]


def test_no_import_cycle_counting_imports_inside_functions(every_import: dict[str, set[str]]) -> None:
    assert strongly_connected(every_import) == []
