"""broker_core/mqtt is sans-I/O: what it imports, transitively, reads no clock and does no I/O.

Every module of ``broker_core.mqtt`` is followed through the ``broker_core`` modules it
imports (at module level or inside functions: both run; ``if TYPE_CHECKING:`` blocks do
not), the packages above them included (importing ``a.b.c`` runs ``a/__init__`` and
``a/b/__init__``). None of them may import a module of ``FORBIDDEN``.
"""

from __future__ import annotations

import ast

from tests.helpers.import_walk import ROOT, closure, module_path, runtime_imports

FORBIDDEN = {
    "asyncio",
    "datetime",
    "logging",  # takes locks, reads the clock
    "select",
    "selectors",
    "socket",
    "sqlite3",
    "ssl",
    "subprocess",
    "threading",
    "time",
}
LAYERS_ABOVE = {"gateway", "adapters", "bridge", "spark_sink", "idl_codegen"}


def mqtt_modules() -> list[str]:
    return sorted(f"broker_core.mqtt.{path.stem}" for path in (ROOT / "mqtt").glob("*.py"))


def offenders(start: list[str]) -> list[str]:
    """Imports of ``FORBIDDEN`` modules reachable from ``start``, with their chains."""
    found = []
    for module, chain in sorted(closure(start).items()):
        path = module_path(module)
        assert path is not None
        for line, imported in runtime_imports(path):
            if imported.split(".")[0] in FORBIDDEN:
                found.append(f"{' -> '.join(chain)}:{line} imports {imported}")
    return found


def test_mqtt_imports_no_io_or_clock_transitively() -> None:
    assert offenders(mqtt_modules()) == []


def test_the_walk_follows_imports_through_other_modules() -> None:
    reached = closure(["broker_core.mqtt.session"])
    assert "broker_core.mqtt.codec" in reached  # imported by session
    assert "broker_core.errors" in reached  # imported by codec, outside mqtt/
    assert "broker_core" in reached  # the package above runs first
    assert "broker_core.context" not in reached  # under TYPE_CHECKING only
    # A clock two steps away is found: context -> clock, which imports time.
    assert any(
        line.startswith("broker_core.context -> broker_core.clock:") and "time" in line
        for line in offenders(["broker_core.context"])
    )


def test_broker_core_imports_nothing_from_the_layers_above() -> None:
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] in LAYERS_ABOVE:
                    offenders.append(f"{path}:{node.lineno} {node.module}")
            elif isinstance(node, ast.Import):
                offenders += [
                    f"{path}:{node.lineno} {alias.name}"
                    for alias in node.names
                    if alias.name.split(".")[0] in LAYERS_ABOVE
                ]
    assert offenders == []
