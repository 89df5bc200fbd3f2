"""No two modules of broker_core import each other, directly or through others.

Counted: every import that runs, at module level or inside a function (a function-level
import hides a cycle, it does not break it); not those under ``if TYPE_CHECKING:``,
which only name types. ``listeners.connection`` knows the broker only as a ``Server``
protocol: it imports no broker module at all.
"""

from __future__ import annotations

from tests.helpers.import_walk import module_graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), or a module
    importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_broker_core_modules() -> None:
    assert cycles(module_graph()) == []


def test_the_connection_does_not_import_the_broker() -> None:
    graph = module_graph()
    assert "broker_core.listeners.connection" not in graph["broker_core.broker"]
    reached = set()
    todo = ["broker_core.listeners.connection"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += graph.get(module, ())
    assert "broker_core.broker" not in reached
    assert "broker_core.listeners.tls" not in reached


def test_the_checker_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"], ["e"]]
