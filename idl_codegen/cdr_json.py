"""Direct CDR <-> JSON transcoding, generated per type: no sample objects in between.

cyclonedds-python (de)serializes in Python, one member at a time (about 30 µs for a
four-member struct); a DDS <-> MQTT bridge then converts the sample to JSON on top. For
the types it covers, :func:`transcoder_for` generates two straight-line functions from
the type description (:mod:`idl_codegen.model`) instead:

- ``to_json(data)``: serialized sample (with its 4-byte encapsulation header) -> compact
  UTF-8 JSON text, exactly the bytes :meth:`TypeCodec.dumps` writes for that sample;
- ``from_json(value)``: JSON-compatible value -> serialized sample, exactly the bytes
  cyclonedds' ``serialize()`` writes for :meth:`TypeCodec.from_json` of that value.

Runs of fixed-size members become one ``struct`` call each; arrays and sequences of
numbers go through ``memoryview.cast`` / ``array``. Both functions raise
:class:`CdrError` for anything they do not handle, and their callers then take the
general path (cyclonedds and the JSON codec), which either succeeds or names the problem
with its member path. So the fast path never has to explain an error, and it must
never accept what the general path would refuse: every member is type- and
range-checked as strictly as ``from_json(strict=True)`` checks it.

Covered: XCDR1 little endian (encapsulation ``CDR_LE``, what Cyclone DDS writes for
``@final`` types, and what ROS 2 uses) of types whose structs and unions are all
``@final``, without ``@optional`` members, ``wchar`` or recursion. Everything else
(``@appendable`` and ``@mutable`` types, XCDR2, big-endian writers) returns None from
:func:`transcoder_for` or raises :class:`CdrError` per sample, and takes the general
path.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from idl_codegen.cdr_decode import Decoder
from idl_codegen.cdr_encode import Encoder
from idl_codegen.cdr_types import CAUGHT, Align, CdrError, Generator, Lines, Unsupported
from idl_codegen.model import NamedType, Schema, StructType, UnionType

__all__ = ["CdrError", "Transcoder", "transcoder_for"]


class Transcoder:
    """The generated ``to_json`` / ``from_json`` pair of one type."""

    __slots__ = ("_from_json", "_to_json", "source", "type_name")

    def __init__(self, type_name: str, source: str, namespace: dict[str, Any]) -> None:
        self.type_name = type_name
        self.source = source
        exec(compile(source, f"<cdr_json {type_name}>", "exec"), namespace)
        self._to_json: Callable[[Any], Any] = namespace["to_json"]
        self._from_json: Callable[[Any], bytes] = namespace["from_json"]

    def to_json(self, data: bytes | bytearray | memoryview) -> Any:
        """Serialized sample -> compact JSON (and the values of the requested fields);
        :class:`CdrError` when not handled here."""
        try:
            return self._to_json(data)
        except CdrError:
            raise
        except CAUGHT as exc:
            raise CdrError(f"{type(exc).__name__}: {exc}") from None

    def from_json(self, value: Any) -> bytes:
        """JSON value -> serialized sample; :class:`CdrError` when not handled here."""
        try:
            return self._from_json(value)
        except CdrError:
            raise
        except CAUGHT as exc:
            raise CdrError(f"{type(exc).__name__}: {exc}") from None


def transcoder_for(schema: Schema, root: str, fields: Sequence[str] = ()) -> Transcoder | None:
    """The transcoder of struct or union ``root`` of ``schema``; None when the type is
    outside what it covers (see the module's docstring).

    With ``fields`` (member paths through structs: ``vin``, ``pose.position.x``), its
    ``to_json`` returns ``(json, values)``: the JSON text and the JSON values of those
    members (enum literals by name), for topic templates. None when one of them is not
    a single value reached through structs alone."""
    if sys.byteorder != "little":
        return None
    try:
        generator = Generator(schema)
        source = _source(generator, root, tuple(fields))
    except Unsupported:
        return None
    return Transcoder(root, source, generator.namespace)


def _source(gen: Generator, root: str, fields: Sequence[str]) -> str:
    """The source of ``to_json`` and ``from_json`` (their constants go to ``gen``)."""
    declared = gen.schema.types.get(root)
    if not isinstance(declared, StructType | UnionType):
        raise Unsupported(root)
    decode = Lines()
    for line in ("mv = memoryview(data)", "if len(mv) < 4 or mv[0] != 0 or mv[1] != 1:",
                 "    raise _E('not CDR_LE')", "mv = mv[4:]", "L = len(mv)", "p = 0"):
        decode.add(line)
    wanted = {path: f"f{index}" for index, path in enumerate(fields)}
    decoder = Decoder(gen, decode, wanted)
    text = decoder.value(NamedType(root), Align(), "")
    missing = set(wanted) - decoder.assigned
    if missing:
        raise Unsupported(f"members {sorted(missing)} cannot be extracted")
    decode.add("if p > L:")
    decode.add("    raise _E('short sample')")
    if fields:
        decode.add(f"return ({text}).encode(), ({''.join(v + ', ' for v in wanted.values())})")
    else:
        decode.add(f"return ({text}).encode()")
    encode = Lines()
    encode.add("o = bytearray(_H)")
    encoder = Encoder(gen, encode)
    align = Align()
    encoder.value(NamedType(root), "value", align)
    encoder.flush(align)
    encode.add("return bytes(o)")
    return "\n".join(["def to_json(data):", *decode.lines, "",
                      "def from_json(value):", *encode.lines, ""])
