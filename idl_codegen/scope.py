"""IDL scopes and name lookup (OMG IDL 4.2, 7.5 "Names and scoping").

A name is looked up in the scope where it is used, then in each enclosing scope
outwards; ``a::b::c`` looks up ``a`` that way and then descends. ``::a::b`` starts at
the global scope. A reopened module shares one scope. Enumerators live in the scope
that encloses their enum and can also be reached as ``Enum::LITERAL``. A struct's or
union's members live in a scope of their own, which encloses the lookups of member types,
array dimensions and case labels.

Identifiers that differ only in case collide (IDL 4.2, 7.2.3), as Cyclone's ``idlc``
enforces:

- a module, struct or union's own name is declared in its scope, so ``module m { struct
  M ...`` and ``struct P { long p; }`` collide;
- lookup ignores case, and a name that finds a declaration spelled differently is an
  error (:class:`NameCaseError`), also when an outer scope has the exact spelling;
- a name found in an enclosing scope is *introduced* into the scope that used it (7.5.3)
  when it names a module, struct or union (for ``n::T``: ``n``, when ``T`` is one), the
  declarations that open a scope in ``idlc``; in a module it then collides with a later
  declaration differing in case, and it is found before the members of a struct or union
  (``Point point; Point other;``). A typedef, enum, forward-only struct or constant is
  not introduced, so a member named like one hides it from the members after it
  (``typedef long A; struct S { A a; A other; };`` is refused);
- modules differing only in case are distinct modules, as in ``idlc``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from idl_codegen.diagnostics import Location
from idl_codegen.model import Value
from idl_codegen.syntax import ScopedName

__all__ = ["NameCaseError", "Scope", "Symbol"]

# The kinds of declaration that open a scope in ``idlc``: only a name resolving to one of
# these is introduced into the scope using it (scope.c ``idl_resolve``).
_SCOPED = frozenset(("module", "struct", "union"))


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


class NameCaseError(Exception):
    """A name matched a declaration only when case is ignored."""

    def __init__(self, written: str, declared: Symbol, used: Location | None = None) -> None:
        self.written = written
        self.declared = declared
        self.used = used
        super().__init__(self.message)

    @property
    def message(self) -> str:
        declared = self.declared
        where = f"used at {self.used}" if self.used else f"declared at {declared.location}"
        return (f"'{self.written}' differs in case from {declared.kind} '{declared.name}' "
                f"{where} (IDL names must be written as declared)")


@dataclass(slots=True)
class Scope:
    """``uses``: names this scope found in an enclosing scope, with where they were used."""

    qualified: str
    parent: Scope | None = None
    symbols: dict[str, Symbol] = field(default_factory=dict)
    folded: dict[str, Symbol] = field(default_factory=dict)
    uses: dict[str, tuple[Symbol, Location]] = field(default_factory=dict)

    def qualify(self, name: str) -> str:
        return f"{self.qualified}::{name}" if self.qualified else name

    def clash(self, name: str) -> Symbol | None:
        """The symbol that ``name`` would collide with in this scope (case-insensitive)."""
        return self.folded.get(name.lower())

    def used(self, name: str) -> tuple[str, Symbol, Location] | None:
        """(spelling, symbol, location) of a use that ``name`` would collide with."""
        for written, (symbol, where) in self.uses.items():
            if written.lower() == name.lower():
                return written, symbol, where
        return None

    def add(self, symbol: Symbol) -> None:
        self.symbols[symbol.name] = symbol
        self.folded.setdefault(symbol.name.lower(), symbol)

    def root(self) -> Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def lookup(self, name: ScopedName, introduce: bool = True) -> Symbol | None:
        """Resolve ``name`` as used in this scope, or None when it names nothing.

        ``introduce``: record a relative name found in an enclosing scope as used here
        (``idlc`` does for names of types, not for names in constant expressions).
        Raises :class:`NameCaseError` when a part of it matches only when case is ignored.
        """
        first, rest = name.parts[0], name.parts[1:]
        symbol: Symbol | None = None
        outer = False
        if name.absolute:
            symbol = self.root()._find(first)
        else:
            scope: Scope | None = self
            while scope is not None and symbol is None:
                symbol = scope._find(first, with_uses=True)
                outer = symbol is not None and scope is not self
                scope = scope.parent
        head = symbol
        for part in rest:
            if symbol is None or symbol.scope is None:
                return None
            symbol = symbol.scope._find(part)
        if introduce and outer and head is not None and symbol is not None \
                and symbol.kind in _SCOPED and symbol.complete:
            self.uses.setdefault(first, (head, name.location))
        return symbol

    def _find(self, name: str, with_uses: bool = False) -> Symbol | None:
        symbol = self.symbols.get(name)
        if symbol is not None:
            return symbol
        if with_uses and name in self.uses:
            return self.uses[name][0]
        folded = self.folded.get(name.lower())
        if folded is not None:
            raise NameCaseError(name, folded)
        if with_uses:
            use = self.used(name)
            if use is not None:
                raise NameCaseError(name, use[1], use[2])
        return None
