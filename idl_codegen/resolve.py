"""Semantic resolution: syntax tree -> :class:`~idl_codegen.model.Schema`.

One pass in declaration order, as IDL requires names to be declared before use:
scopes and name lookup (:mod:`idl_codegen.scope`), typedefs, constant expressions
(:mod:`idl_codegen.consts`), annotations (:mod:`idl_codegen.annotate`), inheritance,
keys (``@key`` and ``#pragma keylist``), union labels, enumerator values. A struct or
union may refer to itself, or to one only declared forward, inside a sequence only.
Errors are reported and resolution goes on with what is left.
"""

from __future__ import annotations

import dataclasses

from idl_codegen.annotate import AnnotationReader
from idl_codegen.consts import ConstEvaluator, describe_type
from idl_codegen.diagnostics import Diagnostics, Location
from idl_codegen.graph import components
from idl_codegen.model import (
    INTEGER_KINDS,
    ArrayType,
    Constant,
    EnumType,
    Member,
    NamedType,
    PrimitiveType,
    Schema,
    SequenceType,
    StringType,
    StructType,
    TypedefType,
    TypeRef,
    UnionCase,
    UnionType,
    Value,
    zero_value,
)
from idl_codegen.scope import NameCaseError, Scope, Symbol
from idl_codegen.syntax import (
    Annotation,
    BaseTypeSpec,
    ConstDef,
    Declarator,
    Definition,
    EnumDef,
    ModuleDef,
    NamedSpec,
    Pragma,
    ScopedName,
    SequenceSpec,
    Specification,
    StringSpec,
    StructDef,
    TypedefDef,
    TypeSpec,
    UnionDef,
)

__all__ = ["resolve"]

_BASE_TYPES = {
    "short": "int16", "unsigned short": "uint16", "long": "int32", "unsigned long": "uint32",
    "long long": "int64", "unsigned long long": "uint64", "float": "float32",
    "double": "float64", "char": "char", "wchar": "wchar", "boolean": "boolean",
    "octet": "octet", "int8": "int8", "uint8": "uint8", "int16": "int16", "uint16": "uint16",
    "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
}
_EXTENSIBILITIES = ("final", "appendable", "mutable")


def resolve(spec: Specification, diagnostics: Diagnostics) -> Schema:
    """Resolve ``spec``; errors and warnings go to ``diagnostics``."""
    return _Resolver(diagnostics).run(spec)


class _Resolver:
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

    def run(self, spec: Specification) -> Schema:
        self._definitions(spec.definitions, self._root)
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

    # -- struct ------------------------------------------------------------------------

    def _struct(self, struct: StructDef, scope: Scope) -> None:
        applied = self._annotations.applied(struct.annotations, "struct")
        forward = struct.members is None
        symbol = self._declare(scope, struct.name, "struct", struct.location, complete=False,
                               forward=forward)
        if symbol is None:
            return
        if forward:
            if not symbol.complete:
                self._forward.setdefault(symbol.qualified, struct.location)
            return
        self._forward.pop(symbol.qualified, None)
        name = symbol.qualified
        self.schema.origins[name] = struct.location.file
        base: StructType | None = None
        if struct.base is not None:
            base = self._base(struct, scope)
        inherited = self.schema.all_members(base) if base else []
        extensibility = self._extensibility(applied.by_name, base.extensibility if base else None,
                                            struct.location, f"struct '{name}'")
        autoid = "sequential"
        autoid_annotation = applied.get("autoid")
        if autoid_annotation is not None:
            autoid = self._annotations.word(autoid_annotation, ("sequential", "hash")) \
                or "sequential"
        members = self._members(struct, self._member_scope(symbol, scope), name, inherited,
                                autoid)
        self.schema.types[name] = StructType(
            name=name,
            members=tuple(members),
            base=base.name if base else None,
            extensibility=extensibility,
            nested=self._annotations.flag(applied.get("nested")),
            autoid=autoid,
        )
        symbol.complete = True

    def _base(self, struct: StructDef, scope: Scope) -> StructType | None:
        assert struct.base is not None
        try:
            symbol = scope.lookup(struct.base)
        except NameCaseError as error:
            self._diag.error(struct.base.location, error.message)
            return None
        declared = self.schema.types.get(symbol.qualified) if symbol else None
        resolved = self.schema.resolve(NamedType(declared.name)) if declared else None
        if symbol is None:
            self._diag.error(struct.base.location, f"unknown type '{struct.base}'")
        elif isinstance(resolved, StructType):
            return resolved
        elif symbol.kind == "struct" and not symbol.complete:
            self._diag.error(struct.base.location,
                             f"base struct '{struct.base}' is not completely defined here")
        else:
            self._diag.error(struct.base.location,
                             f"the base of struct '{scope.qualify(struct.name)}' must be a "
                             f"struct, '{struct.base}' is a {symbol.kind}")
        return None

    def _extensibility(self, applied: dict[str, Annotation], inherited: str | None,
                       where: Location, what: str) -> str:
        chosen: str | None = None
        for word in _EXTENSIBILITIES:
            if word in applied:
                chosen = word
        annotation = applied.get("extensibility")
        if annotation is not None:
            chosen = self._annotations.word(annotation, _EXTENSIBILITIES) or chosen
        if inherited is not None and chosen is not None and chosen != inherited:
            self._diag.error(where, f"{what} is {chosen} but its base is {inherited}; "
                                    "they must match")
        return chosen or inherited or "final"

    def _member_scope(self, symbol: Symbol, scope: Scope) -> Scope:
        """The scope of a struct's or union's members, where its own name is declared too."""
        inner = Scope(symbol.qualified, scope)
        inner.add(symbol)
        return inner

    def _member_clash(self, scope: Scope, name: str, where: Location, kind: str,
                      owner: str) -> bool:
        """Report ``name`` when it collides with the type's own name or an earlier member
        (inherited ones included); else declare it in ``scope``."""
        def own(symbol: Symbol) -> bool:
            return symbol.qualified == scope.qualify(symbol.name)

        lowered = name.lower()
        clashes = [symbol for symbol in scope.symbols.values()
                   if symbol.name.lower() == lowered
                   # idlc compares with inherited members exactly
                   and (symbol.kind != "member" or own(symbol) or symbol.name == name)]
        if not clashes:
            scope.add(Symbol("member", name, scope.qualify(name), where))
            return False
        existing = next((symbol for symbol in clashes if symbol.kind != "member"), clashes[0])
        if existing.kind != "member":
            self._diag.error(where, f"'{name}' collides with '{existing.name}' declared at "
                                    f"{existing.location}, the {existing.kind} it is declared in")
            return True
        whose = f"of {kind} '{owner}'" if own(existing) \
            else f"inherited from '{existing.qualified.rpartition('::')[0]}'"
        self._diag.error(where, f"'{name}' collides with member '{existing.name}' {whose} "
                                f"declared at {existing.location}")
        return True

    def _members(self, struct: StructDef, scope: Scope, name: str, inherited: list[Member],
                 autoid: str) -> list[Member]:
        assert struct.members is not None
        owners = self._owners(inherited)
        for member in inherited:
            owner = owners[member.name]
            scope.add(Symbol("member", member.name, f"{owner}::{member.name}",
                             self._member_locations[owner, member.name]))
        ids: dict[int, str] = {}
        next_id = 0
        members: list[Member] = []
        for syntax in struct.members:
            applied = self._annotations.applied(syntax.annotations, "member")
            optional = self._annotations.flag(applied.get("optional"))
            key = self._annotations.flag(applied.get("key"))
            for declarator in syntax.declarators:
                ref = self._declared_type(syntax.type_spec, declarator, scope)
                if self._member_clash(scope, declarator.name, declarator.location, "struct",
                                      name):
                    continue
                self._member_locations[name, declarator.name] = declarator.location
                if ref is None or not self._require_complete(ref, declarator.location):
                    continue
                if key and optional:
                    self._diag.error(declarator.location,
                                     f"key member '{declarator.name}' cannot be @optional")
                member_id = None
                id_annotation = applied.get("id")
                if id_annotation is not None:
                    member_id = self._id(id_annotation, scope)
                effective = member_id if member_id is not None else next_id
                if autoid == "sequential":
                    if effective in ids:
                        self._diag.error(declarator.location, f"member id {effective} of "
                                         f"'{declarator.name}' is already used by "
                                         f"'{ids[effective]}'")
                    ids[effective] = declarator.name
                next_id = effective + 1
                members.append(Member(
                    name=declarator.name,
                    type=ref,
                    optional=optional,
                    key=key,
                    member_id=member_id,
                    default=self._default(applied.get("default"), ref, optional, scope),
                ))
        return members

    def _owners(self, inherited: list[Member]) -> dict[str, str]:
        """The struct that declares each inherited member."""
        owners: dict[str, str] = {}
        for declared in self.schema.types.values():
            if isinstance(declared, StructType):
                for member in declared.members:
                    if any(member is other for other in inherited):
                        owners[member.name] = declared.name
        return owners

    def _id(self, annotation: Annotation, scope: Scope) -> int | None:
        param = self._annotations.single_param(annotation)
        if param is None:
            self._diag.error(annotation.location, "@id needs a value")
            return None
        value = self._consts.evaluate(param, PrimitiveType("uint32"), scope, "id")
        if isinstance(value, int) and value > 0x0FFF_FFFF:
            self._diag.error(param.location, f"member id {value} is larger than 0x0FFFFFFF")
            return None
        return value if isinstance(value, int) else None

    def _default(self, annotation: Annotation | None, ref: TypeRef, optional: bool,
                 scope: Scope) -> Value | None:
        if optional:
            if annotation is not None:
                self._diag.error(annotation.location, "an @optional member cannot have @default")
            return None
        zero = self._zero(ref)
        if annotation is None:
            return zero
        if zero is None:
            self._diag.error(annotation.location, "@default applies to members of primitive "
                                                  "and string types only")
            return None
        resolved = self.schema.resolve(ref)
        if isinstance(resolved, EnumType):
            # idlc: "@default can only set primitive types" (its value may be no enumerator)
            self._diag.error(annotation.location, f"@default cannot be applied to a member of "
                             f"enum type '{resolved.name}' (Cyclone's idlc refuses it); mark "
                             f"the enum's default literal @default_literal instead")
            return zero
        param = self._annotations.single_param(annotation)
        if param is None:
            self._diag.error(annotation.location, "@default needs a value")
            return zero
        value = self._consts.evaluate(param, ref, scope, "default")
        return zero if value is None else value

    # -- union -------------------------------------------------------------------------

    def _union(self, union: UnionDef, scope: Scope) -> None:
        applied = self._annotations.applied(union.annotations, "union")
        forward = union.switch_type is None
        symbol = self._declare(scope, union.name, "union", union.location, complete=False,
                               forward=forward)
        if symbol is None:
            return
        if forward:
            if not symbol.complete:
                self._forward.setdefault(symbol.qualified, union.location)
            return
        self._forward.pop(symbol.qualified, None)
        name = symbol.qualified
        self.schema.origins[name] = union.location.file
        assert union.switch_type is not None
        switch = self._annotations.applied(union.switch_annotations, "discriminator")
        members = self._member_scope(symbol, scope)  # idlc introduces the discriminator's
        discriminator = self._type(union.switch_type, members)  # type name there
        if discriminator is None:
            return
        resolved = self.schema.resolve(discriminator)
        valid = isinstance(resolved, EnumType) or (
            isinstance(resolved, PrimitiveType)
            and (resolved.kind in INTEGER_KINDS or resolved.kind in ("char", "boolean")))
        if not valid:
            self._diag.error(union.switch_type.location,
                             f"{describe_type(resolved)} cannot be a union discriminator; use an "
                             "integer, boolean or enum type")
            return
        if isinstance(resolved, PrimitiveType) and resolved.kind == "char":
            self._diag.error(union.switch_type.location,
                             "char discriminators are not supported: cyclonedds-python cannot "
                             "build the XTypes type of a union over char")
            return
        if isinstance(resolved, PrimitiveType) and resolved.kind in ("int64", "uint64"):
            self._diag.error(union.switch_type.location,
                             "64-bit discriminators are not supported: Cyclone DDS 11 aborts the "
                             "process when it writes such a union")
            return
        extensibility = self._extensibility(applied.by_name, None, union.location,
                                            f"union '{name}'")
        if extensibility == "mutable":
            self._diag.error(union.location, "mutable unions are not supported by "
                                             "cyclonedds-python")
        cases = self._cases(union, members, name, discriminator, resolved)
        self.schema.types[name] = UnionType(
            name=name,
            discriminator=discriminator,
            cases=tuple(cases),
            extensibility=extensibility,
            nested=self._annotations.flag(applied.get("nested")),
            key_discriminator=self._annotations.flag(switch.get("key")),
        )
        symbol.complete = True

    def _cases(self, union: UnionDef, scope: Scope, name: str, discriminator: TypeRef,
               resolved: object) -> list[UnionCase]:
        labels_seen: dict[Value, str] = {}
        default_case: str | None = None
        cases: list[UnionCase] = []
        for case in union.cases:
            applied = self._annotations.applied(case.annotations, "union member")
            member = case.declarator.name
            labels: list[Value] = []
            is_default = False
            for label, where in zip(case.labels, case.label_locations, strict=False):
                if label is None:
                    if default_case is not None:
                        self._diag.error(where, f"union '{name}' has more than one default "
                                                f"case (first: '{default_case}')")
                    default_case = member
                    is_default = True
                    continue
                value = self._consts.evaluate(label, discriminator, scope)
                if value is None:
                    continue
                if value in labels_seen:
                    self._diag.error(where, f"case label {value!r} is already used by "
                                            f"'{labels_seen[value]}'")
                    continue
                labels_seen[value] = member
                labels.append(value)
            ref = self._declared_type(case.type_spec, case.declarator, scope)
            if self._member_clash(scope, member, case.declarator.location, "union", name):
                continue
            if ref is None or not self._require_complete(ref, case.declarator.location):
                continue
            id_annotation = applied.get("id")
            member_id = self._id(id_annotation, scope) if id_annotation is not None else None
            cases.append(UnionCase(member, ref, tuple(labels), is_default, member_id))
        if default_case is not None:
            self._check_default_room(union, name, resolved, set(labels_seen))
        elif isinstance(resolved, PrimitiveType) and resolved.kind == "boolean" \
                and {True, False} <= set(labels_seen):
            self._diag.error(union.location, f"union '{name}' has cases for both TRUE and FALSE, "
                                              "which cyclonedds-python cannot map; make one of "
                                              "them the default case")
        return cases

    def _check_default_room(self, union: UnionDef, name: str, resolved: object,
                            used: set[Value]) -> None:
        domain: set[Value] | None = None
        if isinstance(resolved, PrimitiveType) and resolved.kind == "boolean":
            domain = {True, False}
        elif isinstance(resolved, EnumType):
            domain = {literal for literal, _ in resolved.literals}
        if domain is not None and domain <= used:
            self._diag.error(union.location, f"union '{name}' has a default case but "
                                              "every discriminator value already has a case")

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
