"""The JSON mapping of every IDL construct, its validation and its error paths."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import pytest

import idl_codegen
from idl_codegen import IdlValueError, TypeCodec, codec_for
from idl_codegen.loader import LoadedSchema
from tests.unit.idl_codegen.corpus import CASES


@cache
def kitchen() -> LoadedSchema:
    files, include_dirs = CASES["kitchen"]
    return idl_codegen.load(files, include_dirs=include_dirs)


def codec(name: str) -> TypeCodec:
    return kitchen().codec(name)


def sink_json(**changes: Any) -> dict[str, Any]:
    value = codec("kitchen::Sink").to_json(kitchen()["kitchen::Sink"]())
    value.update(changes)
    return value


def error_of(name: str, value: Any, strict: bool = True) -> str:
    with pytest.raises(IdlValueError) as caught:
        codec(name).from_json(value, strict=strict)
    return str(caught.value)


def test_default_sample_maps_to_the_documented_json() -> None:
    assert sink_json() == {
        "id": 0,
        "inner": {"i8": 0, "u8": 0, "o": 0, "s": 0, "us": 0, "l": 0, "ul": 0, "ll": 0,
                  "ull": 0, "i16": 0, "u16": 0, "i32": 0, "u32": 0, "i64": 0, "u64": 0,
                  "f": 0.0, "d": 0.0, "b": False, "c": "\x00", "w": "\x00"},
        "maybe_inner": None,
        "text": "", "bounded_text": "", "wide_text": "",
        "hash": "AAAAAAAAAAAAAAAAAAAAAA==", "hash_alias": "AAAAAAAAAAAAAAAAAAAAAA==",
        "blob": "", "small_blob": "", "grid": ["AAAA", "AAAA"], "u8_array": [0, 0, 0, 0],
        "chars": ["\x00", "\x00", "\x00"], "u8_seq": [], "colors": [], "shade": "WHITE",
        "lucky": 7, "ratio": 2.5, "flag": True, "label": "dflt", "favourite": "WHITE",
        "by_bool": {"discriminator": False, "no": ""},
        "by_enum": {"discriminator": "WHITE", "other": "AAAAAAAAAAAAAAAAAAAAAA=="},
        "by_octet": {"discriminator": 0},
        "by_unsigned": {"discriminator": 0, "zero": []},
        "unions": [],
        "inners": [codec("kitchen::Inner").to_json(kitchen()["kitchen::Inner"]())] * 2,
        "maybe_strings": None, "with_id": 0,
    }


def test_member_names_are_idl_names() -> None:
    keywords = kitchen()["kitchen::Keywords"](from_=1, class_=2)
    assert codec("kitchen::Keywords").to_json(keywords) == {
        "from": 1, "class": 2, "lambda": 0, "None": 0, "serialize": 0}
    back = codec("kitchen::Keywords").from_json({"from": 1, "class": 2, "lambda": 0,
                                                   "None": 0, "serialize": 0})
    assert back == keywords


def test_inherited_members_come_first() -> None:
    derived = kitchen()["kitchen::Derived"](base_id=4, base_values=[1], extra="x")
    assert list(codec("kitchen::Derived").to_json(derived)) == ["base_id", "base_values", "extra"]


def test_octets_are_base64_in_json_and_typed_like_cyclonedds_in_python() -> None:
    sink = codec("kitchen::Sink").from_json(sink_json(
        hash="AAECAwQFBgcICQoLDA0ODw==", blob="3q2+7w==", grid=["AQID", "BAUG"],
        u8_array=[1, 2, 3, 250], u8_seq=[9, 8]))
    assert sink.hash == bytes(range(16))
    assert sink.blob == [0xDE, 0xAD, 0xBE, 0xEF]
    assert sink.grid == [b"\x01\x02\x03", b"\x04\x05\x06"]
    assert sink.u8_array == bytes([1, 2, 3, 250])
    assert sink.u8_seq == [9, 8]
    # a list of numbers is accepted for octets too
    assert codec("kitchen::Sink").from_json(sink_json(blob=[1, 2])).blob == [1, 2]


def test_non_finite_floats_are_strings() -> None:
    sink = codec("kitchen::Sink").from_json(sink_json(ratio="-Infinity"))
    assert sink.ratio == -math.inf
    nan = codec("kitchen::Sink").from_json(sink_json(ratio="NaN"))
    assert math.isnan(nan.ratio)
    assert codec("kitchen::Sink").to_json(nan)["ratio"] == "NaN"
    assert b'"ratio":"NaN"' in codec("kitchen::Sink").dumps(nan)


def test_unions() -> None:
    by_enum = codec("kitchen::ByEnum")
    union = kitchen()["kitchen::ByEnum"]
    color = kitchen()["kitchen::Color"]
    assert by_enum.to_json(union(red=3)) == {"discriminator": "RED", "red": 3}
    assert by_enum.from_json({"discriminator": "BLUE", "green_or_blue": "x"}) == \
        union(discriminator=color.BLUE, value="x")
    # the discriminator may be left out when the member implies it
    assert by_enum.from_json({"green_or_blue": "x"}) == union(discriminator=color.GREEN, value="x")
    assert by_enum.from_json({"other": "AAAAAAAAAAAAAAAAAAAAAA=="}).discriminator == color.WHITE
    by_octet = codec("kitchen::ByOctet")
    assert by_octet.from_json({"discriminator": 9}) == \
        kitchen()["kitchen::ByOctet"](discriminator=9, value=None)
    tree = codec("kitchen::Tree")
    value = {"discriminator": 1, "branches": [{"discriminator": 0, "leaf": 4}]}
    assert tree.to_json(tree.from_json(value)) == value


def test_enum_discriminator_outside_the_literals_is_an_integer(write_idl: Any) -> None:
    """cyclonedds writes ``U(s=...)`` of a union over an enum with discriminator 3, no
    literal of E (a peer may send any such value): JSON gives it as the integer, and
    reads it back."""
    schema = idl_codegen.load(write_idl(
        "module j { enum E { A, B, C };\n"
        "union WithDef switch (E) { case A: long a; default: string s; };\n"
        "union NoDef switch (E) { case A: long a; case B: case C: short bc; }; };"))
    with_def, no_def = schema["j::WithDef"], schema["j::NoDef"]
    received = with_def.deserialize(with_def(s="hello").serialize())
    assert received.discriminator == 3
    json_codec = schema.codec("j::WithDef")
    assert json_codec.dumps(received) == b'{"discriminator":3,"s":"hello"}'
    back = json_codec.loads(b'{"discriminator":3,"s":"hello"}')
    assert back == received and back.serialize() == received.serialize()
    # an integer that is a literal's value converts as that literal
    assert json_codec.to_json(with_def(discriminator=0, value=4)) == {"discriminator": "A",
                                                                       "a": 4}
    nothing = no_def(discriminator=9, value=None)
    assert schema.codec("j::NoDef").to_json(nothing) == {"discriminator": 9}
    assert schema.codec("j::NoDef").from_json({"discriminator": 9}) == nothing
    for bad, message in [
            ({"discriminator": 0, "a": 1}, "$.discriminator: expected one of A, B, C, got 0 "
                                           "(an integer only for a value no literal has)"),
            ({"discriminator": 3, "a": 1},
             "$: member 'a' does not match discriminator 3, which selects 's'"),
            ({"discriminator": -1, "s": ""},
             "$.discriminator: -1 is out of range for an enum (0..4294967295)"),
            ({"discriminator": 2**32, "s": ""},
             "$.discriminator: 4294967296 is out of range for an enum (0..4294967295)"),
            ({"discriminator": True, "s": ""},
             "$.discriminator: expected one of A, B, C, got true")]:
        with pytest.raises(IdlValueError) as caught:
            json_codec.from_json(bad)
        assert str(caught.value) == message


@pytest.mark.parametrize(("changes", "message"), [
    ({"id": 2**31}, "$.id: 2147483648 is out of range for int32 (-2147483648..2147483647)"),
    ({"id": True}, "$.id: expected an integer (int32), got true"),
    ({"id": 1.0}, "$.id: expected an integer (int32), got 1.0"),
    ({"inner": {"c": "é"}}, '$.inner.c: expected one ASCII character, got "\\u00e9"'),
    ({"bounded_text": "123456789"}, "$.bounded_text: string of 9 bytes exceeds the bound 8"),
    ({"bounded_text": "ééééé"}, "$.bounded_text: string of 10 bytes exceeds the bound 8"),
    ({"text": "a\x00b"}, "$.text: strings cannot contain NUL characters"),
    ({"text": "\ud800"}, "$.text: string is not valid Unicode (lone surrogate)"),
    ({"hash": "AAAA"}, "$.hash: needs 16 octets, got 3"),
    ({"blob": "not base64!"}, "$.blob: expected base64 text"),
    ({"small_blob": "AAAAAAA="}, "$.small_blob: 5 octets exceed the bound 4"),
    ({"grid": ["AAAA"]}, "$.grid: array needs 2 elements, got 1"),
    ({"colors": ["RED", "PINK"]},
     '$.colors[1]: expected one of RED, GREEN, BLUE, WHITE, got "PINK"'),
    ({"u8_seq": [1, 256]}, "$.u8_seq[1]: 256 is out of range for uint8 (0..255)"),
    ({"ratio": "1.5"}, '$.ratio: expected a number (float64), got "1.5"'),
    ({"flag": 1}, "$.flag: expected true or false, got 1"),
    ({"unions": [{"red": 1}] * 4}, "$.unions: array of 4 exceeds the bound 3"),
    ({"by_enum": {"discriminator": "RED", "green_or_blue": "x"}},
     "$.by_enum: member 'green_or_blue' does not match discriminator \"RED\", which selects "
     "'red'"),
    ({"by_enum": {"discriminator": "RED"}},
     "$.by_enum: missing member 'red' for the discriminator"),
    ({"by_enum": {}}, "$.by_enum: expected 'discriminator' or a member of kitchen::ByEnum"),
    ({"by_enum": {"red": 1, "other": ""}}, "$.by_enum: a union holds one member, got red, other"),
    ({"by_octet": {"discriminator": 1, "one": "x"}},
     '$.by_octet.one: expected an integer (int32), got "x"'),
    ({"inners": [{}, {}]}, "$.inners[0]: missing member 'i8'"),
    ({"extra": 1}, "$: unknown member 'extra' of kitchen::Sink"),
    ({"maybe_inner": {"f": 1e39}},
     "$.maybe_inner.f: 1e+39 is out of range for float32"),
])
def test_invalid_values_name_the_member_path(changes: dict[str, Any], message: str) -> None:
    value = sink_json()
    for key, item in changes.items():
        value[key] = {**value[key], **item} if isinstance(item, dict) and key == "inner" \
            else item
    if "maybe_inner" in changes:
        value["maybe_inner"] = {**sink_json()["inner"], **changes["maybe_inner"]}
    assert error_of("kitchen::Sink", value) == message


def test_python_side_is_validated_too() -> None:
    sink = kitchen()["kitchen::Sink"](id=2**40)
    with pytest.raises(IdlValueError) as caught:
        codec("kitchen::Sink").to_json(sink)
    assert str(caught.value) == "$.id: 1099511627776 is out of range for int32 " \
                                "(-2147483648..2147483647)"
    with pytest.raises(IdlValueError) as caught:
        codec("kitchen::Sink").to_json(kitchen()["kitchen::Sink"](colors=[3]))
    assert str(caught.value) == "$.colors[0]: 3 is not a literal of enum kitchen::Color " \
                                "(RED, GREEN, BLUE, WHITE)"


def test_non_strict_input_fills_defaults_and_ignores_unknown_members() -> None:
    sink = codec("kitchen::Sink").from_json({"id": 5, "unknown": 1,
                                             "by_enum": {"discriminator": "RED"}}, strict=False)
    assert sink.id == 5 and sink.lucky == 7 and sink.label == "dflt"
    assert sink.by_enum.discriminator == kitchen()["kitchen::Color"].RED
    assert sink.by_enum.value == 0


def test_optional_members_may_be_absent_or_null() -> None:
    value = sink_json()
    del value["maybe_inner"]
    assert codec("kitchen::Sink").from_json(value).maybe_inner is None


def test_dumps_and_loads() -> None:
    sink = kitchen()["kitchen::Sink"](text="grüß", id=3)
    data = codec("kitchen::Sink").dumps(sink)
    assert isinstance(data, bytes) and "grüß".encode() in data
    assert codec("kitchen::Sink").loads(data) == sink
    with pytest.raises(IdlValueError) as caught:
        codec("kitchen::Sink").loads(b"{nope")
    assert str(caught.value).startswith("$: not valid JSON: ")


def test_codec_for_any_cyclonedds_class_is_cached() -> None:
    cls = kitchen()["kitchen::Inner"]
    assert codec_for(cls) is codec_for(cls)
    assert codec_for(cls).python_type is cls
    assert codec_for(cls).type_name == "kitchen::Inner"
    with pytest.raises(TypeError):
        codec_for(int)


def test_hand_written_cyclonedds_class() -> None:
    from cyclonedds.idl import make_idl_struct
    from cyclonedds.idl import types as t

    Reading: Any = make_idl_struct("Reading", "hand.Reading", {
        "sensor": t.bounded_str[8], "values": t.sequence[t.float32, 2]})
    reading_codec = codec_for(Reading)
    assert reading_codec.type_name == "hand::Reading"
    assert reading_codec.to_json(Reading("s1", [1.5])) == {"sensor": "s1", "values": [1.5]}
    assert reading_codec.from_json({"sensor": "s1", "values": [1.5]}) == Reading("s1", [1.5])


def test_too_deep_json_is_a_value_error_not_a_recursion_error() -> None:
    """100 kB of ``[`` (or a recursive type nested deeper than Python's recursion limit)
    raises IdlValueError, as every value that does not fit does."""
    for data in (b"[" * 100_000, b'{"a":' * 100_000, "[" * 100_000):
        with pytest.raises(IdlValueError) as caught:
            codec("kitchen::Sink").loads(data)
        assert str(caught.value) == "$: not valid JSON: nested too deeply"
    tree: dict[str, Any] = {"discriminator": 0, "leaf": 1}
    for _ in range(100_000):
        tree = {"discriminator": 1, "branches": [tree]}
    with pytest.raises(IdlValueError) as caught:
        codec("kitchen::Tree").from_json(tree)
    assert str(caught.value) == "$: nested too deeply (Python's recursion limit)"
    sample = kitchen()["kitchen::Tree"](discriminator=0, value=1)
    for _ in range(100_000):
        sample = kitchen()["kitchen::Tree"](discriminator=1, value=[sample])
    for convert in (codec("kitchen::Tree").to_json, codec("kitchen::Tree").dumps):
        with pytest.raises(IdlValueError) as caught:
            convert(sample)
        assert str(caught.value) == "$: nested too deeply (Python's recursion limit)"
