"""Keys that Cyclone DDS's ``idlc`` refuses, refused the same way.

- A derived struct cannot declare ``@key`` members ("Derived struct is not allowed to
  expand on keys"), whether or not its base has keys: the keys are the base's.
- A key cannot be, or contain, a sequence, a union or an array of strings ("Using
  sequence type as part of the key is currently unsupported", ...). A struct used as a
  key contributes its own keys, or all its members when it has none, and those are
  checked the same way, through typedefs.

Runs once every type is resolved; errors are at the key member's declaration.
"""

from __future__ import annotations

from collections.abc import Mapping

from idl_codegen.diagnostics import Diagnostics, Location
from idl_codegen.model import (
    ArrayType,
    Schema,
    SequenceType,
    StringType,
    StructType,
    TypeRef,
    UnionType,
)

__all__ = ["check_keys"]


def check_keys(schema: Schema, locations: Mapping[tuple[str, str], Location],
               diagnostics: Diagnostics) -> None:
    """Report the keys of ``schema``'s structs that ``idlc`` refuses. ``locations`` maps
    (struct, member) to the member's declaration."""
    for struct in list(schema.types.values()):
        if not isinstance(struct, StructType):
            continue
        if struct.base is not None:
            for member in struct.members:
                where = locations.get((struct.name, member.name))
                if member.key and where is not None:
                    diagnostics.error(where, f"derived struct '{struct.name}' cannot add the "
                                             f"key '{member.name}': its keys are its base's "
                                             "(as idlc)")
        own = {member.name for member in struct.members}
        for member in schema.all_members(struct):
            if member.name not in own or member.name not in schema.key_names(struct):
                continue
            where = locations.get((struct.name, member.name))
            problem = _unsupported(schema, member.type, member.name, set())
            if problem is not None and where is not None:
                diagnostics.error(where, f"key member '{member.name}' of '{struct.name}': "
                                         f"{problem} cannot be part of a key (as idlc)")


def _unsupported(schema: Schema, ref: TypeRef, path: str, seen: set[str]) -> str | None:
    resolved = schema.resolve(ref)
    if isinstance(resolved, SequenceType):
        return f"a sequence ({path})"
    if isinstance(resolved, UnionType):
        return f"a union ({path})"
    if isinstance(resolved, ArrayType):
        if isinstance(schema.resolve(resolved.element), StringType):
            return f"an array of strings ({path})"
        return _unsupported(schema, resolved.element, path + "[]", seen)
    if isinstance(resolved, StructType) and resolved.name not in seen:
        seen.add(resolved.name)
        keys = schema.key_names(resolved)
        for member in schema.all_members(resolved):
            if keys and member.name not in keys:
                continue
            problem = _unsupported(schema, member.type, f"{path}.{member.name}", seen)
            if problem is not None:
                return problem
    return None
