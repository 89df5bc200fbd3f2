"""IDL scopes and name lookup (OMG IDL 4.2, 7.5 "Names and scoping").

A name is looked up in the scope where it is used, then in each enclosing scope
outwards; ``a::b::c`` looks up ``a`` that way and then descends. ``::a::b`` starts at
the global scope. A reopened module shares one scope. Enumerators live in the scope
that encloses their enum and can also be reached as ``Enum::LITERAL``. Identifiers
that differ only in case collide.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from idl_codegen.diagnostics import Location
from idl_codegen.model import Value
from idl_codegen.syntax import ScopedName

__all__ = ["Scope", "Symbol"]


@dataclass(slots=True)
class Symbol:
    """A declared name. ``kind``: module, struct, union, enum, typedef, const or enumerator.

    ``complete`` is False for a struct or union that is only forward-declared or still
    being defined. Constants and enumerators carry ``value`` (an enumerator's is its
    literal name) and, for enumerators, ``enum`` (the enum's qualified name).
    """

    kind: str
    name: str
    qualified: str
    location: Location
    complete: bool = True
    scope: Scope | None = None
    value: Value | None = None
    enum: str | None = None


@dataclass(slots=True)
class Scope:
    qualified: str
    parent: Scope | None = None
    symbols: dict[str, Symbol] = field(default_factory=dict)
    folded: dict[str, Symbol] = field(default_factory=dict)

    def qualify(self, name: str) -> str:
        return f"{self.qualified}::{name}" if self.qualified else name

    def clash(self, name: str) -> Symbol | None:
        """The symbol that ``name`` would collide with in this scope (case-insensitive)."""
        return self.folded.get(name.lower())

    def add(self, symbol: Symbol) -> None:
        self.symbols[symbol.name] = symbol
        self.folded[symbol.name.lower()] = symbol

    def root(self) -> Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def lookup(self, name: ScopedName) -> Symbol | None:
        """Resolve ``name`` as used in this scope, or None when it names nothing."""
        first, rest = name.parts[0], name.parts[1:]
        symbol: Symbol | None = None
        if name.absolute:
            symbol = self.root().symbols.get(first)
        else:
            scope: Scope | None = self
            while scope is not None and symbol is None:
                symbol = scope.symbols.get(first)
                scope = scope.parent
        for part in rest:
            if symbol is None or symbol.scope is None:
                return None
            symbol = symbol.scope.symbols.get(part)
        return symbol
