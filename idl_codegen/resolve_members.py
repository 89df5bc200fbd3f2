"""Resolving structs and unions: their members, member ids, keys, defaults and labels.

``MemberResolver`` adds to ``NameResolver`` (``idl_codegen.resolve_names``) what a
struct or union definition needs: its base struct and extensibility, each member's
type, ``@optional``, ``@key``, ``@id`` (with ``@autoid``) and ``@default``, member
names that collide (inherited ones included), and a union's discriminator type and case
labels (no label twice, one default case with a value left for it).
"""

from __future__ import annotations

from idl_codegen.consts import describe_type
from idl_codegen.diagnostics import Location
from idl_codegen.model import (
    INTEGER_KINDS,
    UNION_DISCRIMINATOR_MEMBER,
    EnumType,
    Member,
    NamedType,
    PrimitiveType,
    StructType,
    TypeRef,
    UnionCase,
    UnionType,
    Value,
)
from idl_codegen.resolve_names import NameResolver
from idl_codegen.scope import NameCaseError, Scope, Symbol
from idl_codegen.syntax import (
    Annotation,
    StructDef,
    UnionDef,
)

__all__ = ["MemberResolver"]

_EXTENSIBILITIES = ("final", "appendable", "mutable")


class MemberResolver(NameResolver):
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
            if member == "discriminator":
                self._diag.error(case.declarator.location, UNION_DISCRIMINATOR_MEMBER)
                continue
            if ref is None or not self._require_complete(ref, case.declarator.location):
                continue
            id_annotation = applied.get("id")
            member_id = self._id(id_annotation, scope) if id_annotation is not None else None
            cases.append(UnionCase(member, ref, tuple(labels), is_default, member_id))
        if default_case is not None and all(label is None for case in union.cases
                                                for label in case.labels):
            self._diag.error(union.location, f"union '{name}' has only a default case, which "
                                              "cyclonedds-python cannot serialize; give it a "
                                              "case label")
        elif default_case is not None:
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
