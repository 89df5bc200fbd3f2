"""The dependency direction between top-level packages, read from the source.

``adapters``, ``bridge``, ``spark_sink`` -> ``gateway`` -> ``broker_core``; ``idl_codegen``
stands alone. Module-level imports only: imports inside functions and under
``if TYPE_CHECKING:`` do not run at import time (the registry loads components that
way, by import path).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("broker_core", "gateway", "adapters", "bridge", "idl_codegen", "spark_sink")


def _module_level_imports(tree: ast.Module) -> list[str]:
    found: list[str] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        stack.extend(ast.iter_child_nodes(node))
    return found


def package_graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {package: set() for package in PACKAGES}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for module in _module_level_imports(tree):
                head = module.split(".")[0]
                if head in edges and head != package:
                    edges[package].add(head)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    cycles = []

    def walk(path: list[str]) -> None:
        for target in sorted(edges[path[-1]]):
            if target == path[0]:
                cycles.append([*path, target])
            elif target not in path:
                walk([*path, target])

    for start in PACKAGES:
        walk([start])
    return cycles


def test_broker_core_imports_no_other_package() -> None:
    assert package_graph()["broker_core"] == set()


def test_no_cycle_between_top_level_packages() -> None:
    assert _cycles(package_graph()) == []


def test_the_direction_is_components_to_gateway_to_broker_core() -> None:
    edges = package_graph()
    assert edges["gateway"] <= {"broker_core"}
    for component_package in ("adapters", "bridge", "spark_sink"):
        assert edges[component_package] <= {"gateway", "broker_core", "idl_codegen"}
    assert edges["idl_codegen"] <= {"broker_core"}


def test_the_checker_sees_a_cycle() -> None:
    assert _cycles(
        {"broker_core": set(), "gateway": {"adapters"}, "adapters": {"gateway"}}
        | {p: set() for p in PACKAGES[3:]}
    ) == [["gateway", "adapters", "gateway"], ["adapters", "gateway", "adapters"]]
