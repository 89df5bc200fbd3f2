"""Pure conversion for the DDS and ROS 2 adapters: DDS samples <-> Contexts.

No cyclonedds import: a type arrives as a class (loaded from IDL, or rebuilt from the
network), and everything here works on its serialized form (CDR bytes with their
encapsulation header) and on the JSON codec of ``idl_codegen``.

- ``TypeSupport``: one DDS type: CDR -> JSON text (``json_of``), JSON text -> CDR
  (``cdr_of``), a check of foreign CDR (``check_cdr``). The direct CDR <-> JSON
  transcoder of ``idl_codegen.cdr_json`` serves the types it covers; the others go
  through cyclonedds' own (de)serializer and the JSON codec. Errors are ``MappingError``
  naming the member path (``$.wheels[2].pressure: ...``).
- ``OutRoute``: DDS -> MQTT for one topic: the Context of a sample (topic template with
  metadata and sample members, content type, user properties with the DDS type name and
  the source timestamp).
- ``InRoute``: MQTT -> DDS for one mapping: which DDS topic a message goes to and the
  CDR of its payload.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from time import time_ns
from typing import Any

from adapters.dds.config import DdsQos, is_pattern, member_problem
from broker_core.context import Context, Origin, new_context, next_message_id
from broker_core.mqtt.fastinit import frozen_factory
from broker_core.mqtt.properties import Properties
from gateway.mapping import FilterTemplate, MappingError, TopicTemplate, lookup
from idl_codegen.cdr_json import CdrError, Transcoder, transcoder_for
from idl_codegen.cyclone_limits import cyclone_misreads
from idl_codegen.json_codec import IdlValueError, TypeCodec, codec_for

__all__ = [
    "CONTENT_CDR",
    "CONTENT_JSON",
    "InPlan",
    "InRoute",
    "OutPlan",
    "OutRoute",
    "SampleTemplate",
    "TypeRegistry",
    "TypeSupport",
]

CONTENT_JSON = "application/json"
CONTENT_CDR = "application/x-dds-cdr"

_new_properties = frozen_factory(Properties)
_PROPERTY_NAMES = [f.name for f in fields(Properties)]
_USER = _PROPERTY_NAMES.index("user_properties")


class _PropertiesMaker:
    """Properties with fixed fields and per-message user properties, built without the
    frozen dataclass's per-field cost (one positional call)."""

    __slots__ = ("_after", "_before")

    def __init__(self, **fixed: Any) -> None:
        values = [fixed.get(f.name, f.default) for f in fields(Properties)]
        self._before = tuple(values[:_USER])
        self._after = tuple(values[_USER + 1:])

    def __call__(self, user_properties: tuple[tuple[str, str], ...]) -> Properties:
        made: Properties = _new_properties(*self._before, user_properties, *self._after)
        return made


class TypeSupport:
    """One DDS type: its class, IDL name, JSON codec and CDR transcoder."""

    __slots__ = ("_extractors", "cls", "codec", "fast", "name")

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.codec: TypeCodec = codec_for(cls)
        self.name: str = self.codec.type_name
        problem = cyclone_misreads(self.codec.schema, self.name)
        if problem is not None:  # refused: Cyclone's C core would corrupt its samples
            raise MappingError(f"DDS type '{self.name}' is not supported: {problem}")
        self.fast: Transcoder | None = transcoder_for(self.codec.schema, self.name)
        self._extractors: dict[tuple[str, ...], Transcoder | None] = {}

    def extractor(self, paths: tuple[str, ...]) -> Transcoder | None:
        """A transcoder that also returns the values of member ``paths`` (None when the
        direct path cannot give them: the JSON is parsed instead)."""
        if paths not in self._extractors:
            self._extractors[paths] = (transcoder_for(self.codec.schema, self.name, paths)
                                       if self.fast is not None else None)
        return self._extractors[paths]

    def __repr__(self) -> str:
        return f"TypeSupport({self.name})"

    def json_of(self, data: bytes) -> bytes:
        """The JSON text of a serialized sample; ``MappingError`` when it is malformed."""
        fast = self.fast
        if fast is not None:
            try:
                return fast.to_json(data)
            except CdrError:
                pass  # another encoding (big-endian, XCDR2) or malformed: the slow path says
        try:
            sample = self.cls.deserialize(data)  # type: ignore[attr-defined]
        except Exception as exc:  # cyclonedds raises whatever its reader hits
            raise MappingError(f"malformed {self.name} sample: {exc}") from exc
        try:
            return self.codec.dumps(sample)
        except IdlValueError as exc:
            raise MappingError(f"{self.name} {exc}") from exc

    def value_of(self, data: bytes) -> Any:
        """The JSON value of a serialized sample (for topic templates)."""
        return json.loads(self.json_of(data))

    def cdr_of(self, payload: bytes, strict: bool = True) -> bytes:
        """The serialized sample of JSON text; ``MappingError`` with the member path."""
        try:
            value = json.loads(payload)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise MappingError(f"payload is not JSON: {exc}") from exc
        return self.cdr_of_value(value, strict)

    def cdr_of_value(self, value: Any, strict: bool = True) -> bytes:
        fast = self.fast
        if fast is not None and strict:
            try:
                return fast.from_json(value)
            except CdrError:
                pass  # not the common case: the codec checks it and names the problem
        try:
            sample = self.codec.from_json(value, strict=strict)
        except IdlValueError as exc:
            raise MappingError(f"{self.name} {exc}") from exc
        data: bytes = sample.serialize()
        return data

    def check_cdr(self, data: bytes) -> bytes:
        """``data`` when it is a well-formed serialized sample of this type."""
        self.json_of(data)
        return data


class SampleTemplate:
    """A topic template over metadata (``dds.topic``, ``ros.type``, ...) and sample
    members: ``vehicle/{vin}/speed``, ``{pose.position.x}``, ``{payload.vin}``."""

    __slots__ = ("members", "needs_payload", "paths", "sample_fields", "static", "template")

    def __init__(self, text: str, meta: Mapping[str, Any]) -> None:
        self.template = TopicTemplate(text)
        self.members: tuple[str, ...] = tuple(
            field
            for field in self.template.fields
            if field not in meta and not field.startswith(("payload.", "key."))
        )
        self.needs_payload = any(field not in meta for field in self.template.fields)
        self.static: str | None = None if self.needs_payload else self.template.render(meta)
        # the fields read from the sample, and their member paths
        self.sample_fields = tuple(f for f in self.template.fields if f not in meta)
        self.paths = tuple(f.partition(".")[2] if f.startswith(("payload.", "key.")) else f
                           for f in self.sample_fields)

    def check(self, support: TypeSupport) -> None:
        """Every member the template names exists in ``support``'s type."""
        for field in self.template.fields:
            if field in self.members:
                path = field
            elif field.startswith(("payload.", "key.")):
                path = field.partition(".")[2]
            else:
                continue
            problem = _member_problem(support.codec, path)
            if problem is not None:
                raise MappingError(f"topic template {self.template.text!r}: {problem}")

    def render_values(self, meta: Mapping[str, Any], values: tuple[Any, ...]) -> str:
        """The topic, given the values of ``sample_fields`` (from an extractor)."""
        found = dict(meta)
        found.update(zip(self.sample_fields, values, strict=True))
        return self.template.render(found)

    def render(self, meta: Mapping[str, Any], payload: Any) -> str:
        if self.members:
            values = dict(meta)
            for field in self.members:
                values[field] = lookup("payload." + field, values, payload)
            return self.template.render(values, payload)
        return self.template.render(meta, payload)


def _member_problem(codec: TypeCodec, path: str) -> str | None:
    """Why ``path`` (``a.b.2.c``) does not name a member of the codec's type, or None."""
    return member_problem(codec.schema, codec.type_name, path)


class OutRoute:
    """DDS -> MQTT for one DDS topic: builds the Context of each sample."""

    __slots__ = (
        "_extractor",
        "_properties",
        "meta",
        "origin",
        "payload",
        "qos",
        "retain",
        "support",
        "template",
        "type_property",
    )

    def __init__(
        self,
        to_mqtt: str,
        support: TypeSupport,
        meta: Mapping[str, Any],
        origin: Origin,
        *,
        qos: int = 1,
        retain: bool = False,
        payload: str = "json",
        type_property: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.support = support
        self.meta = dict(meta)
        self.template = SampleTemplate(to_mqtt, self.meta)
        self.template.check(support)
        self.origin = origin
        self.qos = qos
        self.retain = retain
        self.payload = payload
        self.type_property = type_property or (("dds.type", support.name),)
        self._extractor = (support.extractor(self.template.paths)
                           if self.template.static is None else None)
        text = payload == "json"
        self._properties = _PropertiesMaker(
            payload_format_indicator=1 if text else None,
            content_type=CONTENT_JSON if text else CONTENT_CDR)

    def context(self, data: bytes, source_timestamp: int) -> Context:
        """The Context of one serialized sample; ``MappingError`` when it does not fit."""
        support = self.support
        template = self.template
        found = None
        if self._extractor is not None:  # a topic from members: the direct path gives them
            with contextlib.suppress(CdrError):
                found = self._extractor.to_json(data)
        if found is not None:
            body = found[0] if self.payload == "json" else data
            topic = template.render_values(self.meta, found[1])
        else:
            body = support.json_of(data) if self.payload == "json" else support.check_cdr(data)
            if template.static is not None:
                topic = template.static
            else:
                value = json.loads(body) if self.payload == "json" else support.value_of(data)
                topic = template.render(self.meta, value)
        properties = self._properties(
            (*self.type_property, ("dds.source_timestamp", str(source_timestamp))))
        return new_context(
            topic, body, self.qos, self.retain, properties, self.origin, self.meta,
            next_message_id(), time_ns(),
        )


class InRoute:
    """MQTT -> DDS for one mapping: the DDS topic of a message and its sample's CDR."""

    __slots__ = ("payload", "source", "static_topic", "strict", "target")

    def __init__(self, from_mqtt: str, to_dds: str, *, payload: str = "json",
                 strict: bool = True) -> None:
        self.source = FilterTemplate(from_mqtt)
        self.target = TopicTemplate(to_dds)
        self.payload = payload
        self.strict = strict
        #: The DDS topic when it uses no captures.
        self.static_topic: str | None = None if self.target.fields else self.target.render({})

    def topic_of(self, context: Context) -> str | None:
        """The DDS topic ``context`` goes to; None when its topic does not match."""
        if self.static_topic is not None and not self.source.captures:
            return self.static_topic  # the subscription is the source filter: it matches
        captures = self.source.match(context.topic)
        if captures is None:
            return None
        return self.target.render(captures)

    def cdr_of(self, context: Context, support: TypeSupport) -> bytes:
        """The serialized sample of ``context``'s payload; ``MappingError`` otherwise."""
        if self.payload == "cdr":
            return support.check_cdr(context.payload)
        return support.cdr_of(context.payload, self.strict)


class TypeRegistry:
    """The DDS types an adapter knows: loaded from IDL by name, or discovered."""

    def __init__(self, classes: Mapping[str, type] = {},
                 make: Callable[[type], TypeSupport] = TypeSupport) -> None:
        self._classes = dict(classes)
        self._supports: dict[str, TypeSupport] = {}
        self._make = make  # the support of a class (the ros2 adapter hides placeholders)

    def __contains__(self, name: object) -> bool:
        return name in self._classes

    def support(self, name: str) -> TypeSupport:
        """The support of type ``name``; ``MappingError`` when it is not known."""
        found = self._supports.get(name)
        if found is not None:
            return found
        cls = self._classes.get(name)
        if cls is None:
            known = ", ".join(sorted(self._classes)[:8]) or "none: add idl_files"
            raise MappingError(f"unknown DDS type {name!r} (known: {known})")
        support = self._supports[name] = self._make(cls)
        return support

    def discovered(self, cls: type) -> TypeSupport:
        """The support of a type rebuilt from the network (kept by name)."""
        support = self._make(cls)
        self._classes.setdefault(support.name, cls)
        return self._supports.setdefault(support.name, support)


@dataclass(frozen=True, slots=True)
class OutPlan:
    """One DDS -> MQTT mapping in DDS terms: what to read, and its route per topic."""

    topic: str  # a DDS topic name, or a glob pattern over discovered topics
    type_name: str  # an IDL type name, or "auto"
    qos: DdsQos
    route: Callable[[str, TypeSupport], OutRoute]  # the route of one topic and its type

    @property
    def pattern(self) -> bool:
        return is_pattern(self.topic)

    def matches(self, topic: str) -> bool:
        return fnmatch.fnmatchcase(topic, self.topic) if self.pattern else topic == self.topic


@dataclass(frozen=True, slots=True)
class InPlan:
    """One MQTT -> DDS mapping in DDS terms."""

    route: InRoute
    type_name: str  # an IDL type name, or "auto"
    qos: DdsQos
    mqtt_qos: int
