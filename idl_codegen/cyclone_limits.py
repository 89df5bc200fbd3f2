"""Types that cyclonedds-python serializes right but Cyclone DDS's C core then misreads.

The generator refuses what cyclonedds-python cannot build or write at all (``char`` and
64-bit discriminators, mutable unions, ...). What is here is valid, generates, and
round-trips through cyclonedds-python's own ``serialize`` / ``deserialize``, but the C
core that every sample goes through in a DDS process rewrites it:

- a union over a ``short`` discriminator (``int16``, also through a typedef) with a
  negative case label and a ``default`` case. Cyclone (11.0) reads a 2-byte
  discriminator without sign extension, so the discriminator -1 (0xFFFF) matches no
  label and the C core takes the sample to be in the default case: it normalizes the
  bytes there as the default member's type (a ``boolean`` default turns the first byte
  of a ``long long`` 5 into 1, 300 into 257, 70000 into 69889; a ``string`` member of
  the negative case came back empty, its length's first byte turned into 1), and a C
  peer reads the default member. Measured with cyclonedds-python 11.0.1 between two
  participants: every value of such a case came back changed when the member's
  alignment starts it right after the discriminator (the union after a 1- or 2-byte
  member, as ``long id; octet o; U u;``). In the other layouts the default member's
  bytes fall into padding and the samples came back intact, but the C core still takes
  them for the default case (Cyclone's ``read_union_discriminant`` in
  ``dds_cdrstream.c``), so they are refused too.
  Without a default case, or with an ``int8`` or ``long`` discriminator, or with
  non-negative labels, the samples came back intact in every layout.

:func:`cyclone_misreads` names the first such union a DDS type uses.
"""

from __future__ import annotations

from collections.abc import Mapping

from idl_codegen.model import (
    ArrayType,
    NamedType,
    PrimitiveType,
    Schema,
    SequenceType,
    StructType,
    TypedefType,
    TypeRef,
    UnionType,
)

__all__ = ["cyclone_misreads"]


def cyclone_misreads(
    schema: Schema, root: str, declared_in: Mapping[str, str] | None = None
) -> str | None:
    """Why Cyclone DDS would corrupt samples of type ``root`` (a union it uses, with the
    workaround), or None when it would not. ``declared_in`` maps type names to the file
    declaring them, for the message (``edgebus check`` names the union's IDL file; the
    dds adapter, which may have discovered the type, does not)."""
    seen: set[str] = set()
    pending: list[TypeRef] = [NamedType(root)]
    while pending:
        ref = pending.pop()
        if isinstance(ref, SequenceType | ArrayType):
            pending.append(ref.element)
            continue
        if not isinstance(ref, NamedType) or ref.name in seen:
            continue
        seen.add(ref.name)
        declared = schema.types.get(ref.name)
        if isinstance(declared, TypedefType):
            pending.append(declared.type)
        elif isinstance(declared, StructType):
            if declared.base is not None:
                pending.append(NamedType(declared.base))
            pending.extend(member.type for member in declared.members)
        elif isinstance(declared, UnionType):
            problem = _misread_union(schema, declared)
            if problem is not None:
                where = [] if declared.name == root else [f"used by '{root}'"]
                file = (declared_in or {}).get(declared.name)
                if file:
                    where.append(f"declared in {file}")
                context = f" ({', '.join(where)})" if where else ""
                return f"union '{declared.name}'{context} {problem}"
            pending.extend(case.type for case in declared.cases)
    return None


def _misread_union(schema: Schema, union: UnionType) -> str | None:
    discriminator = schema.resolve(union.discriminator)
    if not (isinstance(discriminator, PrimitiveType) and discriminator.kind == "int16"):
        return None
    if not any(case.is_default for case in union.cases):
        return None
    for case in union.cases:
        for label in case.labels:
            if isinstance(label, int) and not isinstance(label, bool) and label < 0:
                return (f"has the negative case label {label} ('{case.name}') on a short "
                        "discriminator and a default case: Cyclone DDS reads such samples "
                        "as the default case and corrupts them. Use a long discriminator, "
                        "non-negative labels, or no default case")
    return None
