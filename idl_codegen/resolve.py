"""Semantic resolution: syntax tree -> :class:`~idl_codegen.model.Schema`.

One pass in declaration order, as IDL requires names to be declared before use:
scopes and name lookup (:mod:`idl_codegen.scope`), typedefs, constant expressions
(:mod:`idl_codegen.consts`), annotations (:mod:`idl_codegen.annotate`), inheritance,
keys (``@key`` and ``#pragma keylist``), union labels, enumerator values. A struct or
union may refer to itself, or to one only declared forward, inside a sequence only.
Errors are reported and resolution goes on with what is left.

The resolver comes in layers: ``idl_codegen.resolve_names`` holds its state, declares
names and resolves type references; ``idl_codegen.resolve_members`` resolves structs
and unions; here, the walk over the definitions, and modules, enums, typedefs,
constants and ``#pragma keylist``.
"""

from __future__ import annotations

import dataclasses

from idl_codegen.consts import describe_type
from idl_codegen.diagnostics import Diagnostics
from idl_codegen.graph import components
from idl_codegen.model import (
    Constant,
    EnumType,
    PrimitiveType,
    Schema,
    StringType,
    StructType,
    TypedefType,
    Value,
)
from idl_codegen.resolve_keys import check_keys
from idl_codegen.resolve_members import MemberResolver
from idl_codegen.scope import NameCaseError, Scope
from idl_codegen.syntax import (
    ConstDef,
    Definition,
    EnumDef,
    ModuleDef,
    Pragma,
    ScopedName,
    Specification,
    StructDef,
    TypedefDef,
    UnionDef,
)

__all__ = ["resolve"]


def resolve(spec: Specification, diagnostics: Diagnostics) -> Schema:
    """Resolve ``spec``; errors and warnings go to ``diagnostics``."""
    return _Resolver(diagnostics).run(spec)


class _Resolver(MemberResolver):
    def run(self, spec: Specification) -> Schema:
        self._definitions(spec.definitions, self._root)
        check_keys(self.schema, self._member_locations, self._diag)
        for name, where in self._forward.items():
            symbol = self._symbols[name]
            self._diag.error(where, f"{symbol.kind} '{name}' is declared but never defined")
        if not self._diag.has_errors:
            self._warn_recursive()
        return self.schema

    def _warn_recursive(self) -> None:
        for component in components(self.schema):
            first = component[0]
            if len(component) > 1 or first in self.schema.dependencies(first):
                self._diag.warn(self._symbols[first].location,
                                f"'{first}' is recursive: Cyclone DDS rejects recursive types in "
                                "topics (the Python types and JSON still work)")

    # -- definitions -------------------------------------------------------------------

    def _definitions(self, definitions: list[Definition], scope: Scope) -> None:
        for definition in definitions:
            if isinstance(definition, ModuleDef):
                self._module(definition, scope)
            elif isinstance(definition, StructDef):
                self._struct(definition, scope)
            elif isinstance(definition, UnionDef):
                self._union(definition, scope)
            elif isinstance(definition, EnumDef):
                self._enum(definition, scope)
            elif isinstance(definition, TypedefDef):
                self._typedef(definition, scope)
            elif isinstance(definition, ConstDef):
                self._const(definition, scope)
            else:
                self._pragma(definition, scope)

    def _module(self, module: ModuleDef, scope: Scope) -> None:
        self._annotations.applied(module.annotations, "module")
        symbol = self._declare(scope, module.name, "module", module.location)
        if symbol is None:
            return
        if symbol.scope is None:
            symbol.scope = Scope(symbol.qualified, scope)
            symbol.scope.add(symbol)  # a module's name is declared in it too
            self.schema.modules.append(symbol.qualified)
        self._definitions(module.definitions, symbol.scope)

    # -- enum, typedef, const, pragma --------------------------------------------------

    def _enum(self, enum: EnumDef, scope: Scope) -> None:
        self._annotations.applied(enum.annotations, "enum")
        symbol = self._declare(scope, enum.name, "enum", enum.location)
        if symbol is None:
            return
        name = symbol.qualified
        symbol.scope = Scope(name, scope)
        literals: list[tuple[str, int]] = []
        values: dict[int, str] = {}
        default: str | None = None
        next_value = 0
        for enumerator in enum.enumerators:
            applied = self._annotations.applied(enumerator.annotations, "enumerator")
            value = next_value
            value_annotation = applied.get("value")
            if value_annotation is not None:
                param = self._annotations.single_param(value_annotation)
                evaluated = self._consts.evaluate(param, PrimitiveType("int32"), scope, "value") \
                    if param is not None else None
                if isinstance(evaluated, int):
                    value = evaluated
            if value < 0:
                self._diag.error(enumerator.location, f"enumerator '{enumerator.name}' has the "
                                 f"negative value {value}, which cyclonedds-python cannot encode")
            if value in values:
                self._diag.error(enumerator.location, f"enumerator '{enumerator.name}' has the "
                                 f"value {value} of '{values[value]}'")
            values[value] = enumerator.name
            next_value = value + 1
            literal = self._declare(scope, enumerator.name, "enumerator", enumerator.location)
            if literal is not None:
                literal.value = enumerator.name
                literal.enum = name
                symbol.scope.add(literal)
            if "default_literal" in applied:
                default = enumerator.name
            literals.append((enumerator.name, value))
        if literals:
            self.schema.types[name] = EnumType(name, tuple(literals), default or literals[0][0])

    def _typedef(self, typedef: TypedefDef, scope: Scope) -> None:
        self._annotations.applied(typedef.annotations, "typedef")
        for declarator in typedef.declarators:
            ref = self._declared_type(typedef.type_spec, declarator, scope)
            symbol = self._declare(scope, declarator.name, "typedef", declarator.location)
            if symbol is None or ref is None:
                continue
            self.schema.types[symbol.qualified] = TypedefType(symbol.qualified, ref)

    def _const(self, const: ConstDef, scope: Scope) -> None:
        self._annotations.applied(const.annotations, "const")
        ref = self._type(const.type_spec, scope)
        value: Value | None = None
        if ref is not None:
            resolved = self.schema.resolve(ref)
            if isinstance(resolved, PrimitiveType | StringType | EnumType):
                value = self._consts.evaluate(const.value, ref, scope)
            else:
                self._diag.error(const.type_spec.location,
                                 f"a constant cannot have type {describe_type(resolved)}")
        symbol = self._declare(scope, const.name, "const", const.location)
        if symbol is None or ref is None or value is None:
            return
        symbol.value = value
        resolved = self.schema.resolve(ref)
        if isinstance(resolved, EnumType):
            self._const_enums[symbol.qualified] = resolved.name
        self.schema.constants[symbol.qualified] = Constant(symbol.qualified, ref, value)

    def _pragma(self, pragma: Pragma, scope: Scope) -> None:
        if not pragma.words or pragma.words[0] != "keylist":
            word = pragma.words[0] if pragma.words else ""
            self._diag.warn(pragma.location, f"#pragma {word} ignored".replace("  ", " "))
            return
        if len(pragma.words) < 2:
            self._diag.error(pragma.location, "expected a type name after #pragma keylist")
            return
        type_name = pragma.words[1]
        parts = tuple(type_name.lstrip(":").split("::"))
        try:
            symbol = scope.lookup(ScopedName(parts, type_name.startswith("::"), pragma.location))
        except NameCaseError as error:
            self._diag.error(pragma.location, error.message)
            return
        struct = self.schema.types.get(symbol.qualified) if symbol else None
        if not isinstance(struct, StructType):
            self._diag.error(pragma.location, f"#pragma keylist names '{type_name}', which is "
                                              "not a defined struct")
            return
        member_names = [member.name for member in self.schema.all_members(struct)]
        keys: list[str] = []
        for key in pragma.words[2:]:
            if "." in key:
                self._diag.error(pragma.location, f"nested key '{key}' in #pragma keylist is "
                                                  "not supported")
            elif key not in member_names:
                self._diag.error(pragma.location, f"#pragma keylist: '{key}' is not a member of "
                                                  f"struct '{struct.name}'")
            else:
                keys.append(key)
        if any(member.key for member in struct.members):
            self._diag.error(pragma.location, f"struct '{struct.name}' has both @key members "
                                              "and a #pragma keylist")
            return
        for member in self.schema.all_members(struct):
            if member.name in keys and member.optional:
                self._diag.error(pragma.location, f"key member '{member.name}' cannot be "
                                                  "@optional")
        self.schema.types[struct.name] = dataclasses.replace(struct, keylist=tuple(keys))
