"""Compare the XTypes type objects of a cyclonedds-python class with idlc's for C.

idlc writes each topic type's TypeInformation and TypeMapping into the generated ``.c``
file as ``TYPE_INFO_CDR_<type>`` / ``TYPE_MAP_CDR_<type>`` byte arrays. Walking both
complete type objects side by side names every difference by member path, e.g.
``interop::Small8.i8: C TK_CHAR8, Python TK_INT8``.
"""

from __future__ import annotations

import re
from typing import Any

from cyclonedds.idl._typesupport.DDS import XTypes as xt

__all__ = ["c_type_mapping", "differences"]

_KIND_NAMES = {value: name for name, value in vars(xt).items()
               if name.startswith(("TK_", "TI_")) and isinstance(value, int)}


def c_type_mapping(c_source: str, c_name: str) -> Any:
    pattern = r"#define TYPE_MAP_CDR_" + re.escape(c_name) + r" \(unsigned char \[\]\)\{(.*?)\}"
    match = re.search(pattern, c_source, re.S)
    if match is None:
        raise LookupError(f"no TYPE_MAP_CDR_{c_name} in the idlc output")
    data = bytes(int(x, 16) for x in re.findall(r"0x([0-9a-f]{2})", match.group(1)))
    return xt.TypeMapping.deserialize(data, has_header=False, use_version_2=True)


def _objects(mapping: Any) -> dict[Any, Any]:
    return {pair.type_identifier: pair.type_object.complete
            for pair in mapping.identifier_object_pair_complete}


def _kind(identifier: Any) -> str:
    return _KIND_NAMES.get(identifier.discriminator, hex(identifier.discriminator))


def differences(c_mapping: Any, python_cls: Any) -> list[str]:
    """Every difference between idlc's complete type objects and the Python class's."""
    c_objects = _objects(c_mapping)
    p_objects = _objects(python_cls.__idl__.get_type_mapping())
    p_root = python_cls.__idl__.get_type_info().complete.typeid_with_size.type_id
    name = python_cls.__idl_typename__
    c_root = next(identifier for identifier, obj in c_objects.items()
                  if getattr(obj, "struct_type", None) is not None
                  and obj.struct_type.header.detail.type_name == name)
    found: list[str] = []
    _compare(c_objects, p_objects, c_root, p_root, name, found, set())
    return found


def _compare(c_objects: dict[Any, Any], p_objects: dict[Any, Any], c_id: Any, p_id: Any,
             path: str, found: list[str], seen: set[tuple[str, str]]) -> None:
    if c_id == p_id:
        return
    if c_id.discriminator != p_id.discriminator:
        found.append(f"{path}: C {_kind(c_id)}, Python {_kind(p_id)}")
        return
    key = (repr(c_id), repr(p_id))
    if key in seen:
        return
    seen.add(key)
    if c_id.discriminator != xt.EK_COMPLETE:
        c_value, p_value = c_id.value, p_id.value
        for attribute in ("element_identifier",):
            if hasattr(c_value, attribute):
                _compare(c_objects, p_objects, getattr(c_value, attribute),
                         getattr(p_value, attribute), path + "[]", found, seen)
                return
        found.append(f"{path}: C {c_value}, Python {p_value}")
        return
    c_obj, p_obj = c_objects[c_id], p_objects[p_id]
    for kind in ("struct_type", "union_type", "enumerated_type", "alias_type"):
        c_part, p_part = getattr(c_obj, kind, None), getattr(p_obj, kind, None)
        if c_part is not None and p_part is not None:
            getattr(_Walk(c_objects, p_objects, found, seen), kind)(c_part, p_part, path)
            return
    found.append(f"{path}: C {c_obj}, Python {p_obj}")


class _Walk:
    def __init__(self, c_objects: dict[Any, Any], p_objects: dict[Any, Any], found: list[str],
                 seen: set[tuple[str, str]]) -> None:
        self.c, self.p, self.found, self.seen = c_objects, p_objects, found, seen

    def flags(self, c_flags: Any, p_flags: Any, path: str) -> None:
        for flag in vars(c_flags) if hasattr(c_flags, "__dict__") else []:
            if getattr(c_flags, flag) != getattr(p_flags, flag):
                self.found.append(f"{path}: {flag} is {getattr(c_flags, flag)} in C, "
                                  f"{getattr(p_flags, flag)} in Python")

    def struct_type(self, c_struct: Any, p_struct: Any, path: str) -> None:
        self.flags(c_struct.struct_flags, p_struct.struct_flags, path)
        if c_struct.header.base_type != p_struct.header.base_type:
            _compare(self.c, self.p, c_struct.header.base_type, p_struct.header.base_type,
                     path + " (base)", self.found, self.seen)
        for c_member, p_member in zip(c_struct.member_seq, p_struct.member_seq, strict=False):
            member = f"{path}.{c_member.detail.name}"
            self.flags(c_member.common.member_flags, p_member.common.member_flags, member)
            _compare(self.c, self.p, c_member.common.member_type_id,
                     p_member.common.member_type_id, member, self.found, self.seen)
        if len(c_struct.member_seq) != len(p_struct.member_seq):
            self.found.append(f"{path}: {len(c_struct.member_seq)} members in C, "
                              f"{len(p_struct.member_seq)} in Python")

    def union_type(self, c_union: Any, p_union: Any, path: str) -> None:
        self.flags(c_union.union_flags, p_union.union_flags, path)
        _compare(self.c, self.p, c_union.discriminator.common.type_id,
                 p_union.discriminator.common.type_id, path + " (discriminator)", self.found,
                 self.seen)
        for c_member, p_member in zip(c_union.member_seq, p_union.member_seq, strict=False):
            member = f"{path}.{c_member.detail.name}"
            if list(c_member.common.label_seq) != list(p_member.common.label_seq):
                self.found.append(f"{member}: labels {c_member.common.label_seq} in C, "
                                  f"{p_member.common.label_seq} in Python")
            _compare(self.c, self.p, c_member.common.type_id, p_member.common.type_id, member,
                     self.found, self.seen)

    def enumerated_type(self, c_enum: Any, p_enum: Any, path: str) -> None:
        for c_literal, p_literal in zip(c_enum.literal_seq, p_enum.literal_seq, strict=False):
            literal = f"{path} literal {c_literal.detail.name}"
            if c_literal.common.value != p_literal.common.value:
                self.found.append(f"{literal}: value {c_literal.common.value} in C, "
                                  f"{p_literal.common.value} in Python")
            self.flags(c_literal.common.flags, p_literal.common.flags, literal)

    def alias_type(self, c_alias: Any, p_alias: Any, path: str) -> None:
        _compare(self.c, self.p, c_alias.body.common.related_type,
                 p_alias.body.common.related_type, path, self.found, self.seen)
