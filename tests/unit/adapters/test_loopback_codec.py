from __future__ import annotations

import pytest

from adapters.loopback.codec import CompiledMapping, republish
from adapters.loopback.config import LoopbackMapping
from broker_core.context import Context, Origin
from gateway.mapping import MappingError

ORIGIN = Origin("loopback", "echo")


def mapping(**kw: object) -> CompiledMapping:
    return CompiledMapping(
        LoopbackMapping.model_validate(
            {"source": "s/{room}/{rest#}", "target": "t/{room}/{rest}", **kw}
        )
    )


def test_republish_maps_topic_and_keeps_payload() -> None:
    out = republish(mapping(), Context("s/kitchen/temp/c", b"21", 1), ORIGIN)
    assert out is not None
    assert (out.topic, out.payload, out.qos, out.origin) == ("t/kitchen/temp/c", b"21", 1, ORIGIN)
    assert out.meta["loopback.source"] == "s/kitchen/temp/c"


def test_non_matching_topics_are_skipped() -> None:
    assert republish(mapping(), Context("other/x", b"1"), ORIGIN) is None


def test_codecs_and_payload_fields() -> None:
    m = CompiledMapping(
        LoopbackMapping.model_validate(
            {
                "source": "raw/#",
                "target": "dev/{payload.id}",
                "decode": "hex",
                "encode": "base64",
                "qos": 0,
            }
        )
    )
    out = republish(m, Context("raw/1", b'{"id": "a7"}'.hex().encode(), 1), ORIGIN)
    assert out is not None
    assert (out.topic, out.payload, out.qos) == ("dev/a7", b"eyJpZCI6ICJhNyJ9", 0)
    assert out.properties.content_type == "text/plain; charset=base64"


def test_payload_field_without_json() -> None:
    m = CompiledMapping(
        LoopbackMapping.model_validate({"source": "raw/#", "target": "dev/{payload.id}"})
    )
    with pytest.raises(MappingError):
        republish(m, Context("raw/1", b"\x00\x01"), ORIGIN)


def test_deeply_nested_json_is_a_mapping_error() -> None:
    # 100 kB of '[': json.loads raises RecursionError, not a JSONDecodeError
    m = CompiledMapping(
        LoopbackMapping.model_validate({"source": "raw/#", "target": "dev/{payload.id}"})
    )
    with pytest.raises(MappingError, match="payload fields need a JSON payload"):
        republish(m, Context("raw/1", b"[" * 100_000), ORIGIN)
