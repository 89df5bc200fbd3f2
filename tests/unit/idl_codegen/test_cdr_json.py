"""The direct CDR <-> JSON transcoder agrees byte for byte with cyclonedds + the JSON
codec, refuses what it does not cover, and never accepts what the codec refuses."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import idl_codegen
from idl_codegen.cdr_json import CdrError, Transcoder, transcoder_for
from idl_codegen.loader import LoadedSchema
from tests.unit.idl_codegen.corpus import CASES, IDL
from tests.unit.idl_codegen.strategies import samples

FAST = IDL / "cdr" / "fast.idl"


@cache
def fast() -> LoadedSchema:
    return idl_codegen.load(FAST)


@cache
def ros2() -> LoadedSchema:
    files, include_dirs = CASES["ros2"]
    return idl_codegen.load(files, include_dirs=include_dirs)


def transcoder(schema: LoadedSchema, name: str) -> Transcoder:
    found = transcoder_for(schema.codec(name).schema, schema.codec(name).type_name)
    assert found is not None
    return found


def _non_finite(value: Any) -> bool:
    text = json.dumps(value)
    return "Infinity" in text or "NaN" in text


def _check(schema: LoadedSchema, name: str, sample: Any) -> None:
    codec = schema.codec(name)
    fast_path = transcoder(schema, name)
    data = sample.serialize()
    try:
        expected = codec.dumps(sample)
    except idl_codegen.IdlValueError:
        with pytest.raises(CdrError):
            fast_path.to_json(data)
        return
    assert fast_path.to_json(data) == expected
    value = codec.to_json(sample)
    try:
        assert fast_path.from_json(value) == data
    except CdrError:
        assert _non_finite(value)  # "NaN" and "Infinity" take the general path


_SETTINGS = settings(max_examples=60, deadline=None,
                     suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("name", ["fast::Big", "fast::Small", "fast::Value", "fast::Wheel",
                                  "fast::ByEnum", "fast::ByBool", "fast::Sparse"])
def test_samples_of_every_covered_construct_agree_with_cyclonedds(name: str) -> None:
    @_SETTINGS
    @given(samples(fast()[name]))
    def check(sample: Any) -> None:
        _check(fast(), name, sample)

    check()


@pytest.mark.parametrize("name", ["sensor_msgs::msg::dds_::Imu_",
                                  "sensor_msgs::msg::dds_::NavSatFix_",
                                  "sensor_msgs::msg::dds_::PointCloud2_",
                                  "geometry_msgs::msg::dds_::PoseStamped_"])
def test_ros2_messages_agree_with_cyclonedds(name: str) -> None:
    @_SETTINGS
    @given(samples(ros2()[name]))
    def check(sample: Any) -> None:
        _check(ros2(), name, sample)

    check()


def test_types_outside_the_direct_path_get_none(write_idl: Any) -> None:
    path: Path = write_idl("""
        module m {
          @appendable struct A { long x; };
          @mutable struct Mu { long x; };
          @final struct O { @optional long x; };
          @final struct W { wchar c; };
          @final struct HasA { A a; };
          enum E { ONE };
        };""")
    loaded = idl_codegen.load(path)
    for name in ("m::A", "m::Mu", "m::O", "m::W", "m::HasA", "m::E"):
        codec = loaded.codec(name)
        assert transcoder_for(codec.schema, codec.type_name) is None, name


def test_foreign_encodings_and_malformed_samples_raise_cdr_error() -> None:
    small = fast()["fast::Small"]
    fast_path = transcoder(fast(), "fast::Small")
    data = small(id=1, seq=2, value=0.5, name="x").serialize()
    for bad in (
        b"\x00\x00" + data[2:],  # big endian
        b"\x00\x07" + data[2:],  # XCDR2
        data[:-3],  # truncated string
        data[:-1] + b"\x01",  # no NUL at the end of the string
        data[:8],
        b"",
    ):
        with pytest.raises(CdrError):
            fast_path.to_json(bad)
    wheel = transcoder(fast(), "fast::Wheel")
    data = fast()["fast::Wheel"](index=1, pressure=2.0, tag="a", ok=True).serialize()
    with pytest.raises(CdrError):  # a boolean that is neither 0 nor 1
        wheel.to_json(data[:-1] + b"\x02")


@pytest.mark.parametrize("value", [
    {"id": True, "seq": 1, "value": 1.0, "name": "x"},  # a boolean is no integer
    {"id": 2**31, "seq": 1, "value": 1.0, "name": "x"},  # out of range
    {"id": 1, "seq": 2**31, "value": 1.0, "name": "x"},
    {"id": 1, "seq": 1, "value": "1.0", "name": "x"},
    {"id": 1, "seq": 1, "value": 1.0, "name": "x\x00y"},
    {"id": 1, "seq": 1, "value": 1.0},  # missing member
    {"id": 1, "seq": 1, "value": 1.0, "name": "x", "extra": 1},  # unknown member
    {"id": 1, "seq": 1, "value": None, "name": "x"},
    [1, 1, 1.0, "x"],
])
def test_what_the_codec_refuses_the_direct_path_refuses_too(value: Any) -> None:
    codec = fast().codec("fast::Small")
    with pytest.raises(idl_codegen.IdlValueError):
        codec.from_json(value)
    with pytest.raises(CdrError):
        transcoder(fast(), "fast::Small").from_json(value)


def test_bounds_and_float32_range_are_checked() -> None:
    big = fast().codec("fast::Big")
    value = big.to_json(big.from_json(big.to_json(fast()["fast::Big"]()), strict=False))
    fast_path = transcoder(fast(), "fast::Big")
    assert fast_path.from_json(value) == big.from_json(value).serialize()
    for change in ({"short_text": "123456789"}, {"fs": [1.0] * 6}, {"f": 3.5e38},
                   {"vin": "x" * 17}, {"cov": [0.0] * 8}):
        with pytest.raises(CdrError):
            fast_path.from_json({**value, **change})
        with pytest.raises(idl_codegen.IdlValueError):
            big.from_json({**value, **change})


def test_member_values_come_with_the_json() -> None:
    codec = fast().codec("fast::Big")
    extractor = transcoder_for(codec.schema, "fast::Big",
                               ["vin", "shift", "v.x", "text", "b", "c", "tail8"])
    assert extractor is not None
    sample = codec.from_json(codec.to_json(fast()["fast::Big"]()), strict=False)
    sample.vin, sample.c, sample.text, sample.b = "WVW1", "Q", "h\u00e9", True
    sample.v.x = 2.5
    text, values = extractor.to_json(sample.serialize())
    assert text == codec.dumps(sample)
    assert values == ("WVW1", "PARK", 2.5, "h\u00e9", True, "Q", 0)
    # inside a sequence, an array or a union there is no single value
    for path in ("wheels.0.index", "vs.0.x", "value.number", "nope"):
        assert transcoder_for(codec.schema, "fast::Big", [path]) is None


_ENUM_UNIONS = """
    module m {
      enum E { A, B, C };
      @final union WithDef switch (E) { case A: long a; case C: double c; default: string s; };
      @final union NoDef switch (E) { case A: long a; case B: string b; };
      @final struct Holder { short head; WithDef u; NoDef n; long tail; };
    };"""


def test_enum_unions_with_a_default_member_agree_with_cyclonedds(write_idl: Any) -> None:
    """Every branch of a union over an enum with a ``default`` member, including the
    discriminator values that select the default: a literal no case has (B), the value
    cyclonedds writes for the default member (3), and values outside the enum (7,
    2**32 - 1), which the JSON codec gives as integers."""
    loaded = idl_codegen.load(write_idl(_ENUM_UNIONS))
    with_def, no_def, holder = (loaded[name] for name in ("m::WithDef", "m::NoDef", "m::Holder"))
    enum: Any = loaded["m::E"]
    unions = [with_def(a=-5), with_def(c=2.5), with_def(s="cyclonedds' default"),
              with_def(discriminator=enum.B, value="b"), with_def(discriminator=7, value="7"),
              with_def(discriminator=2**32 - 1, value="max")]
    others = [no_def(a=1), no_def(b="b"), no_def(discriminator=enum.C, value=None),
              no_def(discriminator=9, value=None)]
    samples = [*unions, *others, *(holder(head=1, u=u, n=n, tail=-1)
                                    for u, n in zip(unions, (others * 2)[:6], strict=True))]
    seen: set[Any] = set()
    for sample in samples:
        name = sample.__idl_typename__
        codec = loaded.codec(name)
        fast_path = transcoder(loaded, name)
        data = sample.serialize()
        expected = codec.dumps(type(sample).deserialize(data))
        assert fast_path.to_json(data) == expected
        value = json.loads(expected)
        assert fast_path.from_json(value) == codec.from_json(value).serialize() == data
        if name == "m::WithDef":
            seen.add(value["discriminator"])
    assert seen == {"A", "C", 3, "B", 7, 2**32 - 1}


@pytest.mark.parametrize("value", [
    {"discriminator": 1, "s": "a literal's value as an integer"},
    {"discriminator": 2**32, "s": "beyond 32 bits"},
    {"discriminator": -1, "s": "negative"},
    {"discriminator": True, "s": "a boolean"},
    {"discriminator": "D", "s": "no such literal"},
    {"discriminator": 3, "a": 1},  # 3 selects the default member
])
def test_enum_discriminators_the_codec_refuses_the_direct_path_refuses(
        write_idl: Any, value: Any) -> None:
    loaded = idl_codegen.load(write_idl(_ENUM_UNIONS))
    with pytest.raises(idl_codegen.IdlValueError):
        loaded.codec("m::WithDef").from_json(value)
    with pytest.raises(CdrError):
        transcoder(loaded, "m::WithDef").from_json(value)


def test_numbers_no_float_holds_are_refused_both_ways(write_idl: Any) -> None:
    # a 400-digit integer raised OverflowError; 1e400 (inf once parsed) was taken as
    # Infinity, for float32 too, and the direct path wrote it
    path = write_idl("module m { @final struct S { double d; float f; sequence<double> ds;"
                     " float fa[2]; }; };")
    codec = idl_codegen.load(path).codec("m::S")
    direct = transcoder_for(codec.schema, "m::S")
    assert direct is not None
    huge = "1" + "0" * 400
    for text in (f'{{"d": {huge}, "f": 1, "ds": [], "fa": [0, 0]}}',
                 '{"d": 1e400, "f": 1, "ds": [], "fa": [0, 0]}',
                 '{"d": 1, "f": -1e400, "ds": [], "fa": [0, 0]}',
                 '{"d": 1, "f": 1, "ds": [1e400], "fa": [0, 0]}',
                 f'{{"d": 1, "f": 1, "ds": [{huge}], "fa": [0, 0]}}',
                 '{"d": 1, "f": 1, "ds": [], "fa": [0, 1e400]}',
                 '{"d": 1, "f": 1, "ds": [], "fa": [NaN, 0]}'):
        with pytest.raises(idl_codegen.IdlValueError, match="out of range for float"):
            codec.loads(text)
        with pytest.raises(CdrError):
            direct.from_json(json.loads(text))
    sample = codec.loads('{"d": "Infinity", "f": "-Infinity", "ds": ["NaN"], "fa": [0, 0]}')
    assert codec.to_json(sample)["d"] == "Infinity"
