from __future__ import annotations

import re

import pytest

from gateway.mapping import FilterTemplate, MappingError, TopicTemplate, codec, codec_names


def test_topic_template_renders_values_and_payload_fields() -> None:
    template = TopicTemplate("vehicle/{dds.topic}/{key.vin}/{payload.pos.0}")
    assert template.fields == ("dds.topic", "key.vin", "payload.pos.0")
    payload = {"vin": "WVW123", "pos": [7, 8]}
    assert template.render({"dds.topic": "Speed"}, payload) == "vehicle/Speed/WVW123/7"


def test_a_value_may_span_levels_but_not_hold_wildcards() -> None:
    template = TopicTemplate("x/{a}")
    assert template.render({"a": "b/c"}) == "x/b/c"
    for bad in ("+", "a#", "", "a\x00"):
        with pytest.raises(MappingError):
            template.render({"a": bad})


def test_fields_take_format_specs() -> None:
    template = TopicTemplate("someip/{service:04x}/{instance:04X}/event/{event}")
    assert template.fields == ("service", "instance", "event")
    assert template.render({"service": 0x12, "instance": 0xAB, "event": 7}) == (
        "someip/0012/00AB/event/7"
    )
    with pytest.raises(MappingError, match="format '04x'"):
        TopicTemplate("s/{name:04x}").render({"name": "text"})


@pytest.mark.parametrize(
    ("values", "payload", "message"),
    [
        ({}, None, "field 'zmq.topic' is not available here"),
        ({}, {"other": 1}, "the payload has no 'vin'"),
    ],
)
def test_missing_fields(values: dict[str, str], payload: object, message: str) -> None:
    field = "zmq.topic" if "zmq" in message else "payload.vin"
    with pytest.raises(MappingError, match=message):
        TopicTemplate(f"t/{{{field}}}").render(values, payload)


@pytest.mark.parametrize(
    "text", ["", "a/+", "a/#", "a/{", "a/{x!r}", "a/{1x}", "a/{x:04q}", "a/{x:{y}}"]
)
def test_bad_topic_templates(text: str) -> None:
    with pytest.raises(ValueError):
        TopicTemplate(text)


def test_filter_template_captures() -> None:
    template = FilterTemplate("robots/{robot}/cmd/{rest#}")
    assert template.topic_filter == "robots/+/cmd/#"
    assert template.match("robots/r2/cmd/arm/left") == {"robot": "r2", "rest": "arm/left"}
    assert template.match("robots/r2/cmd") == {"robot": "r2", "rest": ""}
    assert template.match("robots/r2/status") is None
    assert FilterTemplate("a/+/b").match("a/x/b") == {}


@pytest.mark.parametrize("text", ["a/{rest#}/b", "a/x{y}", "a/{a.b}", "a/#/b", ""])
def test_bad_filter_templates(text: str) -> None:
    with pytest.raises(ValueError):
        FilterTemplate(text)


@pytest.mark.parametrize("name", ["raw", "json", "base64", "hex"])
def test_codecs_round_trip(name: str) -> None:
    c = codec(name)
    native = b'{"v": [1, 2]}'
    assert c.from_mqtt(c.to_mqtt(native)) == native


def test_codec_errors_and_properties() -> None:
    assert codec_names() == ["base64", "hex", "json", "raw"]
    with pytest.raises(MappingError):
        codec("json").to_mqtt(b"{not json")
    with pytest.raises(MappingError):
        codec("base64").from_mqtt(b"***")
    with pytest.raises(MappingError):
        codec("hex").from_mqtt(b"xyz")
    with pytest.raises(ValueError, match="unknown codec 'yaml'"):
        codec("yaml")
    props = codec("json").properties()
    assert (props.content_type, props.payload_format_indicator) == ("application/json", 1)
    assert codec("raw").properties().payload_format_indicator is None


@pytest.mark.parametrize(
    ("value", "level"),
    [(True, "true"), (False, "false"), (0, "0"), (1.5, "1.5"), ("a/b", "a/b"), (b"id", "id")],
)
def test_values_render_as_json_writes_them(value: object, level: str) -> None:
    """Booleans as JSON has them (``true``, not Python's ``True``): a rule's topic and an
    adapter's render a JSON document's value alike."""
    template = TopicTemplate("d/{payload.id}/{v}")
    assert template.render({"v": value}, {"id": value}) == f"d/{level}/{level}"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "field 'v' is NULL: a topic level cannot be empty"),
        ([1, 2], "field 'v' is not a single value"),
        ({"a": 1}, "field 'v' is not a single value"),
        (b"\xff", "field 'v' is not UTF-8 text"),
    ],
)
def test_null_and_compound_values_are_no_topic_level(value: object, message: str) -> None:
    """NULL renders as nothing, an empty level: an error, never the level ``None``."""
    with pytest.raises(MappingError, match=re.escape(message)):
        TopicTemplate("d/{v}").render({"v": value})
    with pytest.raises(MappingError, match=re.escape("field 'payload.id' is NULL")):
        TopicTemplate("d/{payload.id}").render({}, {"id": None})


def test_the_json_codec_refuses_deeply_nested_json() -> None:
    # 100 kB of '[': json.loads raises RecursionError, not a JSONDecodeError
    for convert in (codec("json").to_mqtt, codec("json").from_mqtt):
        with pytest.raises(MappingError, match="payload is not JSON"):
            convert(b"[" * 100_000)
