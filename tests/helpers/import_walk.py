"""Reading ``broker_core``'s imports from the source: which run, and where they lead.

An import runs when it is at module level or inside a function (``if TYPE_CHECKING:``
blocks never run); importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``.
Used by the purity test of ``broker_core.mqtt`` and the import-cycle test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import broker_core

__all__ = ["ROOT", "closure", "module_graph", "module_path", "runtime_imports", "with_parents"]

ROOT = Path(broker_core.__file__).parent


def module_path(module: str) -> Path | None:
    """The file of a ``broker_core`` module or package, or None when it is not one."""
    parts = module.split(".")
    if parts[0] != "broker_core":
        return None
    base = ROOT.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def runtime_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import that runs: not those under ``if TYPE_CHECKING:``."""
    found: list[tuple[int, str]] = []
    stack: list[ast.AST] = [ast.parse(path.read_text(), str(path))]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # ``from broker_core.mqtt import wire`` imports the submodule too.
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        stack.extend(ast.iter_child_nodes(node))
    return found


def with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def closure(start: list[str]) -> dict[str, list[str]]:
    """Every broker_core module reachable from ``start``, with the chain that reaches it."""
    chains: dict[str, list[str]] = {}
    todo = [(module, [module]) for name in start for module in with_parents(name)]
    while todo:
        module, chain = todo.pop()
        if module in chains or module_path(module) is None:
            continue
        chains[module] = chain
        path = module_path(module)
        assert path is not None
        for _, imported in runtime_imports(path):
            for target in with_parents(imported):
                if target not in chains and module_path(target) is not None:
                    todo.append((target, [*chain, target]))
    return chains


def module_graph() -> dict[str, set[str]]:
    """Every ``broker_core`` module -> the ``broker_core`` modules its running imports name."""
    graph: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        graph[module] = {
            imported
            for _, name in runtime_imports(path)
            for imported in (name,)
            if module_path(imported) is not None and imported != module
        }
    return graph
