"""Topic templates and payload codecs shared by every adapter.

Topic templates (native -> MQTT)
    ``vehicle/{dds.topic}/{key.vin}``: literal text and ``{field}`` placeholders. A
    field is looked up first in the values the adapter supplies (its metadata, such as
    ``dds.topic`` or ``zmq.topic``), then, for ``payload.a.b`` or ``key.vin``, inside
    the decoded payload (``key.`` reads the same fields as ``payload.``; it documents
    that the field is a key). A value may contain ``/`` (it then spans levels) but not
    ``+``, ``#`` or NUL, and must not be empty: NULL (None) renders as nothing, an
    error. A boolean renders as JSON writes it (``true``, ``false``); a list or an
    object is an error. A field may carry a format spec, as in ``str.format``:
    ``someip/{service:04x}`` renders 4660 as ``1234``.

Filter templates (MQTT -> native)
    ``cmd/{vin}/set`` or ``robots/{robot}/{rest#}``: an MQTT filter whose ``{name}``
    segments capture one level (subscribed as ``+``) and whose last segment may be
    ``{name#}``, capturing the remaining levels (subscribed as ``#``). Plain ``+`` and
    ``#`` work too, without a name. ``match(topic)`` returns the captures.

Payload codecs
    ``raw`` (bytes as they are), ``json`` (validated JSON text), ``base64`` and ``hex``
    (binary native payloads as text on the MQTT side). Each names the MQTT content
    type it produces, which the adapter sets on the Context. More codecs (IDL types)
    register with ``register_codec``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker_core.errors import EdgebusError
from broker_core.mqtt.properties import Properties
from broker_core.mqtt.topics import filter_matches, topic_filter_problem

__all__ = [
    "Codec",
    "FilterTemplate",
    "MappingError",
    "TopicTemplate",
    "codec",
    "codec_names",
    "register_codec",
]


class MappingError(EdgebusError):
    """A message does not fit a mapping (missing field, bad payload for the codec)."""


_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")


class TopicTemplate:
    """A topic name built from fields: ``vehicle/{dds.topic}/{key.vin}``."""

    __slots__ = ("_parts", "fields", "text")

    _parts: tuple[tuple[str, str | None, str], ...]

    def __init__(self, text: str) -> None:
        if not text:
            raise ValueError("a topic template must not be empty")
        parts: list[tuple[str, str | None, str]] = []
        fields: list[str] = []
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise ValueError(f"bad topic template {text!r}: {exc}") from None
        for literal, field, spec, conversion in parsed:
            if "+" in literal or "#" in literal:
                raise ValueError(f"a topic template cannot contain '+' or '#': {text!r}")
            if field is not None:
                if conversion or not _FIELD.match(field) or not _valid_spec(spec or ""):
                    raise ValueError(f"bad field {{{field}}} in topic template {text!r}")
                fields.append(field)
            parts.append((literal, field, spec or ""))
        self.text = text
        self.fields = tuple(fields)
        self._parts = tuple(parts)

    def __repr__(self) -> str:
        return f"TopicTemplate({self.text!r})"

    def render(self, values: Mapping[str, Any], payload: Any = None) -> str:
        out: list[str] = []
        for literal, field, spec in self._parts:
            out.append(literal)
            if field is None:
                continue
            out.append(_level(field, lookup(field, values, payload), spec))
        return "".join(out)


def _level(field: str, value: Any, spec: str) -> str:
    """``value`` as topic text: booleans as JSON writes them (``true``), strings and
    numbers as they are; NULL (None) renders as nothing, which is an error, as are a list
    or an object and a text holding ``+``, ``#`` or NUL."""
    if value is None:
        raise MappingError(f"field {field!r} is NULL: a topic level cannot be empty")
    if isinstance(value, Mapping | list | tuple):
        raise MappingError(f"field {field!r} is not a single value")
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, bytes):
        try:
            value = value.decode()
        except UnicodeDecodeError:
            raise MappingError(f"field {field!r} is not UTF-8 text") from None
    try:
        text = format(value, spec) if spec else str(value)
    except (TypeError, ValueError) as exc:
        raise MappingError(f"field {field!r} = {value!r}: format {spec!r}: {exc}") from None
    if not text or "+" in text or "#" in text or "\x00" in text:
        raise MappingError(f"field {field!r} = {text!r} cannot be a topic level")
    return text


def _valid_spec(spec: str) -> bool:
    """True when ``spec`` formats an integer or a string (``04x``, ``>8``)."""
    if "{" in spec:
        return False
    for sample in (0, ""):
        try:
            format(sample, spec)
        except (TypeError, ValueError):
            continue
        return True
    return False


def lookup(field: str, values: Mapping[str, Any], payload: Any) -> Any:
    """A field's value: from ``values``, or ``payload.``/``key.`` paths into the payload."""
    if field in values:
        return values[field]
    head, _, path = field.partition(".")
    if head in ("payload", "key") and path:
        node = payload
        for part in path.split("."):
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list | tuple) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise MappingError(f"field {field!r}: the payload has no {part!r}")
        if isinstance(node, Mapping | list | tuple):
            raise MappingError(f"field {field!r} is not a single value")
        return node
    raise MappingError(f"field {field!r} is not available here")


class FilterTemplate:
    """An MQTT filter with named captures: ``cmd/{vin}/set``, ``robots/{id}/{rest#}``."""

    __slots__ = ("_levels", "captures", "text", "topic_filter")

    def __init__(self, text: str) -> None:
        levels: list[tuple[str, str | None]] = []  # (kind: literal|+|#, capture name)
        captures: list[str] = []
        parts = text.split("/")
        for i, level in enumerate(parts):
            if level.startswith("{") and level.endswith("}"):
                name = level[1:-1]
                multi = name.endswith("#")
                if multi:
                    name = name[:-1]
                    if i != len(parts) - 1:
                        raise ValueError(f"{{{name}#}} must be the last level of {text!r}")
                if not _FIELD.match(name) or "." in name:
                    raise ValueError(f"bad capture {level} in filter template {text!r}")
                captures.append(name)
                levels.append(("#" if multi else "+", name))
            elif "{" in level or "}" in level:
                raise ValueError(f"a capture must be a whole level in {text!r}")
            else:
                levels.append((level, None))
        topic_filter = "/".join(kind for kind, _ in levels)
        problem = topic_filter_problem(topic_filter)
        if problem is not None:
            raise ValueError(f"{problem}: {text!r}")
        self.text = text
        self.topic_filter = topic_filter
        self.captures = tuple(captures)
        self._levels = tuple(levels)

    def __repr__(self) -> str:
        return f"FilterTemplate({self.text!r})"

    def match(self, topic: str) -> dict[str, str] | None:
        """The captured levels when ``topic`` matches, else None."""
        if not filter_matches(self.topic_filter, topic):
            return None
        found: dict[str, str] = {}
        levels = topic.split("/")
        for i, (kind, name) in enumerate(self._levels):
            if name is None:
                continue
            found[name] = "/".join(levels[i:]) if kind == "#" else levels[i]
        return found


@dataclass(frozen=True, slots=True)
class Codec:
    """Converts a native payload to the MQTT payload and back."""

    name: str
    content_type: str
    to_mqtt: Callable[[bytes], bytes]
    from_mqtt: Callable[[bytes], bytes]
    text: bool  # the MQTT side is UTF-8 text (payload format indicator 1)

    def properties(self) -> Properties:
        """The publish properties a Context encoded by this codec carries."""
        return _PROPERTIES[self.name]


def _json_check(data: bytes) -> bytes:
    try:
        json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise MappingError(f"payload is not JSON: {exc}") from exc
    return data


def _b64decode(data: bytes) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except binascii.Error as exc:
        raise MappingError(f"payload is not base64: {exc}") from exc


def _hexdecode(data: bytes) -> bytes:
    try:
        return bytes.fromhex(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MappingError(f"payload is not hex: {exc}") from exc


def _hexencode(data: bytes) -> bytes:
    return data.hex().encode()


def _identity(data: bytes) -> bytes:
    return data


_CODECS: dict[str, Codec] = {}
_PROPERTIES: dict[str, Properties] = {}


def register_codec(codec_: Codec) -> None:
    _CODECS[codec_.name] = codec_
    _PROPERTIES[codec_.name] = Properties(
        payload_format_indicator=1 if codec_.text else None, content_type=codec_.content_type
    )


register_codec(Codec("raw", "application/octet-stream", _identity, _identity, False))
register_codec(Codec("json", "application/json", _json_check, _json_check, True))
register_codec(Codec("base64", "text/plain; charset=base64", base64.b64encode, _b64decode, True))
register_codec(
    Codec("hex", "text/plain; charset=hex", lambda b: b.hex().encode(), _hexdecode, True)
)


def codec(name: str) -> Codec:
    try:
        return _CODECS[name]
    except KeyError:
        raise ValueError(f"unknown codec {name!r}; known: {', '.join(codec_names())}") from None


def codec_names() -> list[str]:
    return sorted(_CODECS)
