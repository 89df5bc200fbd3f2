"""Strongly connected components of the type graph (Tarjan), in a stable order.

Types that refer to each other (through sequences, after forward declarations) form
one component; the Python emitter puts each component in one file, so that imports
between files never form a cycle.
"""

from __future__ import annotations

from idl_codegen.model import Schema

__all__ = ["components"]


def components(schema: Schema) -> list[list[str]]:
    """The components of ``schema.types``; each lists its types in declaration order, and
    components are ordered by their first type's declaration."""
    order = {name: index for index, name in enumerate(schema.types)}
    index_of: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0

    for root in schema.types:
        if root in index_of:
            continue
        # iterative Tarjan: (node, iterator over its successors)
        work = [(root, iter(sorted(set(schema.dependencies(root)), key=order.__getitem__)))]
        index_of[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in schema.types:
                    continue
                if successor not in index_of:
                    index_of[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    deps = sorted(set(schema.dependencies(successor)), key=order.__getitem__)
                    work.append((successor, iter(deps)))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index_of[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index_of[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component, key=order.__getitem__))
    found.sort(key=lambda component: order[component[0]])
    return found
