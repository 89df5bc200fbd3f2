"""SOME/IP messages as Contexts and back (pure): events, method calls both ways, status.

Built once per configured event and method from the adapter's config (``*Route``); the
adapter hands them SOME/IP payloads and MQTT Contexts. MQTT conventions
(docs/adapters/someip.md):

- a typed payload (one with a layout) is JSON on MQTT (content type
  ``application/json``), a raw one the SOME/IP bytes (``application/octet-stream``);
- method calls are MQTT 5 requests: the response goes to the request's response topic
  with its correlation data and the user property ``someip.return_code`` (``0`` for
  E_OK); an error's payload is JSON ``{"error": "E_NOT_OK", "return_code": 1,
  "detail": ...}``;
- availability is a retained JSON status per service instance.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from adapters.someip.availability import Status
from adapters.someip.codec import Layout, LayoutError, compile_layout
from adapters.someip.config import (
    ConsumedEvent,
    ConsumedMethod,
    ConsumedService,
    OfferedEvent,
    OfferedMethod,
    OfferedService,
    eventgroup_of,
)
from broker_core.context import Context, Origin
from broker_core.mqtt.properties import Properties
from gateway.mapping import MappingError, TopicTemplate, codec

__all__ = [
    "E_MALFORMED_MESSAGE",
    "E_NOT_OK",
    "E_NOT_REACHABLE",
    "E_NOT_READY",
    "E_OK",
    "E_TIMEOUT",
    "RETURN_CODE_PROPERTY",
    "AnswerRoute",
    "CallRoute",
    "EventRoute",
    "FeedRoute",
    "Payload",
    "error_payload",
    "return_code_name",
    "status_context",
]

E_OK = 0x00
E_NOT_OK = 0x01
E_NOT_READY = 0x04
E_NOT_REACHABLE = 0x05
E_TIMEOUT = 0x06
E_MALFORMED_MESSAGE = 0x09
_RETURN_CODES = {
    0x00: "E_OK",
    0x01: "E_NOT_OK",
    0x02: "E_UNKNOWN_SERVICE",
    0x03: "E_UNKNOWN_METHOD",
    0x04: "E_NOT_READY",
    0x05: "E_NOT_REACHABLE",
    0x06: "E_TIMEOUT",
    0x07: "E_WRONG_PROTOCOL_VERSION",
    0x08: "E_WRONG_INTERFACE_VERSION",
    0x09: "E_MALFORMED_MESSAGE",
    0x0A: "E_WRONG_MESSAGE_TYPE",
}
_CODE_OF_NAME = {name: code for code, name in _RETURN_CODES.items()}
RETURN_CODE_PROPERTY = "someip.return_code"
_JSON = codec("json").properties()
_RAW = codec("raw").properties()


def return_code_name(code: int) -> str:
    return _RETURN_CODES.get(code, f"0x{code:02x}")


def error_payload(code: int, detail: str) -> bytes:
    """The JSON payload of an error response."""
    body = {"error": return_code_name(code), "return_code": code, "detail": detail}
    return json.dumps(body, separators=(",", ":")).encode()


class Payload:
    """One payload's conversion: through a layout (JSON on MQTT) or raw bytes."""

    __slots__ = ("layout", "properties")

    def __init__(self, spec: Any, named: Mapping[str, Any]) -> None:
        self.layout: Layout | None = None if spec is None else compile_layout(spec, named)
        self.properties = _RAW if self.layout is None else _JSON

    def to_mqtt(self, data: bytes) -> bytes:
        """SOME/IP payload -> MQTT payload; ``LayoutError`` when it does not fit."""
        return data if self.layout is None else self.layout.to_json(data)

    def from_mqtt(self, data: bytes) -> bytes:
        """MQTT payload -> SOME/IP payload; ``LayoutError`` when it does not fit."""
        return data if self.layout is None else self.layout.from_json(data)

    def value(self, data: bytes) -> Any:
        """The decoded value (for ``payload.`` fields of topic templates); None when raw."""
        return None if self.layout is None else self.layout.decode(data)


def _meta(**values: int) -> Mapping[str, Any]:
    return MappingProxyType({f"someip.{key}": value for key, value in values.items()})


class EventRoute:
    """A consumed event: SOME/IP notification -> MQTT Context."""

    __slots__ = (
        "event_id",
        "eventgroup_id",
        "meta",
        "payload",
        "qos",
        "retain",
        "template",
        "topic",
        "values",
    )

    def __init__(
        self, service: ConsumedService, event: ConsumedEvent, named: Mapping[str, Any]
    ) -> None:
        self.event_id = event.id
        self.eventgroup_id = eventgroup_of(service, event)
        self.payload = Payload(event.layout or service.layout, named)
        self.qos = service.qos if event.qos is None else event.qos
        self.retain = service.retain if event.retain is None else event.retain
        self.template = TopicTemplate(event.to_mqtt or service.to_mqtt)
        self.meta = _meta(
            service_id=service.service_id,
            instance_id=service.instance_id,
            event_id=event.id,
            eventgroup_id=self.eventgroup_id,
        )
        self.values = {
            "service": service.service_id,
            "instance": service.instance_id,
            "event": event.id,
            "eventgroup": self.eventgroup_id,
            "major_version": service.major_version,
            **self.meta,
        }
        dynamic = any(f.startswith(("payload.", "key.")) for f in self.template.fields)
        self.topic = None if dynamic else self.template.render(self.values)

    def context(self, data: bytes, origin: Origin) -> Context:
        """The Context of a received event; ``MappingError`` (``LayoutError``: with the
        field path) when the payload does not fit its layout or the topic template."""
        topic = self.topic
        if topic is not None:
            payload = self.payload.to_mqtt(data)
        else:  # payload fields (the configuration requires a layout): decoded once
            layout = self.payload.layout
            assert layout is not None
            value = layout.decode(data)
            payload = layout.dumps(value)
            topic = self.template.render(self.values, value)
        return Context(topic, payload, self.qos, self.retain, self.payload.properties, origin,
                       self.meta)  # fmt: skip


class FeedRoute:
    """An offered event: MQTT message -> SOME/IP notification payload."""

    __slots__ = ("event_id", "eventgroup_id", "payload", "topic")

    def __init__(
        self, service: OfferedService, event: OfferedEvent, named: Mapping[str, Any]
    ) -> None:
        self.event_id = event.id
        self.eventgroup_id = eventgroup_of(service, event)
        self.payload = Payload(event.layout or service.layout, named)
        values = {
            "service": service.service_id,
            "instance": service.instance_id,
            "event": event.id,
            "eventgroup": self.eventgroup_id,
            "major_version": service.major_version,
        }
        self.topic = TopicTemplate(event.from_mqtt or service.from_mqtt).render(values)

    def payload_of(self, context: Context) -> bytes:
        return self.payload.from_mqtt(context.payload)


class _MethodRoute:
    """What both directions of a method have: ids, payloads, timeout, topic, meta."""

    __slots__ = ("meta", "method_id", "protocol", "request", "response", "timeout_s", "topic")

    def __init__(
        self,
        service: ConsumedService | OfferedService,
        method: ConsumedMethod | OfferedMethod,
        topic: str,
        named: Mapping[str, Any],
    ) -> None:
        self.method_id = method.id
        self.protocol = method.protocol
        self.request = Payload(method.request_layout, named)
        self.response = Payload(method.response_layout, named)
        self.timeout_s = service.timeout
        values = {"service": service.service_id, "instance": service.instance_id,
                  "method": method.id}  # fmt: skip
        self.topic = TopicTemplate(topic).render(values)
        self.meta = _meta(
            service_id=service.service_id, instance_id=service.instance_id, method_id=method.id
        )


class CallRoute(_MethodRoute):
    """A consumed method: MQTT 5 request -> SOME/IP call; its result -> MQTT response."""

    __slots__ = ()

    def __init__(
        self, service: ConsumedService, method: ConsumedMethod, named: Mapping[str, Any]
    ) -> None:
        super().__init__(service, method, method.from_mqtt or service.from_mqtt, named)

    def request_payload(self, context: Context) -> bytes:
        """The SOME/IP request payload; ``LayoutError`` with the field path."""
        return self.request.from_mqtt(context.payload)

    def answer(self, request: Context, code: int, data: bytes, origin: Origin) -> Context | None:
        """The MQTT response to ``request`` for a SOME/IP result (return code, payload);
        None when the request named no response topic."""
        if code != E_OK:
            detail = f"the service answered {return_code_name(code)}"
            return self.error(request, code, detail, origin)
        try:
            payload = self.response.to_mqtt(data)
        except LayoutError as exc:
            return self.error(request, E_MALFORMED_MESSAGE, f"response {exc}", origin)
        return self._response(request, payload, E_OK, self.response.properties, origin)

    def error(self, request: Context, code: int, detail: str, origin: Origin) -> Context | None:
        """An error response (JSON) to ``request``; None without a response topic."""
        return self._response(request, error_payload(code, detail), code, _JSON, origin)

    def _response(
        self, request: Context, payload: bytes, code: int, base: Properties, origin: Origin
    ) -> Context | None:
        topic = request.properties.response_topic
        if not topic:
            return None
        properties = Properties(
            payload_format_indicator=base.payload_format_indicator,
            content_type=base.content_type,
            correlation_data=request.properties.correlation_data,
            user_properties=((RETURN_CODE_PROPERTY, str(code)),),
        )
        return Context(topic, payload, request.qos, False, properties, origin, self.meta)


class AnswerRoute(_MethodRoute):
    """An offered method: SOME/IP request -> MQTT 5 request; MQTT response -> result."""

    __slots__ = ("qos",)

    def __init__(
        self, service: OfferedService, method: OfferedMethod, named: Mapping[str, Any]
    ) -> None:
        super().__init__(service, method, method.to_mqtt or service.to_mqtt, named)
        self.qos = service.qos

    def request_context(
        self, data: bytes, correlation: bytes, response_topic: str, origin: Origin
    ) -> Context:
        """The MQTT request of a SOME/IP call; ``LayoutError`` with the field path."""
        payload = self.request.to_mqtt(data)
        base = self.request.properties
        properties = Properties(
            payload_format_indicator=base.payload_format_indicator,
            content_type=base.content_type,
            response_topic=response_topic,
            correlation_data=correlation,
        )
        return Context(self.topic, payload, self.qos, False, properties, origin, self.meta)

    def result(self, response: Context) -> tuple[int, bytes]:
        """(return code, SOME/IP payload) of a responder's MQTT response. The return code
        is the user property ``someip.return_code`` (a number or a name such as
        ``E_NOT_OK``; 0 when absent); an error carries no payload. ``MappingError`` when
        the code is not one, ``LayoutError`` when the payload does not fit."""
        code = E_OK
        for key, value in response.properties.user_properties:
            if key == RETURN_CODE_PROPERTY:
                code = _parse_code(value)
        if code != E_OK:
            return code, b""
        return E_OK, self.response.from_mqtt(response.payload)


def _parse_code(text: str) -> int:
    text = text.strip()
    if text in _CODE_OF_NAME:
        return _CODE_OF_NAME[text]
    try:
        code = int(text, 0)
    except ValueError:
        code = -1
    if not 0 <= code <= 0xFF:
        raise MappingError(f"{RETURN_CODE_PROPERTY}: expected a return code, got {text!r}")
    return code


def status_context(
    template: TopicTemplate, status: Status, origin: Origin, wall_time: float
) -> Context:
    """The retained status message of a service instance."""
    values = {"service": status.service_id, "instance": status.instance_id,
              "major_version": status.major_version or 0}  # fmt: skip
    body: dict[str, Any] = {
        "state": status.state,
        "service_id": status.service_id,
        "instance_id": status.instance_id,
    }
    if status.major_version is not None:
        body["major_version"] = status.major_version
        body["minor_version"] = status.minor_version
    if status.endpoint is not None:
        body["endpoint"] = status.endpoint
    if status.ttl_s is not None:
        body["ttl_s"] = status.ttl_s
    body["at"] = round(wall_time, 3)
    payload = json.dumps(body, separators=(",", ":")).encode()
    meta = _meta(service_id=status.service_id, instance_id=status.instance_id)
    return Context(template.render(values), payload, 1, True, _JSON, origin, meta)
