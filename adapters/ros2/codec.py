"""Pure conversion for the ``ros2`` adapter: ROS 2 names and types <-> DDS, the
rmw_cyclonedds request header of services.

ROS 2 over DDS (as rmw_cyclonedds does it):

- topic ``/ns/topic`` is DDS topic ``rt/ns/topic``; a relative name is resolved in the
  adapter's namespace;
- message type ``pkg/msg/T`` is DDS type ``pkg::msg::dds_::T_``;
- service ``/ns/svc`` of type ``pkg/srv/S`` is two DDS topics: requests on
  ``rq/ns/svcRequest`` (type ``pkg::srv::dds_::S_Request_``), replies on
  ``rr/ns/svcReply`` (``pkg::srv::dds_::S_Response_``);
- a request or reply sample starts with rmw_cyclonedds's request header, ``guid``
  (uint64: the client's request writer, as an instance handle) and ``seq`` (int64: the
  client's request number), followed by the members of the request or response; the
  server copies the header of the request into its reply, and the client keeps the
  replies whose ``guid`` is its own.
- requests and replies of one client carry ``clientid=<id>;`` in their endpoints' user
  data, the service's ``serviceid=<id>;``: servers answer a client once they have
  matched its reply reader.

Both header fields are 8 bytes and 8-aligned, so for ``@final`` types (every ROS 2
type) the header is 16 bytes right after the encapsulation header, and the rest is the
request or response as serialized on its own, with the same alignment: ``with_header``
and ``split_header`` move between the two.

An empty message (``std_msgs/msg/Empty``, ``std_srvs/srv/Trigger``'s request) has one
member in DDS, rosidl's placeholder ``uint8 structure_needs_at_least_one_member``, which
ROS users never see: ``PlaceholderSupport`` leaves it out of the JSON going to MQTT and
fills it (with 0) in the JSON coming from MQTT, at any depth (``filler``,
``strip_placeholders``; ``adapters.ros2.adapter.PlaceholderSupport`` uses them).
"""

from __future__ import annotations

import fnmatch
import struct
from collections.abc import Callable
from typing import Any

from idl_codegen.model import ArrayType, NamedType, SequenceType, StringType, StructType

__all__ = [
    "PLACEHOLDER",
    "WSTRING_REFUSED",
    "Fill",
    "dds_topic",
    "dds_type",
    "filler",
    "header_bytes",
    "ros_topic",
    "ros_type",
    "service_topics",
    "service_types",
    "split_header",
    "strip_placeholders",
    "with_header",
    "wstring_member",
]

#: rosidl's member of an empty message.
PLACEHOLDER = "structure_needs_at_least_one_member"

_LE = struct.Struct("<Qq")
_BE = struct.Struct(">Qq")


def _absolute(name: str, namespace: str) -> str:
    if name.startswith("/"):
        return name
    namespace = namespace.rstrip("/")
    return f"{namespace}/{name}"


def dds_topic(name: str, namespace: str = "/", prefix: str = "rt") -> str:
    """``/ns/topic`` -> ``rt/ns/topic`` (relative names resolved in ``namespace``)."""
    return prefix + _absolute(name, namespace)


def ros_topic(dds_name: str) -> str | None:
    """``rt/ns/topic`` -> ``/ns/topic``; None for a DDS topic that is no ROS 2 topic."""
    if not dds_name.startswith("rt/"):
        return None
    return dds_name[2:]


def dds_type(ros_type: str) -> str:
    """``pkg/msg/T`` (or ``pkg/T``) -> ``pkg::msg::dds_::T_``; services ``pkg/srv/S`` ->
    ``pkg::srv::dds_::S_``."""
    parts = ros_type.split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    package, kind, name = parts
    return f"{package}::{kind}::dds_::{name}_"


def ros_type(dds_name: str) -> str:
    """``pkg::msg::dds_::T_`` -> ``pkg/msg/T``; other DDS type names are returned as they
    are."""
    parts = dds_name.replace(".", "::").split("::")
    if len(parts) == 4 and parts[2] == "dds_" and parts[3].endswith("_"):
        return f"{parts[0]}/{parts[1]}/{parts[3][:-1]}"
    return dds_name


def service_topics(service: str, namespace: str = "/") -> tuple[str, str]:
    """The DDS topics of a service: (requests, replies)."""
    name = _absolute(service, namespace)
    return f"rq{name}Request", f"rr{name}Reply"


def service_types(ros_service_type: str) -> tuple[str, str]:
    """``pkg/srv/S`` -> (``pkg::srv::dds_::S_Request_``, ``pkg::srv::dds_::S_Response_``)."""
    base = dds_type(ros_service_type)[:-1]
    return f"{base}_Request_", f"{base}_Response_"


def header_bytes(guid: int, seq: int, little_endian: bool = True) -> bytes:
    return (_LE if little_endian else _BE).pack(guid, seq)


def with_header(cdr: bytes, guid: int, seq: int) -> bytes:
    """A serialized request or reply with the request header put in front of its members."""
    if len(cdr) < 4:
        raise ValueError("not a serialized sample")
    return cdr[:4] + header_bytes(guid, seq, cdr[1] & 1 == 1) + cdr[4:]


def split_header(cdr: bytes) -> tuple[int, int, bytes]:
    """(guid, seq, the sample without the header) of a serialized request or reply."""
    if len(cdr) < 20:
        raise ValueError("too short for a request header")
    guid, seq = (_LE if cdr[1] & 1 else _BE).unpack_from(cdr, 4)
    return guid, seq, cdr[:4] + cdr[20:]


def matches(pattern: str, name: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern)


Fill = Callable[[Any], Any]


def filler(schema: Any, ref: Any, seen: frozenset[str] = frozenset()) -> Fill | None:
    """What fills the placeholder of every empty message within a JSON value of type
    ``ref`` (an object without it gets ``0``); None when the type has none."""
    resolved = schema.resolve(ref)
    if isinstance(resolved, SequenceType | ArrayType):
        inner = filler(schema, resolved.element, seen)
        if inner is None:
            return None
        return lambda value: [inner(v) for v in value] if isinstance(value, list) else value
    if not isinstance(resolved, StructType) or resolved.name in seen:
        return None
    members = schema.all_members(resolved)
    if [m.name for m in members] == [PLACEHOLDER]:
        return lambda value: ({PLACEHOLDER: 0, **value} if isinstance(value, dict)
                              and PLACEHOLDER not in value else value)
    fills = [(m.name, fill) for m in members
             if (fill := filler(schema, m.type, seen | {resolved.name})) is not None]
    if not fills:
        return None

    def fill_struct(value: Any) -> Any:
        if isinstance(value, dict):
            for name, fill in fills:
                if name in value:
                    value[name] = fill(value[name])
        return value

    return fill_struct


def strip_placeholders(value: Any) -> Any:
    """``value`` without the placeholder of empty messages (an object with that member
    alone becomes ``{}``)."""
    if isinstance(value, dict):
        if len(value) == 1 and PLACEHOLDER in value:
            return {}
        return {k: strip_placeholders(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_placeholders(v) for v in value]
    return value


#: Why a ROS 2 type with a wstring is refused (check and start).
WSTRING_REFUSED = (
    "rmw_cyclonedds puts a wstring on the wire as its length and one 4-byte UTF-16 code"
    " unit per character, which this adapter cannot read or write (it would be corrupted"
    " both ways); use string (UTF-8)")


def wstring_member(schema: Any, type_name: str) -> str | None:
    """The path of the first wstring member in type ``type_name`` (``a.b``, ``list[].w``),
    or None."""

    def find(ref: Any, seen: frozenset[str]) -> str | None:
        resolved = schema.resolve(ref)
        if isinstance(resolved, StringType):
            return "" if resolved.wide else None
        if isinstance(resolved, SequenceType | ArrayType):
            inner = find(resolved.element, seen)
            return None if inner is None else "[]" + inner
        if not isinstance(resolved, StructType) or resolved.name in seen:
            return None
        for member in schema.all_members(resolved):
            inner = find(member.type, seen | {resolved.name})
            if inner is not None:
                return f".{member.name}{inner}"
        return None

    found = find(NamedType(type_name), frozenset())
    return None if found is None else found.lstrip(".")
