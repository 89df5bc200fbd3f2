"""Compiled socket mappings (templates and codecs of ``gateway.mapping``) and MQTT 5
request/response bookkeeping, without sockets."""

from __future__ import annotations

import asyncio

import pytest

from adapters.nanomsg.config import NngInbound
from adapters.sockets.mapping import Inbound, Outbound, mapping_names, note_failure
from adapters.sockets.requests import (
    PendingReplies,
    default_response_topic,
    reply_context,
    request_properties,
)
from adapters.zmq.config import ZmqInbound, ZmqOutbound
from broker_core.context import Context, Origin
from broker_core.mqtt.properties import Properties
from gateway.mapping import MappingError

ORIGIN = Origin("zmq", "floor")


def inbound(**kw: object) -> Inbound:
    config = ZmqInbound.model_validate({"socket": "pull", "bind": "ipc:///x", **kw})
    return Inbound(config, "in")


def outbound(**kw: object) -> Outbound:
    config = ZmqOutbound.model_validate({"socket": "push", "bind": "ipc:///x", **kw})
    return Outbound(config, "out")


def test_a_native_message_becomes_a_context() -> None:
    mapping = inbound(to_mqtt="robots/{zmq.topic}/state", qos=0, retain=True)
    ctx = mapping.context(b"r1", b"ok", ORIGIN)
    assert (ctx.topic, ctx.payload, ctx.qos, ctx.retain) == ("robots/r1/state", b"ok", 0, True)
    assert ctx.origin == ORIGIN
    assert ctx.meta == {"zmq.topic": "r1"}
    assert ctx.properties.content_type == "application/octet-stream"


def test_payload_fields_and_text_codecs() -> None:
    mapping = inbound(to_mqtt="cars/{payload.vin}", codec="json")
    ctx = mapping.context(b"t", b'{"vin": "W0L", "v": 1}', ORIGIN)
    assert ctx.topic == "cars/W0L"
    assert ctx.properties.content_type == "application/json"
    assert ctx.properties.payload_format_indicator == 1
    with pytest.raises(MappingError):
        mapping.context(b"t", b"not json", ORIGIN)
    hexed = inbound(to_mqtt="h/{zmq.topic}", codec="hex").context(b"t", b"\x01\xff", ORIGIN)
    assert hexed.payload == b"01ff"


def test_native_topics_must_make_topic_levels() -> None:
    mapping = inbound(to_mqtt="x/{zmq.topic}")
    for bad in (b"a/#", b"", b"\xff\xfe"):
        with pytest.raises(MappingError):
            mapping.context(bad, b"p", ORIGIN)


def test_the_nng_topic_key() -> None:
    config = NngInbound.model_validate(
        {"socket": "sub0", "connect": "ipc:///x", "to_mqtt": "n/{nng.topic}"}
    )
    assert Inbound(config, "in").context(b"remote/nng", b"1", ORIGIN).topic == "n/remote/nng"


def test_a_context_becomes_a_native_message() -> None:
    mapping = outbound(from_mqtt="cmd/{robot}/{rest#}", topic="{robot}.{rest}")
    assert mapping.native(Context("cmd/r7/arm/up", b"go")) == (b"r7.arm/up", b"go")
    assert outbound(from_mqtt="a/#").native(Context("a/b", b"x")) == (b"a/b", b"x")
    decoded = outbound(from_mqtt="a/#", codec="base64").native(Context("a/b", b"AQI="))
    assert decoded == (b"a/b", b"\x01\x02")
    with pytest.raises(MappingError):
        outbound(from_mqtt="a/#", codec="base64").native(Context("a/b", b"!!"))
    with pytest.raises(MappingError):  # a retained message of an overlapping filter
        mapping.native(Context("other/x", b"go"))


def test_mapping_names() -> None:
    configs = (inbound(to_mqtt="x").config, inbound(to_mqtt="y", name="named").config)
    assert mapping_names("zmq_to_mqtt", configs) == ["zmq_to_mqtt[0]", "named"]


def test_failures_are_counted_and_logged_sparingly(caplog: pytest.LogCaptureFixture) -> None:
    mapping = inbound(to_mqtt="x")
    for _ in range(10):
        note_failure(mapping, MappingError("bad"))
    assert mapping.counters.failed == 10
    assert len(caplog.records) == 4  # the 1st, 2nd, 4th and 8th
    stats = mapping.counters.stats("in", queue_dropped=3)
    assert stats["in.failed"] == 10
    assert stats["in.dropped"] == 3


def test_a_reply_goes_to_the_response_topic_with_the_correlation_data() -> None:
    mapping = outbound(from_mqtt="svc/echo", socket="req", codec="hex")
    request = Context(
        "svc/echo",
        b"0102",
        1,
        properties=Properties(response_topic="replies/me", correlation_data=b"c-1"),
    )
    reply = reply_context(mapping, request, b"\xab", ORIGIN)
    assert (reply.topic, reply.payload, reply.qos) == ("replies/me", b"ab", 1)
    assert reply.properties.correlation_data == b"c-1"
    assert reply.properties.content_type == "text/plain; charset=hex"
    with pytest.raises(MappingError):
        reply_context(mapping, Context("svc/echo", b""), b"x", ORIGIN)


def test_pending_replies_match_by_correlation_data() -> None:
    async def scenario() -> None:
        pending = PendingReplies(limit=2)
        key1, future1 = pending.open()
        key2, future2 = pending.open()
        assert key1 != key2
        with pytest.raises(MappingError):
            pending.open()  # bounded
        props = request_properties(Properties(), "r/t", key2)
        assert (props.response_topic, props.correlation_data) == ("r/t", key2)
        assert pending.resolve(Context("r/t", b"two", properties=Properties(correlation_data=key2)))
        assert (await future2).payload == b"two"
        assert not pending.resolve(
            Context("r/t", b"?", properties=Properties(correlation_data=b"x"))
        )
        assert not pending.resolve(Context("r/t", b"no correlation data"))
        pending.discard(key2)
        assert len(pending) == 1
        pending.close()
        assert future1.cancelled()

    asyncio.run(scenario())


def test_default_response_topic_is_one_level_per_part() -> None:
    assert default_response_topic("zmq", "floor", "zmq_to_mqtt[0]") == (
        "edgebus/replies/zmq/floor/zmq_to_mqtt_0_"
    )


def test_deeply_nested_json_is_a_mapping_error() -> None:
    # 100 kB of '[': json.loads raises RecursionError, not a JSONDecodeError
    deep = b"[" * 100_000
    with pytest.raises(MappingError, match="needs a JSON payload"):
        outbound(from_mqtt="a/#", topic="{payload.id}").native(Context("a/b", deep))
    with pytest.raises(MappingError, match="needs a JSON payload"):
        inbound(to_mqtt="cars/{payload.vin}").context(b"t", deep, ORIGIN)
    with pytest.raises(MappingError, match="payload is not JSON"):
        outbound(from_mqtt="a/#", codec="json").native(Context("a/b", deep))
