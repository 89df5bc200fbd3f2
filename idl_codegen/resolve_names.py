"""The resolver's state, declaring names in scopes, and resolving type references.

``NameResolver`` is the base of the resolver (``idl_codegen.resolve``): the schema being
built, the scopes and symbols, the forward declarations, and the readers of annotations
and constant expressions it shares with its subclasses. It declares names (IDL's rules:
no redeclaration in a scope, names that differ only in case collide, a name used in a
scope cannot be declared in it again, a forward declaration and its definition) and
turns a type specification into a ``TypeRef`` (base types, bounded strings and
sequences, arrays, named types; a struct or union used by value must be complete).
"""

from __future__ import annotations

from idl_codegen.annotate import AnnotationReader
from idl_codegen.consts import ConstEvaluator
from idl_codegen.diagnostics import Diagnostics, Location
from idl_codegen.model import (
    ArrayType,
    NamedType,
    PrimitiveType,
    Schema,
    SequenceType,
    StringType,
    TypedefType,
    TypeRef,
    Value,
    zero_value,
)
from idl_codegen.scope import NameCaseError, Scope, Symbol
from idl_codegen.syntax import (
    BaseTypeSpec,
    Declarator,
    NamedSpec,
    SequenceSpec,
    StringSpec,
    TypeSpec,
)

__all__ = ["NameResolver"]

_BASE_TYPES = {
    "short": "int16", "unsigned short": "uint16", "long": "int32", "unsigned long": "uint32",
    "long long": "int64", "unsigned long long": "uint64", "float": "float32",
    "double": "float64", "char": "char", "wchar": "wchar", "boolean": "boolean",
    "octet": "octet", "int8": "int8", "uint8": "uint8", "int16": "int16", "uint16": "uint16",
    "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
}


class NameResolver:
    def __init__(self, diagnostics: Diagnostics) -> None:
        self._diag = diagnostics
        self.schema = Schema()
        self._root = Scope("")
        self._symbols: dict[str, Symbol] = {}
        self._const_enums: dict[str, str] = {}
        self._forward: dict[str, Location] = {}
        self._member_locations: dict[tuple[str, str], Location] = {}
        self._used_forward: set[str] = set()  # structs and unions used before being defined
        self._annotations = AnnotationReader(diagnostics)
        self._consts = ConstEvaluator(self.schema, diagnostics, self._const_enums.get)
        self._wstring_warned = False

    # -- declarations ------------------------------------------------------------------

    def _declare(self, scope: Scope, name: str, kind: str, where: Location,
                 complete: bool = True, forward: bool = False) -> Symbol | None:
        existing = scope.symbols.get(name) or scope.clash(name)
        if existing is not None and existing.scope is scope:
            self._diag.error(where, f"'{name}' collides with '{existing.name}' declared at "
                                    f"{existing.location}, the {existing.kind} it is declared in")
            return None
        if existing is not None and not (kind == "module" == existing.kind):
            same = existing.name == name and existing.kind == kind
            if same and kind in ("struct", "union") and (forward or not existing.complete):
                return existing  # a forward declaration, or the definition after one
            if existing.kind == kind in ("struct", "union") and (forward or not existing.complete):
                return self._respell(scope, existing, name, forward, where)
            if existing.name != name:
                self._diag.error(where, f"'{name}' collides with '{existing.name}' declared at "
                                        f"{existing.location} (IDL names must differ in more "
                                        "than case)")
            else:
                self._diag.error(where, f"redefinition of '{name}' (first declared at "
                                        f"{existing.location})")
            return None
        if existing is not None and existing.name == name:
            return existing  # a reopened module; modules differing in case are distinct
        use = scope.used(name)
        if use is not None:
            written, used, used_at = use
            self._diag.error(where, f"'{name}' collides with '{written}' used at {used_at} for "
                                    f"{used.kind} '{used.qualified}' (IDL 4: a name used in a "
                                    "scope cannot be declared in it again)")
            return None
        symbol = Symbol(kind, name, scope.qualify(name), where, complete)
        scope.add(symbol)
        self.schema.origins.setdefault(symbol.qualified, where.file)
        self._symbols[symbol.qualified] = symbol
        return symbol

    def _respell(self, scope: Scope, symbol: Symbol, name: str, forward: bool,
                 where: Location) -> Symbol | None:
        """A forward declaration and a definition differing in case declare one type, as
        in ``idlc``: the definition's spelling is its name."""
        if forward:
            return symbol
        if symbol.qualified in self._used_forward:  # idlc fails on these too
            self._diag.error(where, f"'{name}' defines {symbol.kind} '{symbol.name}' declared "
                                    f"forward at {symbol.location}, which is used under that "
                                    "spelling before; spell them alike")
            self._forward.pop(symbol.qualified, None)
            return None
        old = symbol.qualified
        del scope.symbols[symbol.name]
        symbol.name, symbol.qualified, symbol.location = name, scope.qualify(name), where
        scope.symbols[name] = symbol
        self._symbols[symbol.qualified] = self._symbols.pop(old)
        self.schema.origins[symbol.qualified] = self.schema.origins.pop(old)
        self._forward.pop(old, None)
        return symbol

    # -- types -------------------------------------------------------------------------

    def _type(self, spec: TypeSpec, scope: Scope) -> TypeRef | None:
        if isinstance(spec, BaseTypeSpec):
            if spec.name == "long double":
                self._diag.error(spec.location, "'long double' is not supported")
                return None
            return PrimitiveType(_BASE_TYPES[spec.name])
        if isinstance(spec, StringSpec):
            bound = None
            if spec.bound is not None:
                bound = self._consts.positive_integer(spec.bound, scope, "a string bound")
                if bound is None:
                    return None
            if spec.wide and not self._wstring_warned:
                self._wstring_warned = True
                self._diag.warn(spec.location, "wstring is mapped to a UTF-8 string: "
                                "cyclonedds-python has no wide strings")
            return StringType(bound, spec.wide)
        if isinstance(spec, SequenceSpec):
            element = self._type(spec.element, scope)
            bound = None
            if spec.bound is not None:
                bound = self._consts.positive_integer(spec.bound, scope, "a sequence bound")
                if bound is None:
                    return None
            if element is None:
                return None
            return SequenceType(element, bound)
        assert isinstance(spec, NamedSpec)
        try:
            symbol = scope.lookup(spec.name)
        except NameCaseError as error:
            self._diag.error(spec.location, error.message)
            return None
        if symbol is None:
            self._diag.error(spec.location, f"unknown type '{spec.name}'")
            return None
        if symbol.kind not in ("struct", "union", "enum", "typedef"):
            self._diag.error(spec.location, f"'{spec.name}' is a {symbol.kind}, not a type")
            return None
        if not symbol.complete:
            self._used_forward.add(symbol.qualified)
        return NamedType(symbol.qualified)

    def _declared_type(self, spec: TypeSpec, declarator: Declarator, scope: Scope
                       ) -> TypeRef | None:
        """The type of one declarator: ``spec``, made an array by ``[N]`` suffixes."""
        element = self._type(spec, scope)
        dims: list[int] = []
        for dim in declarator.dims:
            size = self._consts.positive_integer(dim, scope, "an array dimension")
            if size is None:
                return None
            dims.append(size)
        if element is None:
            return None
        return ArrayType(element, tuple(dims)) if dims else element

    def _require_complete(self, ref: TypeRef, where: Location) -> bool:
        """A struct or union used by value must be completely defined at this point."""
        if isinstance(ref, ArrayType):
            return self._require_complete(ref.element, where)
        if not isinstance(ref, NamedType):
            return True
        symbol = self._symbols[ref.name]
        if symbol.kind in ("struct", "union") and not symbol.complete:
            self._diag.error(where, f"{symbol.kind} '{ref.name}' is not completely defined "
                                    "here; only a sequence can refer to it")
            return False
        declared = self.schema.types.get(ref.name)
        if isinstance(declared, TypedefType):
            return self._require_complete(declared.type, where)
        return True

    def _zero(self, ref: TypeRef) -> Value | None:
        return zero_value(self.schema.resolve(ref))
