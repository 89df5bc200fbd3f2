"""Payloads and properties between JSON and Context."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from broker_core.context import Context, Origin
from broker_core.mqtt.properties import EMPTY, Properties
from gateway.api.messages import (
    PayloadError,
    check_topic,
    context_of,
    decode_payload,
    encode_payload,
    message_of,
)
from gateway.api.schemas import PublishRequest

ORIGIN = Origin("api", "key-0")


@given(st.binary(max_size=64))
def test_payloads_round_trip(payload: bytes) -> None:
    text, encoding = encode_payload(payload)
    assert decode_payload(text, encoding) == payload


def test_text_is_plain_and_binary_is_base64() -> None:
    assert encode_payload("grüß".encode()) == ("grüß", "plain")
    assert encode_payload(b"\xff") == ("/w==", "base64")


@pytest.mark.parametrize(
    ("text", "encoding", "message"),
    [
        ("not base64!", "base64", "payload: not valid base64"),
        ("ä", "base64", "payload: not valid base64"),
        ("\udc80", "plain", "payload: not valid UTF-8 text (use encoding: base64)"),
    ],
)
def test_undecodable_payloads(text: str, encoding: str, message: str) -> None:
    with pytest.raises(PayloadError) as info:
        decode_payload(text, encoding)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("topic", "message"),
    [
        ("a/+", "topic: a topic name must not contain wildcards (+ or #)"),
        ("#", "topic: a topic name must not contain wildcards (+ or #)"),
        ("$SYS/x", "topic: $SYS topics belong to the broker"),
        ("$delayed/x/a", "topic: expected $delayed/<seconds>/<topic>"),
        ("$delayed/5", "topic: expected $delayed/<seconds>/<topic>"),
        (
            "é" * 40000,
            "topic: a topic name must be at most 65535 bytes of UTF-8 (this one has 80000)",
        ),
        (
            "$share/g/x",
            "topic: a topic name must not start with $share/ (the form of a shared subscription)",
        ),
    ],
)
def test_topics_a_client_could_not_publish(topic: str, message: str) -> None:
    with pytest.raises(PayloadError) as info:
        check_topic(topic)
    assert str(info.value) == message


def test_topics_a_client_could_publish() -> None:
    assert check_topic("a/b") is None
    assert check_topic("$app/x") is None
    assert check_topic("$delayed/30/a/b") == (30, "a/b")


def test_a_request_becomes_a_context() -> None:
    request = PublishRequest.model_validate(
        {
            "topic": "t",
            "payload": base64.b64encode(b"\x00\x01").decode(),
            "encoding": "base64",
            "qos": 2,
            "retain": True,
            "properties": {
                "content_type": "application/octet-stream",
                "message_expiry_interval": 10,
                "user_properties": [{"name": "k", "value": "v"}, {"name": "k", "value": "w"}],
                "correlation_data": "c",
                "payload_format_indicator": 0,
            },
        }
    )
    context = context_of(request, ORIGIN)
    assert (context.topic, context.payload, context.qos, context.retain) == (
        "t",
        b"\x00\x01",
        2,
        True,
    )
    assert context.origin == ORIGIN
    assert context.properties == Properties(
        payload_format_indicator=0,
        message_expiry_interval=10,
        content_type="application/octet-stream",
        correlation_data=b"c",
        user_properties=(("k", "v"), ("k", "w")),
    )
    plain = context_of(PublishRequest(topic="t"), ORIGIN)
    assert (plain.payload, plain.properties) == (b"", EMPTY)
    delayed = context_of(PublishRequest(topic="$delayed/1/x"), ORIGIN, "x")
    assert delayed.topic == "x"


def test_utf8_flag_with_binary_payload_is_refused() -> None:
    request = PublishRequest.model_validate(
        {
            "topic": "t",
            "payload": "/w==",
            "encoding": "base64",
            "properties": {"payload_format_indicator": 1},
        }
    )
    with pytest.raises(PayloadError) as info:
        context_of(request, ORIGIN)
    assert str(info.value) == "payload: payload_format_indicator 1 says UTF-8, the payload is not"


@pytest.mark.parametrize(
    "body",
    [
        {"topic": ""},
        {"topic": "a\x00b"},
        {"topic": "a\ud800"},
        {"topic": "a", "qos": 3},
        {"topic": "a", "encoding": "hex"},
        {"topic": "a", "extra": 1},
        {"topic": "a", "properties": {"message_expiry_interval": -1}},
        {"topic": "a", "properties": {"user_properties": [{"name": "k"}]}},
        {"topic": "a", "properties": {"content_type": "\x00"}},
    ],
)
def test_invalid_requests(body: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        PublishRequest.model_validate(body)


def test_a_context_is_shown_as_a_message() -> None:
    context = Context(
        "t/1",
        b"\xff\xfe",
        1,
        True,
        Properties(
            content_type="x/y",
            correlation_data=b"\x01",
            user_properties=(("a", "b"),),
            message_expiry_interval=5,
        ),
        Origin("mqtt", "dev-1", "127.0.0.1:5000"),
        received_at=1_700_000_000_500_000_000,
    )
    shown = message_of(context).model_dump()
    assert shown == {
        "topic": "t/1",
        "payload": "//4=",
        "encoding": "base64",
        "payload_size": 2,
        "qos": 1,
        "properties": {
            "payload_format_indicator": None,
            "message_expiry_interval": 5,
            "content_type": "x/y",
            "response_topic": None,
            "correlation_data": "AQ==",
            "user_properties": [{"name": "a", "value": "b"}],
        },
        "origin": {"protocol": "mqtt", "name": "dev-1"},
        "received_at": 1_700_000_000.5,
    }
