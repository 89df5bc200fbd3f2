"""Names of a package imported on first use (PEP 562), so that importing the package
costs nothing: ``gateway.config`` (the schema and pydantic) and ``gateway.rules`` (the
parser and compiler) use it; docs/performance.md, "Start-up memory"."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: dict[str, Any], homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the package whose ``globals()`` is ``package``:
    ``homes`` maps each name to the module it is imported from, on first access (then
    kept in the package's namespace)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package['__name__']!r} has no attribute {name!r}")
        value = getattr(import_module(home), name)
        package[name] = value
        return value

    return __getattr__
