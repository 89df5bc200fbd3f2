"""The Python emitter's type files: one generated file of cyclonedds classes.

``TypeFileRenderer`` renders the file of one group of types that refer to each other
(``idl_codegen.emit_python`` plans the files and writes the packages): the imports of
the types it names from other files, under aliases that clash with nothing in it; each
type as an ``IdlStruct`` / ``IdlUnion`` / ``IdlEnum`` class with ``typing.Annotated``
field types; and every member's default, as a literal or a factory. A member named
like a builtin the class body uses hides it from the lines after it, so in such a class
those builtins are written ``_builtins.str``, ``_builtins.list``, ...
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from idl_codegen.model import (
    FLOAT_KINDS,
    ArrayType,
    Declared,
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
    UnionType,
    Value,
    union_default,
    zero_value,
)
from idl_codegen.naming import (
    ENUM_RESERVED,
    STRUCT_RESERVED,
    UNION_RESERVED,
    python_name,
)
from idl_codegen.provenance import provenance
from idl_codegen.pysource import (
    LINE,
    docstring_lines,
    import_blocks,
    noqa,
    noqa_long,
    python_literal,
    wrap,
)

if TYPE_CHECKING:
    from idl_codegen.emit_python import PythonEmitter

__all__ = ["CLASS_BUILTINS", "TypeFileRenderer", "python_value"]

_GENERATOR_NAMES = frozenset({"_abc", "_annotate", "_builtins", "_dataclass", "_field", "_idl",
                              "_types", "_typing"})
# builtins the generated class bodies name (annotations, defaults, the outermost iterable
# of a comprehension): a member of the same name would hide them from the lines after it
CLASS_BUILTINS = frozenset({"bool", "bytes", "float", "int", "list", "range", "str"})


def python_value(value: Value, resolved: object) -> Value:
    """A model value as the Python value cyclonedds uses (``wchar`` is an int)."""
    if isinstance(resolved, PrimitiveType) and resolved.kind == "wchar" and isinstance(value, str):
        return ord(value)
    return value


@dataclass(slots=True)
class TypeFileRenderer:
    """The file ``module``, holding the classes of the types ``component`` (a group that
    refers to each other, in declaration order)."""

    emitter: PythonEmitter
    module: str
    component: list[str]
    imports: dict[str, str] = field(default_factory=dict)
    defined: set[str] = field(default_factory=set)
    reserved: set[str] = field(default_factory=set)
    needs: set[str] = field(default_factory=set)
    used: set[str] = field(default_factory=set)
    shadowed: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        schema = self.emitter.schema
        local = {self.emitter.placement[name].name for name in self.component}
        external: list[str] = []
        for name in self.component:
            needed = list(schema.dependencies(name))
            declared = schema.types[name]
            if isinstance(declared, StructType):
                for member in declared.members:
                    needed += _annotation_needs(schema, member.type)
                    if not member.optional:
                        needed += _default_needs(schema, member.type)
                for member in _refactored_inherited(schema, declared):
                    needed += _annotation_needs(schema, member.type)
                    needed += _default_needs(schema, member.type)
            elif isinstance(declared, UnionType):
                needed += _annotation_needs(schema, schema.resolve_named(declared.discriminator))
                for case in declared.cases:
                    needed += _annotation_needs(schema, case.type)
            for dependency in needed:
                if dependency not in self.component and dependency not in external:
                    external.append(dependency)
        taken = set(local)
        for dependency in external:
            simple = self.emitter.placement[dependency].name
            alias = simple if simple not in taken else "_" + dependency.replace("::", "_")
            taken.add(alias)
            self.imports[dependency] = alias
        self.reserved = taken | _GENERATOR_NAMES

    # -- references --------------------------------------------------------------------

    def builtin(self, name: str) -> str:
        """How the class being rendered names builtin ``name``."""
        if name not in self.shadowed:
            return name
        self.needs.add("_builtins")
        return f"_builtins.{name}"

    def _shadowing(self, py_names: Iterable[str]) -> None:
        """Start a class whose members have these Python names."""
        self.shadowed = CLASS_BUILTINS.intersection(py_names)

    def ref_name(self, qualified: str) -> str:
        """The Python name of a declared type as this file sees it."""
        if qualified in self.imports:
            self.used.add(qualified)
            return self.imports[qualified]
        return self.emitter.placement[qualified].name

    def lazy(self, qualified: str) -> bool:
        """True when ``qualified`` is defined later in this file (or is being defined)."""
        return qualified in self.component and qualified not in self.defined

    def descriptor(self, ref: TypeRef) -> str:
        """The cyclonedds type descriptor of ``ref``."""
        if isinstance(ref, PrimitiveType):
            self.needs.add("_types")
            if ref.kind == "boolean":
                return self.builtin("bool")
            return "_types.byte" if ref.kind == "octet" else f"_types.{ref.kind}"
        if isinstance(ref, StringType):
            if ref.bound is None:
                return self.builtin("str")
            self.needs.add("_types")
            return f"_types.bounded_str({ref.bound})"
        if isinstance(ref, SequenceType):
            self.needs.add("_types")
            bound = f", {ref.bound}" if ref.bound is not None else ""
            return f"_types.sequence({self.descriptor(ref.element)}{bound})"
        if isinstance(ref, ArrayType):
            self.needs.add("_types")
            text = self.descriptor(ref.element)
            for dim in reversed(ref.dims):
                text = f"_types.array({text}, {dim})"
            return text
        if self.lazy(ref.name):
            placement = self.emitter.placement[ref.name]
            return f'"{placement.module}.{placement.name}"'
        return self.ref_name(ref.name)

    def py_type(self, ref: TypeRef) -> str:
        """The Python type mypy sees for ``ref``."""
        if isinstance(ref, PrimitiveType):
            if ref.kind in FLOAT_KINDS:
                return self.builtin("float")
            return self.builtin({"boolean": "bool", "char": "str"}.get(ref.kind, "int"))
        if isinstance(ref, StringType):
            return self.builtin("str")
        if isinstance(ref, SequenceType | ArrayType):
            self.needs.add("_abc")
            inner = self.py_type(ref.element)
            for _ in range(len(ref.dims) if isinstance(ref, ArrayType) else 1):
                inner = f"_abc.Sequence[{inner}]"
            return inner
        declared = self.emitter.schema.types[ref.name]
        if isinstance(declared, TypedefType):
            return self.py_type(declared.type)
        if self.lazy(ref.name):
            return f'"{self.ref_name(ref.name)}"'
        return self.ref_name(ref.name)

    def annotation(self, ref: TypeRef, optional: bool) -> str:
        if isinstance(ref, PrimitiveType) or (isinstance(ref, StringType) and ref.bound is None):
            text = self.descriptor(ref)
        elif isinstance(ref, NamedType) and not isinstance(
                self.emitter.schema.types[ref.name], TypedefType):
            text = self.py_type(ref)
        else:
            self.needs.add("_typing")
            text = f"_typing.Annotated[{self.py_type(ref)}, {self.descriptor(ref)}]"
        if optional:
            self.needs.add("_typing")
            return f"_typing.Optional[{text}]"  # cyclonedds needs typing.Optional
        return text

    # -- default values ----------------------------------------------------------------

    def value(self, ref: TypeRef) -> tuple[str, bool]:
        """An expression for a fresh default value of ``ref``, and whether it is immutable."""
        schema = self.emitter.schema
        resolved = schema.resolve(ref)
        zero = zero_value(resolved)
        if zero is not None:
            return self.literal(zero, resolved), True
        if isinstance(resolved, SequenceType):
            return "[]", False
        if isinstance(resolved, ArrayType):
            return self._array_value(resolved)
        assert isinstance(resolved, StructType | UnionType)
        name = self._callable(resolved.name)
        if isinstance(resolved, StructType):
            return f"{name}()", False
        discriminator, case = union_default(schema, resolved)
        disc_resolved = schema.resolve(resolved.discriminator)
        disc_text = self.literal(discriminator, disc_resolved)
        value_text = self.value(case.type)[0] if case is not None else "None"
        return f"{name}(discriminator={disc_text}, value={value_text})", False

    def _callable(self, qualified: str) -> str:
        if self.lazy(qualified):
            return self.emitter.placement[qualified].name  # same file: only called lazily
        return self.ref_name(qualified)

    def _array_value(self, array: ArrayType) -> tuple[str, bool]:
        element = self.emitter.schema.resolve(array.element)
        dims = list(array.dims)
        if isinstance(element, PrimitiveType) and element.kind in ("octet", "uint8"):
            text = f"{self.builtin('bytes')}({dims.pop()})"
            if not dims:
                return text, True
        else:
            text, immutable = self.value(array.element)
            last = dims.pop()
            text = f"[{text}] * {last}" if immutable else \
                f"[{text} for _ in {self.builtin('range')}({last})]"
        for dim in reversed(dims):
            text = f"[{text} for _ in {self.builtin('range')}({dim})]"
        return text, False

    def literal(self, value: Value, resolved: object) -> str:
        if isinstance(resolved, EnumType):
            return f"{self.ref_name(resolved.name)}.{python_name(str(value), ENUM_RESERVED)}"
        if isinstance(resolved, PrimitiveType) and resolved.kind in FLOAT_KINDS \
                and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        text = python_literal(python_value(value, resolved))
        if text.startswith("float("):
            return self.builtin("float") + text[len("float"):]
        return text

    def default(self, member: Member) -> str:
        if member.optional:
            return "None"
        resolved = self.emitter.schema.resolve(member.type)
        if member.default is not None and isinstance(resolved, PrimitiveType | StringType
                                                     | EnumType):
            return self.literal(member.default, resolved)
        text, immutable = self.value(member.type)
        if immutable:
            return text
        self.needs.add("_field")
        if text == "[]":
            return f"_field(default_factory={self.builtin('list')})"
        if text.endswith("()") and text[:-2].isidentifier():
            return f"_field(default_factory={text[:-2]})"
        return f"_field(default_factory=lambda: {text})"

    # -- rendering ---------------------------------------------------------------------

    def render(self) -> str:
        schema = self.emitter.schema
        body: list[str] = []
        for name in self.component:
            declared = schema.types[name]
            body += ["", ""] if body else []
            body += self._declaration(declared)
            self.defined.add(name)
        kinds = sorted({_kind(schema.types[name]) for name in self.component})
        names = ", ".join(f"``{name}``" for name in self.component)
        title = f"IDL {' and '.join(kinds)} {names}."
        sources = [schema.origins.get(name, "") for name in self.component]
        head = [f'"""{title}', "", *docstring_lines(provenance(s for s in sources if s)),
                '"""', ""]
        gap = ["", ""] if body[0].startswith(("@", "class ")) else [""]
        lines = head + self._imports() + gap + body
        return "\n".join(noqa_long(line) for line in lines) + "\n"

    def _imports(self) -> list[str]:
        plain = [line for name, line in (
            ("_abc", "import collections.abc as _abc"),
            ("_builtins", "import builtins as _builtins"),
            ("_typing", "import typing as _typing"),
            ("_idl", "import cyclonedds.idl as _idl"),
            ("_annotate", "import cyclonedds.idl.annotations as _annotate"),
            ("_types", "import cyclonedds.idl.types as _types"),
        ) if name in self.needs]
        entries: list[tuple[str, str, str | None]] = [
            ("dataclasses", name[1:], name) for name in ("_dataclass", "_field")
            if name in self.needs]
        for qualified, alias in self.imports.items():
            if qualified not in self.used:
                continue
            placement = self.emitter.placement[qualified]
            entries.append((placement.module, placement.name,
                            alias if alias != placement.name else None))
        return import_blocks(plain, entries, self.module.split(".")[0])

    def _declaration(self, declared: Declared) -> list[str]:
        self._shadowing(())
        if isinstance(declared, StructType):
            return self._struct(declared)
        if isinstance(declared, UnionType):
            return self._union(declared)
        if isinstance(declared, EnumType):
            return self._enum(declared)
        name = self.emitter.placement[declared.name].name
        self.needs.add("_types")
        descriptor = self.descriptor(declared.type)
        is_class = descriptor in ("str", "bool") or (
            isinstance(declared.type, NamedType) and not descriptor.startswith('"')
            and not isinstance(self.emitter.schema.types[declared.type.name], TypedefType))
        is_alias = isinstance(declared.type, PrimitiveType)
        ignore = "" if is_class or is_alias else "  # type: ignore[arg-type]"
        line = f'{name} = _types.typedef("{declared.name}", {descriptor}){ignore}'
        if len(line.split("  #")[0]) <= LINE:
            return [line]
        return [f"{name} = _types.typedef(", f'    "{declared.name}",',
                f"    {descriptor},{ignore}", ")"]

    def _decorators(self, extensibility: str, nested: bool) -> list[str]:
        self.needs.add("_annotate")
        lines = [f"@_annotate.{extensibility}"]
        if nested:
            lines.append("@_annotate.nested")
        return lines

    def _struct(self, struct: StructType) -> list[str]:
        schema = self.emitter.schema
        name = self.emitter.placement[struct.name].name
        self.needs.add("_dataclass")
        lines = ["@_dataclass", *self._decorators(struct.extensibility, struct.nested)]
        if struct.autoid == "hash":
            lines.append('@_annotate.autoid("hash")')
        inherited = schema.all_members(struct)[: len(schema.all_members(struct))
                                                - len(struct.members)]
        taken = set(self.reserved) | STRUCT_RESERVED
        py_names: dict[str, str] = {}
        for member in inherited:
            py_names[member.name] = python_name(member.name, taken)
            taken.add(py_names[member.name])
        own: list[tuple[Member, str]] = []
        for member in struct.members:
            py = python_name(member.name, taken)
            taken.add(py)
            py_names[member.name] = py
            own.append((member, py))
        self._shadowing(py_names.values())
        if struct.keylist is not None:
            keys = ", ".join(f'"{py_names[key]}"' for key in struct.keylist)
            lines.append(f"@_annotate.keylist([{keys}])")
        base = self.ref_name(struct.base) if struct.base else "_idl.IdlStruct"
        if not struct.base:
            self.needs.add("_idl")
        lines.append(f'class {name}({base}, typename="{struct.name}"):')
        # a dataclass cannot inherit a field's default_factory through cyclonedds' copied
        # annotations: those members are declared again with their defaults
        for member in _refactored_inherited(schema, struct):
            inherited_lines = wrap(f"    {py_names[member.name]}: "
                                    f"{self.annotation(member.type, False)} = "
                                    f"{self.default(member)}", "    ")
            lines += noqa(inherited_lines, py_names[member.name], [])
            lines[-1] += "  # inherited"
        if not own and not _refactored_inherited(schema, struct):
            lines.append("    pass")
        for member, py in own:
            member_lines = wrap(f"    {py}: {self.annotation(member.type, member.optional)} = "
                                 f"{self.default(member)}", "    ")
            codes = ["UP045"] if member.optional else []  # cyclonedds needs typing.Optional
            lines += noqa(member_lines, py, codes)
            if member.key:
                lines.append(f'    _annotate.key("{py}")')
            if member.key or (struct.keylist and member.name in struct.keylist):
                # XTypes: key members are must-understand (as Cyclone's idlc marks them)
                lines.append(f'    _annotate.must_understand("{py}")')
            if member.member_id is not None:
                lines.append(f'    _annotate.member_id("{py}", {member.member_id})')
            if py != member.name:
                lines.append(f'    _annotate.member_name("{py}", "{member.name}")')
        return lines

    def _union(self, union: UnionType) -> list[str]:
        schema = self.emitter.schema
        name = self.emitter.placement[union.name].name
        lines = self._decorators(union.extensibility, union.nested)
        resolved = schema.resolve(union.discriminator)
        if isinstance(resolved, EnumType):
            discriminator = self.ref_name(resolved.name)
        else:
            assert isinstance(resolved, PrimitiveType)
            discriminator = self.descriptor(resolved)
        key = ", discriminator_is_key=True" if union.key_discriminator else ""
        boolean = isinstance(resolved, PrimitiveType) and resolved.kind == "boolean"
        self.needs.add("_idl")
        lines.append(f"class {name}(_idl.IdlUnion, discriminator={discriminator}{key}, "
                     f'typename="{union.name}"):')
        taken = set(self.reserved) | UNION_RESERVED
        case_names: list[str] = []
        for case in union.cases:
            case_names.append(python_name(case.name, taken))
            taken.add(case_names[-1])
        self._shadowing(case_names)
        for case, py in zip(union.cases, case_names, strict=True):
            self.needs.update({"_typing", "_types"})
            descriptor = self.descriptor(case.type)
            if case.is_default:
                holder = f"_types.default({descriptor})"
            else:
                labels = [self.literal(label, resolved) for label in case.labels]
                label_text = labels[0] if len(labels) == 1 else "[" + ", ".join(labels) + "]"
                holder = f"_types.case({label_text}, {descriptor})"
            py_type = self.py_type(case.type)
            codes: list[str] = []
            if boolean:
                # typing caches Annotated[...] by equal arguments and cyclonedds' case(True, T)
                # == case(1, T): another union's alias would hand this union its labels (or
                # this one its labels to them). The cache is keyed by the arguments' types
                # too, and every other union writes ``T | None`` (types.UnionType or a str),
                # so typing.Optional gives boolean unions their own entries.
                optional = f"_typing.Optional[{py_type}]"
                codes.append("UP045")
            elif '"' not in py_type:
                optional = f"{py_type} | None"
            else:
                optional = '"' + py_type.replace('"', "") + ' | None"'
            annotation = f"_typing.Annotated[{optional}, {holder}]"
            lines += noqa(wrap(f"    {py}: {annotation}", "    "), py, codes)
            if case.member_id is not None:
                lines.append(f'    _annotate.member_id("{py}", {case.member_id})')
            if py != case.name:
                lines.append(f'    _annotate.member_name("{py}", "{case.name}")')
        return lines

    def _enum(self, enum: EnumType) -> list[str]:
        name = self.emitter.placement[enum.name].name
        default = ""
        if enum.default_literal != enum.literals[0][0]:
            default = f', default="{python_name(enum.default_literal, ENUM_RESERVED)}"'
        self.needs.add("_idl")
        lines = [f'class {name}(_idl.IdlEnum, typename="{enum.name}"{default}):']
        for literal, value in enum.literals:
            py = python_name(literal, ENUM_RESERVED)
            lines += noqa([f"    {py} = {value}"], py, [])
        return lines



def _refactored_inherited(schema: Schema, struct: StructType) -> list[Member]:
    """Inherited members whose default needs a factory (so are declared again)."""
    if not struct.base:
        return []
    inherited = schema.all_members(struct)[: -len(struct.members) or None]
    return [member for member in inherited if not member.optional
            and not isinstance(schema.resolve(member.type), PrimitiveType | StringType | EnumType)
            and not _immutable_array(schema, member.type)]


def _immutable_array(schema: Schema, ref: TypeRef) -> bool:
    resolved = schema.resolve(ref)
    if not isinstance(resolved, ArrayType) or len(resolved.dims) != 1:
        return False
    element = schema.resolve(resolved.element)
    return isinstance(element, PrimitiveType) and element.kind in ("octet", "uint8")


def _annotation_needs(schema: Schema, ref: TypeRef) -> list[str]:
    """Declared types an annotation of ``ref`` names: typedefs and what they resolve to."""
    if isinstance(ref, SequenceType | ArrayType):
        return _annotation_needs(schema, ref.element)
    if not isinstance(ref, NamedType):
        return []
    declared = schema.types[ref.name]
    if isinstance(declared, TypedefType):
        return [ref.name, *_annotation_needs(schema, declared.type)]
    return [ref.name]


def _default_needs(schema: Schema, ref: TypeRef) -> list[str]:
    """Declared types that the default value expression of ``ref`` names."""
    resolved = schema.resolve(ref)
    if isinstance(resolved, EnumType | StructType):
        return [resolved.name]
    if isinstance(resolved, ArrayType):
        return _default_needs(schema, resolved.element)
    if isinstance(resolved, UnionType):
        needs = [resolved.name]
        discriminator = schema.resolve(resolved.discriminator)
        if isinstance(discriminator, EnumType):
            needs.append(discriminator.name)
        case = union_default(schema, resolved)[1]
        if case is not None:
            needs += _default_needs(schema, case.type)
        return needs
    return []


def _kind(declared: Declared) -> str:
    return {StructType: "struct", UnionType: "union", EnumType: "enum",
            TypedefType: "typedef"}[type(declared)]
