"""SOME/IP messages as Contexts and back (pure): events, method calls both ways, status."""

from __future__ import annotations

import json

import pytest

from adapters.someip.availability import Status
from adapters.someip.codec import LayoutError
from adapters.someip.config import ConsumedService, OfferedService
from adapters.someip.messages import (
    RETURN_CODE_PROPERTY,
    AnswerRoute,
    CallRoute,
    EventRoute,
    FeedRoute,
    status_context,
)
from broker_core.context import Context, Origin
from broker_core.mqtt.properties import Properties
from gateway.mapping import MappingError, TopicTemplate

ORIGIN = Origin("someip", "car")
NAMED = {"Speed": {"type": "struct", "fields": [{"name": "kmh", "type": "uint16"}]}}


def consumed(**extra: object) -> ConsumedService:
    return ConsumedService.model_validate(
        {"service_id": 0x1234, "instance_id": 1, "eventgroups": [1], **extra}
    )


def test_a_typed_event_becomes_json_on_its_topic() -> None:
    service = consumed(events=[{"id": 0x8001, "layout": "Speed", "qos": 1}], retain=True)
    route = EventRoute(service, service.event_list()[0], NAMED)
    context = route.context(b"\x00\x50", ORIGIN)
    assert (context.topic, context.payload) == ("someip/1234/0001/event/8001", b'{"kmh":80}')
    assert (context.qos, context.retain) == (1, True)
    assert context.properties.content_type == "application/json"
    assert context.properties.payload_format_indicator == 1
    assert context.meta["someip.event_id"] == 0x8001
    with pytest.raises(LayoutError, match=r"^\$\.kmh: needs 2 bytes"):
        route.context(b"\x00", ORIGIN)


def test_a_raw_event_and_a_topic_from_payload_fields() -> None:
    service = consumed(events=[0x8002])
    raw = EventRoute(service, service.event_list()[0], NAMED).context(b"\x01\x02", ORIGIN)
    assert raw.payload == b"\x01\x02"
    assert raw.properties.content_type == "application/octet-stream"
    service = consumed(
        events=[{"id": 5, "layout": "Speed", "to_mqtt": "car/{eventgroup}/{payload.kmh}"}]
    )
    route = EventRoute(service, service.event_list()[0], NAMED)
    assert route.context(b"\x00\x07", ORIGIN).topic == "car/1/7"


def request(payload: bytes, response_topic: str | None = "r/1") -> Context:
    props = Properties(response_topic=response_topic, correlation_data=b"id")
    return Context("someip/1234/0001/method/0001", payload, 1, False, props)


def test_calls_answer_with_the_return_code_and_correlation_data() -> None:
    service = consumed(methods=[{"id": 1, "request_layout": "Speed", "response_layout": "bool"}])
    route = CallRoute(service, service.method_list()[0], NAMED)
    assert route.topic == "someip/1234/0001/method/0001"
    assert route.request_payload(request(b'{"kmh": 3}')) == b"\x00\x03"
    with pytest.raises(LayoutError, match=r"^\$\.kmh: expected an integer"):
        route.request_payload(request(b'{"kmh": -3}'))
    ok = route.answer(request(b""), 0, b"\x01", ORIGIN)
    assert ok is not None
    assert (ok.topic, ok.payload, ok.qos) == ("r/1", b"true", 1)
    assert ok.properties.correlation_data == b"id"
    assert ok.properties.user_properties == ((RETURN_CODE_PROPERTY, "0"),)
    error = route.answer(request(b""), 3, b"", ORIGIN)
    assert error is not None
    assert json.loads(error.payload) == {
        "error": "E_UNKNOWN_METHOD",
        "return_code": 3,
        "detail": "the service answered E_UNKNOWN_METHOD",
    }
    assert error.properties.user_properties == ((RETURN_CODE_PROPERTY, "3"),)
    bad = route.answer(request(b""), 0, b"\x02", ORIGIN)
    assert bad is not None
    assert json.loads(bad.payload)["detail"] == "response $: expected a boolean 0 or 1, got 2"
    assert route.answer(request(b"", response_topic=None), 0, b"\x01", ORIGIN) is None


def offered(**extra: object) -> OfferedService:
    return OfferedService.model_validate({"service_id": 0x2000, "instance_id": 3, **extra})


def test_offered_events_are_fed_from_their_topic() -> None:
    service = offered(eventgroups=[1], events=[{"id": 0x8001, "layout": "Speed"}])
    route = FeedRoute(service, service.event_list()[0], NAMED)
    assert route.topic == "someip/2000/0003/event/8001"
    message = Context(route.topic, b'{"kmh": 258}')
    assert route.payload_of(message) == b"\x01\x02"


def test_offered_methods_publish_requests_and_read_responses() -> None:
    service = offered(methods=[{"id": 7, "request_layout": "Speed"}])
    route = AnswerRoute(service, service.method_list()[0], NAMED)
    context = route.request_context(b"\x00\x09", b"corr", "someip/responses/car", ORIGIN)
    assert (context.topic, context.payload) == ("someip/2000/0003/method/0007", b'{"kmh":9}')
    assert context.properties.response_topic == "someip/responses/car"
    assert context.properties.correlation_data == b"corr"

    def response(payload: bytes, code: str | None = None) -> Context:
        users = ((RETURN_CODE_PROPERTY, code),) if code is not None else ()
        return Context(
            "someip/responses/car", payload, properties=Properties(user_properties=users)
        )

    assert route.result(response(b"\xaa")) == (0, b"\xaa")
    assert route.result(response(b"ignored", "E_NOT_READY")) == (4, b"")
    assert route.result(response(b"", "0x0a")) == (10, b"")
    with pytest.raises(MappingError, match="expected a return code, got 'nope'"):
        route.result(response(b"", "nope"))


def test_status_messages_are_retained_json() -> None:
    template = TopicTemplate("someip/{service:04x}/{instance:04x}/status")
    status = Status(0x1234, 1, "offered", 1, 0, "127.0.0.2:30501", 3, deadline=5.0)
    context = status_context(template, status, ORIGIN, 1700000000.5)
    assert (context.topic, context.qos, context.retain) == ("someip/1234/0001/status", 1, True)
    assert json.loads(context.payload) == {
        "state": "offered",
        "service_id": 0x1234,
        "instance_id": 1,
        "major_version": 1,
        "minor_version": 0,
        "endpoint": "127.0.0.2:30501",
        "ttl_s": 3,
        "at": 1700000000.5,
    }
    unknown = status_context(template, Status(0x1234, 1, "unknown"), ORIGIN, 0.0)
    assert json.loads(unknown.payload) == {
        "state": "unknown",
        "service_id": 0x1234,
        "instance_id": 1,
        "at": 0.0,
    }
