"""Configuration of the ``someip`` adapter (imports no someipy).

```yaml
adapters:
  - type: someip
    name: car
    daemon: {interface: 127.0.0.1}          # or socket_path: a running someipyd
    layouts:
      VehicleSpeed: {type: struct, fields: [{name: speed_kmh, type: float32}]}
    consume:                                # services of ECUs, to MQTT
      - service_id: 0x1234
        instance_id: 1
        eventgroups: [1]
        events: [{id: 0x8001, layout: VehicleSpeed}]
        methods: [{id: 1, request_layout: uint8, response_layout: VehicleSpeed}]
    offer:                                  # services the gateway offers, fed from MQTT
      - service_id: 0x2000
        instance_id: 1
        eventgroups: [1]
        events: [0x8001]
```
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from adapters.someip.codec import compile_layout
from gateway.config.errors import FieldProblems
from gateway.config.introspect import Loc
from gateway.config.models.adapter_base import AdapterConfigBase, check_topic_template
from gateway.config.models.base import ConfigModel, doc_default, valid_as_written, valid_items
from gateway.config.values import DurationSpec, PathSpec
from gateway.mapping import MappingError, TopicTemplate

__all__ = [
    "EVENT_TOPIC",
    "METHOD_TOPIC",
    "STATUS_TOPIC",
    "ConsumedEvent",
    "ConsumedMethod",
    "ConsumedService",
    "DaemonConfig",
    "OfferedEvent",
    "OfferedMethod",
    "OfferedService",
    "SomeipAdapterConfig",
    "eventgroup_of",
]

EVENT_TOPIC = "someip/{service:04x}/{instance:04x}/event/{event:04x}"
METHOD_TOPIC = "someip/{service:04x}/{instance:04x}/method/{method:04x}"
STATUS_TOPIC = "someip/{service:04x}/{instance:04x}/status"


class LayoutSpec:
    """``Annotated`` metadata: a payload layout, a type name or a mapping (compiled by
    the adapter's model, which knows the named ``layouts``)."""

    doc_type = "layout (a type name or a mapping, see docs/adapters/someip.md)"

    def _validate(self, value: Any) -> Any:
        if not isinstance(value, str | Mapping):
            raise ValueError(f"expected a layout: a type name or a mapping, got {value!r}")
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(self._validate)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": ["string", "object"], "format": "someip-layout"}


LayoutDecl = Annotated[Any, LayoutSpec()]
Template = Annotated[str, AfterValidator(check_topic_template)]
Id16 = Annotated[int, Field(ge=0, le=0xFFFF)]
Protocol = Literal["udp", "tcp"]


def _ipv4(value: str) -> str:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        raise ValueError(f"expected an IPv4 address, got {value!r}") from None
    return value


def _multicast(value: str) -> str:
    if not ipaddress.IPv4Address(_ipv4(value)).is_multicast:
        raise ValueError(f"expected an IPv4 multicast address (224.0.0.0/4), got {value!r}")
    return value


class DaemonConfig(ConfigModel):
    """The someipy daemon (`someipyd`) that owns the SOME/IP sockets."""

    socket_path: Annotated[Path, PathSpec()] | None = Field(
        default=None,
        description="Unix socket of a running daemon to connect to (start it with `python -m"
        " adapters.someip.daemon --config d.json`, which works around someipy's daemon bugs)."
        " Unset: the adapter starts and supervises its own daemon, its socket and log in the"
        " adapter's data directory.",
    )
    interface: Annotated[str, AfterValidator(_ipv4)] = Field(
        default="127.0.0.1",
        description="IPv4 address of the interface SOME/IP uses: service discovery and the"
        " endpoints of consumed and offered services. With `socket_path`, the connected"
        " daemon's `interface`.",
    )
    sd_address: Annotated[str, AfterValidator(_multicast)] = Field(
        default="224.224.224.245",
        description="Multicast group of SOME/IP service discovery (the daemon's `sd_address`).",
    )
    sd_port: int = Field(
        default=30490, ge=1, le=65535, description="UDP port of service discovery."
    )
    log_level: Literal["DEBUG", "INFO", "ERROR"] = Field(
        default="ERROR",
        description="Log level of the own daemon; it logs to `someipyd.log` in the adapter's"
        " data directory.",
    )
    start_timeout: Annotated[float, DurationSpec(gt=0)] = Field(
        default=10.0, description="How long the own daemon may take to accept connections."
    )


class _Event(ConfigModel):
    id: Id16 = Field(description="Event id (usually 0x8000 and up).")
    eventgroup: Id16 | None = Field(
        default=None,
        description="Eventgroup it belongs to; may be left out when the service lists one.",
    )
    protocol: Protocol = Field(default="udp", description="Transport of the event.")
    layout: LayoutDecl | None = Field(
        default=None,
        description="Payload layout (the MQTT side is JSON); unset: the service's `layout`.",
    )


class ConsumedEvent(_Event):
    """An event of a consumed service, published to MQTT."""

    to_mqtt: Template | None = Field(
        default=None, description="Topic template; unset: the service's `to_mqtt`."
    )
    qos: Literal[0, 1, 2] | None = Field(
        default=None, description="QoS to publish with; unset: the service's `qos`."
    )
    retain: bool | None = Field(
        default=None, description="Publish retained; unset: the service's `retain`."
    )


class OfferedEvent(_Event):
    """An event of an offered service, fed from MQTT."""

    from_mqtt: Template | None = Field(
        default=None, description="Topic whose messages are sent; unset: the service's."
    )


class _Method(ConfigModel):
    id: Id16 = Field(description="Method id.")
    protocol: Protocol = Field(default="udp", description="Transport of the call.")
    request_layout: LayoutDecl | None = Field(
        default=None, description="Layout of the request payload (JSON on MQTT); unset: raw."
    )
    response_layout: LayoutDecl | None = Field(
        default=None, description="Layout of the response payload (JSON on MQTT); unset: raw."
    )


class ConsumedMethod(_Method):
    """A method of a consumed service, called by MQTT 5 requests."""

    from_mqtt: Template | None = Field(
        default=None, description="Request topic; unset: the service's `from_mqtt`."
    )


class OfferedMethod(_Method):
    """A method of an offered service, answered by an MQTT 5 responder."""

    to_mqtt: Template | None = Field(
        default=None, description="Topic requests are published to; unset: the service's."
    )


class _Service(ConfigModel):
    service_id: Annotated[int, Field(ge=0, le=0xFFFE)] = Field(description="Service id.")
    instance_id: Annotated[int, Field(ge=0, le=0xFFFE)] = Field(description="Instance id.")
    major_version: int = Field(default=1, ge=0, le=0xFE, description="Major version.")
    endpoint_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Local UDP/TCP port of this service's endpoint on `daemon.interface`;"
        " unset: a free port.",
    )
    eventgroups: tuple[Id16, ...] = Field(default=(), description="Eventgroup ids.")
    layout: LayoutDecl | None = Field(
        default=None, description="Default layout of the events; unset: raw bytes."
    )
    timeout: Annotated[float, DurationSpec(ge=0.001, le=10)] = Field(
        default=2.0,
        description="How long a method call may take: the service's answer to an MQTT request"
        " (consume), the MQTT responder's answer to a SOME/IP request (offer).",
    )

    def _ids(self, items: tuple[Any, ...]) -> list[int]:
        return [item if isinstance(item, int) else item.id for item in items]


class ConsumedService(_Service):
    """A service offered by an ECU: its events go to MQTT, MQTT requests call its methods."""

    minor_version: int | None = Field(
        default=None, ge=0, le=0xFFFF_FFFE, description="Minor version; unset: any."
    )
    events: tuple[ConsumedEvent | Id16, ...] = Field(
        default=(), description="Events to publish: ids, or mappings with per-event settings."
    )
    methods: tuple[ConsumedMethod | Id16, ...] = Field(
        default=(), description="Methods MQTT may call: ids, or mappings with layouts."
    )
    to_mqtt: Template = Field(
        default=EVENT_TOPIC,
        description="Topic template of the events; fields `service`, `instance`, `event`,"
        " `eventgroup`, `major_version`, and `payload.` fields of typed events.",
    )
    from_mqtt: Template = Field(
        default=METHOD_TOPIC,
        description="Topic template of method requests (MQTT 5: response topic and"
        " correlation data); fields `service`, `instance`, `method`.",
    )
    qos: Literal[0, 1, 2] = Field(default=0, description="QoS of the published events.")
    retain: bool = Field(default=False, description="Publish the events retained.")
    subscription_ttl: Annotated[float, DurationSpec(ge=1, whole_seconds=True)] = Field(
        default=5.0, description="TTL of the eventgroup subscriptions (renewed with each offer)."
    )

    def event_list(self) -> list[ConsumedEvent]:
        return [ConsumedEvent(id=e) if isinstance(e, int) else e for e in self.events]

    def method_list(self) -> list[ConsumedMethod]:
        return [ConsumedMethod(id=m) if isinstance(m, int) else m for m in self.methods]


class OfferedService(_Service):
    """A service the gateway offers: MQTT feeds its events and answers its methods."""

    minor_version: int = Field(default=0, ge=0, le=0xFFFF_FFFE, description="Minor version.")
    events: tuple[OfferedEvent | Id16, ...] = Field(
        default=(), description="Events to send: ids, or mappings with per-event settings."
    )
    methods: tuple[OfferedMethod | Id16, ...] = Field(
        default=(), description="Methods answered by an MQTT responder: ids, or mappings."
    )
    from_mqtt: Template = Field(
        default=EVENT_TOPIC,
        description="Topic template the events are read from; fields `service`, `instance`,"
        " `event`, `eventgroup`, `major_version`.",
    )
    to_mqtt: Template = Field(
        default=METHOD_TOPIC,
        description="Topic template method requests are published to, with the adapter's"
        " `response_topic` and a correlation id; fields `service`, `instance`, `method`.",
    )
    qos: Literal[0, 1, 2] = Field(
        default=1, description="QoS of the subscriptions and of the published requests."
    )
    ttl: Annotated[float, DurationSpec(ge=1, whole_seconds=True)] = Field(
        default=5.0, description="TTL of the service discovery offers."
    )
    cyclic_offer_delay: Annotated[float, DurationSpec(gt=0)] = Field(
        default=1.0, description="Interval between offers; shorter than `ttl`."
    )

    def event_list(self) -> list[OfferedEvent]:
        return [OfferedEvent(id=e) if isinstance(e, int) else e for e in self.events]

    def method_list(self) -> list[OfferedMethod]:
        return [OfferedMethod(id=m) if isinstance(m, int) else m for m in self.methods]


class SomeipAdapterConfig(AdapterConfigBase):
    """The `someip` adapter: SOME/IP services to MQTT and back, through someipy."""

    type: Literal["someip"] = Field(description="Adapter type.")
    daemon: DaemonConfig = Field(
        default_factory=DaemonConfig, description="The someipy daemon it uses."
    )
    layouts: dict[str, LayoutDecl] = Field(
        default_factory=dict,
        description="Named payload layouts, usable by name in every `layout` key.",
    )
    consume: tuple[ConsumedService, ...] = Field(
        default=(), description="Services of other ECUs to bring to MQTT."
    )
    offer: tuple[OfferedService, ...] = Field(
        default=(), description="Services the gateway offers, fed from MQTT."
    )
    status_topic: Template | None = Field(
        default=STATUS_TOPIC,
        description="Topic template of the retained availability messages (`offered`,"
        " `stopped`, `expired`) of every consumed and offered service; null: none.",
    )
    response_topic: str | None = Field(
        default=None,
        description="Response topic of the requests the adapter publishes for offered methods.",
        json_schema_extra=doc_default("`someip/responses/<name>`"),
    )
    max_pending_calls: int = Field(
        default=256,
        ge=1,
        description="Method calls in progress at once, each way; past it a call is answered"
        " at once with an error (E_NOT_READY), counted as `calls_refused`.",
    )
    max_send_backlog: int = Field(
        default=1000,
        ge=1,
        description="Messages queued to the daemon before sending offered events waits.",
    )

    @model_validator(mode="after")
    def _check(self) -> SomeipAdapterConfig:
        problems = _layout_problems(self.layouts)
        broken = {str(name) for (_, name, *_), _ in problems}
        problems += _service_problems("consume", self.consume, self.layouts, broken)
        problems += _service_problems("offer", self.offer, self.layouts, broken)
        problems += _status_problems(self.status_topic)
        if problems:
            raise FieldProblems(problems)
        return self

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> Problems:
        """The layouts, the services that are valid themselves and the status topic, when
        another key has a problem."""
        problems: Problems = []
        if "status_topic" not in failed:
            with contextlib.suppress(ValidationError):  # reported where it is validated
                problems += _status_problems(valid_as_written(cls, "status_topic", data, context))
        if "layouts" in failed:
            return problems
        layouts = valid_as_written(cls, "layouts", data, context)
        found = _layout_problems(layouts)
        broken = {str(name) for (_, name, *_), _ in found}
        problems += found
        for section, model in (("consume", ConsumedService), ("offer", OfferedService)):
            services = valid_items(model, data.get(section), context)
            problems += _service_problems(section, services, layouts, broken)
        return problems

    @property
    def responses(self) -> str:
        """The response topic of the requests published for offered methods."""
        return self.response_topic or f"someip/responses/{self.name}"


Problems = list[tuple[Loc, str]]

#: ``layout.fields[0].type: unknown type ...``: where the layout compiler found a problem.
_LAYOUT_PROBLEM = re.compile(r"layout((?:\.\w+|\[\d+\])*): (.*)", re.DOTALL)


def _layout_path(text: str) -> Loc:
    """``.fields[0].type`` -> ``("fields", 0, "type")``."""
    return tuple(
        int(index) if index else name for name, index in re.findall(r"\.(\w+)|\[(\d+)\]", text)
    )


def _compile(
    spec: Any,
    named: Mapping[str, Any],
    where: Loc,
    broken: Collection[str] = (),
    name: str | None = None,
) -> None:
    """Compiles ``spec`` (the named layout ``name``, if given); ``FieldProblems`` at the
    key of the layout that is wrong. A layout naming one of ``broken`` (reported where it
    is declared) is not compiled."""
    if spec is None or (isinstance(spec, str) and spec in broken):
        return
    try:
        compile_layout(spec, named, name)
    except ValueError as exc:
        found = _LAYOUT_PROBLEM.fullmatch(str(exc))
        if found is None:
            raise FieldProblems([(where, str(exc))]) from None
        raise FieldProblems([((*where, *_layout_path(found[1])), found[2])]) from None


def _render(template: str, values: Mapping[str, int], where: Loc) -> None:
    """Checks a template rendered from ids alone (a topic subscribed to or a status)."""
    parsed = TopicTemplate(template)
    unknown = [field for field in parsed.fields if field not in values]
    if unknown:
        known = ", ".join(values)
        raise FieldProblems([(where, f"unknown field {{{unknown[0]}}} here; known: {known}")])
    try:
        parsed.render(values)
    except MappingError as exc:
        raise FieldProblems([(where, str(exc))]) from None


def _layout_problems(layouts: Mapping[str, Any]) -> Problems:
    """The problems of the named ``layouts``, each at its own key."""
    problems: Problems = []
    for name, spec in layouts.items():
        try:
            _compile(spec, layouts, ("layouts", name), name=name)
        except FieldProblems as exc:
            problems += exc.problems
    return problems


def _service_problems(
    section: str,
    services: Sequence[ConsumedService | OfferedService | None],
    layouts: Mapping[str, Any],
    broken: Collection[str],
) -> Problems:
    """The first problem of each service of ``section`` (None: one with problems of its
    own, not checked), and services listed twice."""
    problems: Problems = []
    seen: set[tuple[int, int]] = set()
    for index, service in enumerate(services):
        if service is None:
            continue
        where: Loc = (section, index)
        key = (service.service_id, service.instance_id)
        try:
            if key in seen:
                raise FieldProblems(
                    [(where, f"service 0x{key[0]:04x} instance 0x{key[1]:04x} is listed twice")]
                )
            seen.add(key)
            _check_service(service, layouts, where, broken)
        except FieldProblems as exc:
            problems += exc.problems
    return problems


def _status_problems(status_topic: str | None) -> Problems:
    if status_topic is None:
        return []
    try:
        _render(status_topic, {"service": 1, "instance": 1, "major_version": 1}, ("status_topic",))
    except FieldProblems as exc:
        return list(exc.problems)
    return []


def _items(service: ConsumedService | OfferedService) -> Iterator[tuple[Loc, Any]]:
    yield from ((("events", i), e) for i, e in enumerate(service.event_list()))
    yield from ((("methods", i), m) for i, m in enumerate(service.method_list()))


def _check_service(
    service: ConsumedService | OfferedService,
    named: Mapping[str, Any],
    where: Loc,
    broken: Collection[str] = (),
) -> None:
    base = {"service": service.service_id, "instance": service.instance_id}
    _compile(service.layout, named, (*where, "layout"), broken)
    for kind, items in (("event", service.event_list()), ("method", service.method_list())):
        ids = [item.id for item in items]
        duplicate = next((i for i in ids if ids.count(i) > 1), None)
        if duplicate is not None:
            raise FieldProblems([(where, f"{kind} 0x{duplicate:04x} is listed twice")])
    if len(set(service.eventgroups)) != len(service.eventgroups):
        raise FieldProblems([((*where, "eventgroups"), "an eventgroup is listed twice")])
    used: set[int] = set()
    for relative, item in _items(service):
        at: Loc = (*where, *relative)
        if isinstance(item, ConsumedEvent | OfferedEvent):
            used.add(_eventgroup_of(service, item, at))
            _compile(item.layout, named, (*at, "layout"), broken)
            values = {**base, "event": item.id, "eventgroup": 0, "major_version": 1}
            if isinstance(item, OfferedEvent):
                _render(item.from_mqtt or service.from_mqtt, values, (*at, "from_mqtt"))
            else:
                typed = (item.layout or service.layout) is not None
                template = item.to_mqtt or service.to_mqtt
                _check_fields(template, set(values), typed, (*at, "to_mqtt"))
        else:
            _compile(item.request_layout, named, (*at, "request_layout"), broken)
            _compile(item.response_layout, named, (*at, "response_layout"), broken)
            topic = item.from_mqtt if isinstance(item, ConsumedMethod) else item.to_mqtt
            fallback = (
                service.from_mqtt if isinstance(service, ConsumedService) else service.to_mqtt
            )
            _render(topic or fallback, {**base, "method": item.id}, at)
    idle = [group for group in service.eventgroups if group not in used]
    if idle:
        raise FieldProblems(
            [((*where, "eventgroups"), f"eventgroup {idle[0]} has no events listed")]
        )
    if isinstance(service, OfferedService) and service.cyclic_offer_delay >= service.ttl:
        raise FieldProblems([((*where, "cyclic_offer_delay"), "must be shorter than ttl")])


def _check_fields(template: str, known: set[str], typed: bool, where: Loc) -> None:
    for field in TopicTemplate(template).fields:
        if field.startswith(("payload.", "key.")):
            if not typed:
                raise FieldProblems([(where, f"{{{field}}} needs a layout (a JSON payload)")])
        elif field not in known and not field.startswith("someip."):
            raise FieldProblems(
                [(where, f"unknown field {{{field}}}; known: {', '.join(sorted(known))}")]
            )


def _eventgroup_of(
    service: ConsumedService | OfferedService, event: ConsumedEvent | OfferedEvent, where: Loc
) -> int:
    if event.eventgroup is not None:
        if event.eventgroup not in service.eventgroups:
            raise FieldProblems(
                [
                    (
                        (*where, "eventgroup"),
                        f"{event.eventgroup} is not in the service's eventgroups",
                    )
                ]
            )
        return event.eventgroup
    if len(service.eventgroups) != 1:
        raise FieldProblems(
            [(where, f"name its eventgroup (the service lists {len(service.eventgroups)})")]
        )
    return service.eventgroups[0]


def eventgroup_of(service: ConsumedService | OfferedService, event: Any) -> int:
    """The eventgroup ``event`` belongs to (validated)."""
    return _eventgroup_of(service, event, ())
