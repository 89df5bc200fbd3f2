"""SOME/IP serialization of YAML layouts: golden bytes written from the AUTOSAR rules by
hand (not by the codec), round trips, and errors that name the field."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.someip.codec import LayoutError, compile_layout

VEHICLE_SPEED = {
    "type": "struct",
    "fields": [
        {"name": "speed_kmh", "type": "float32"},
        {"name": "valid", "type": "bool"},
        {"name": "gear", "type": "int8"},
        {"name": "source", "type": "string"},
        {"name": "wheels", "type": "array", "items": "uint16", "length": 4},
    ],
}


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


@pytest.mark.parametrize(
    ("spec", "value", "wire"),
    [
        ("uint8", 0xAB, "ab"),
        ("uint16", 0x1234, "1234"),
        ("uint32", 0xDEADBEEF, "deadbeef"),
        ("uint64", 2**64 - 1, "ffffffffffffffff"),
        ("int8", -1, "ff"),
        ("int16", -2, "fffe"),
        ("int32", -0x80000000, "80000000"),
        ("int64", -3, "fffffffffffffffd"),
        ({"type": "uint16", "byte_order": "little"}, 0x1234, "3412"),
        ("float32", 1.5, "3fc00000"),
        ("float64", -2.0, "c000000000000000"),
        ("bool", True, "01"),
        ("bool", False, "00"),
        # dynamic string: 32-bit length (bytes after it), UTF-8 BOM, text, NUL
        ("string", "Hi", "00000006 efbbbf 4869 00"),
        ({"type": "string", "length_field": 8}, "", "04 efbbbf 00"),
        (
            {"type": "string", "encoding": "utf-16be", "length_field": 16},
            "Hi",
            "0008 feff 0048 0069 0000",
        ),
        ({"type": "string", "encoding": "utf-16le"}, "é", "00000006 fffe e900 0000"),
        # fixed-size string: BOM, text, NUL, zero padding to the size
        ({"type": "string", "length": 8}, "Hi", "efbbbf 4869 00 0000"),
        # fixed array: no length field; dynamic array: length field counts bytes
        ({"type": "array", "items": "uint16", "length": 3}, [1, 2, 3], "0001 0002 0003"),
        ({"type": "array", "items": "int16", "length_field": 16}, [1, -1], "0004 0001 ffff"),
        ({"type": "array", "items": "uint8"}, [], "00000000"),
        (
            {"type": "array", "items": {"type": "string", "length_field": 8}, "length_field": 8},
            ["a", "b"],
            "0c 05efbbbf6100 05efbbbf6200",
        ),
        # struct without and with a length field (bytes of its members)
        (
            {
                "type": "struct",
                "fields": [{"name": "a", "type": "uint8"}, {"name": "b", "type": "int16"}],
            },
            {"a": 1, "b": -1},
            "01 ffff",
        ),
        (
            {"type": "struct", "length_field": 16, "fields": [{"name": "a", "type": "uint8"}]},
            {"a": 7},
            "0001 07",
        ),
        (
            VEHICLE_SPEED,
            {"speed_kmh": 27.7, "valid": True, "gear": -1, "source": "abs", "wheels": [1, 2, 3, 4]},
            "41dd999a 01 ff 00000007efbbbf61627300 0001000200030004",
        ),
    ],
)
def test_golden_wire_bytes(spec: object, value: object, wire: str) -> None:
    layout = compile_layout(spec)
    assert layout.encode(value) == h(wire)
    assert layout.decode(h(wire)) == value


def test_json_both_ways_and_float32_shows_its_shortest_decimal() -> None:
    layout = compile_layout(VEHICLE_SPEED)
    text = b'{"speed_kmh":27.7,"valid":true,"gear":3,"source":"\xc3\xa9","wheels":[9,9,9,9]}'
    wire = layout.from_json(text)
    assert layout.to_json(wire) == text


def test_non_finite_floats_are_strings_in_json() -> None:
    layout = compile_layout({"type": "array", "items": "float64", "length": 3})
    wire = layout.from_json(b'["NaN", "Infinity", "-Infinity"]')
    values = struct.unpack(">3d", wire)
    assert math.isnan(values[0]) and values[1:] == (math.inf, -math.inf)
    assert layout.to_json(wire) == b'["NaN","Infinity","-Infinity"]'


def test_utf16_strings_accept_either_bom() -> None:
    layout = compile_layout({"type": "string", "encoding": "utf-16be"})
    assert layout.decode(h("00000006 fffe 4100 0000")) == "A"


def test_string_terminators() -> None:
    utf16 = compile_layout({"type": "string", "encoding": "utf-16be"})
    # An odd last byte of a UTF-16 string is ignored (as the SOME/IP spec says).
    assert utf16.decode(h("00000007 feff 0041 0000 ff")) == "A"
    with pytest.raises(LayoutError, match="a NUL before its end"):
        utf16.decode(h("00000008 feff 0000 0041 0000"))
    # A fixed-size string ends at its first NUL; zeros pad the rest.
    assert compile_layout({"type": "string", "length": 8}).decode(h("efbbbf 41 00 000000")) == "A"


def test_a_struct_with_a_length_field_skips_members_it_does_not_know() -> None:
    layout = compile_layout(
        {"type": "struct", "length_field": 8, "fields": [{"name": "a", "type": "uint8"}]}
    )
    assert layout.decode(h("03 07 aabb")) == {"a": 7}


def test_named_layouts_nest() -> None:
    named = {
        "Wheel": {"type": "struct", "fields": [{"name": "rpm", "type": "uint16"}]},
        "Axle": {"type": "array", "items": "Wheel", "length": 2},
    }
    layout = compile_layout(
        {"type": "struct", "fields": [{"name": "front", "type": "Axle"}]}, named
    )
    value = {"front": [{"rpm": 1}, {"rpm": 2}]}
    assert layout.encode(value) == h("0001 0002")
    assert layout.decode(h("0001 0002")) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"speed_kmh": 1, "valid": True, "gear": 0, "source": "", "wheels": [1, 2, 70000, 4]},
            "$.wheels[2]: expected an integer from 0 to 65535 (uint16), got 70000",
        ),
        (
            {"speed_kmh": 1, "valid": 1, "gear": 0, "source": "", "wheels": [1, 2, 3, 4]},
            "$.valid: expected true or false, got 1",
        ),
        (
            {"speed_kmh": "fast", "valid": True, "gear": 0, "source": "", "wheels": [1, 2, 3, 4]},
            '$.speed_kmh: expected a number (float32), got "fast"',
        ),
        (
            {"speed_kmh": 1e39, "valid": True, "gear": 0, "source": "", "wheels": [1, 2, 3, 4]},
            "$.speed_kmh: 1e+39 does not fit a float32",
        ),
        (
            {"speed_kmh": 1, "valid": True, "gear": 0, "source": "", "wheels": [1]},
            "$.wheels: expected 4 items, got 1",
        ),
        ({"speed_kmh": 1, "valid": True, "gear": 0, "wheels": [1, 2, 3, 4]}, "$.source: missing"),
        (
            {
                "speed_kmh": 1,
                "valid": True,
                "gear": 0,
                "source": "",
                "wheels": [1, 2, 3, 4],
                "x": 1,
            },
            "$: unknown field 'x'",
        ),
        ([1], "$: expected an object, got [1]"),
        (
            {"speed_kmh": 1, "valid": True, "gear": 0, "source": "a\x00", "wheels": [1, 2, 3, 4]},
            "$.source: a string cannot contain NUL",
        ),
        (  # JSON "\ud800": a lone surrogate, no Unicode text (raised UnicodeEncodeError)
            {"speed_kmh": 1, "valid": True, "gear": 0, "source": "\ud800", "wheels": [1] * 4},
            "$.source: the string is not Unicode text: surrogates not allowed",
        ),
    ],
)
def test_encoding_errors_name_the_field(value: object, message: str) -> None:
    with pytest.raises(LayoutError) as caught:
        compile_layout(VEHICLE_SPEED).encode(value)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ("41dd999a 01", "$.gear: needs 1 bytes at offset 5, 0 left"),
        (
            "41dd999a 02 00 00000004efbbbf00 0001000200030004",
            "$.valid: expected a boolean 0 or 1, got 2",
        ),
        ("41dd999a 01 00 000000ff", "$.source: length field says 255 bytes at offset 10, 0 left"),
        (
            "41dd999a 01 00 00000004aabbcc00 0001000200030004",
            "$.source: the string does not start with its BOM",
        ),
        (
            "41dd999a 01 00 00000004efbbbf41 0001000200030004",
            "$.source: the string has no terminating NUL",
        ),
        (
            "41dd999a 01 00 00000005efbbbfff00 0001000200030004",
            "$.source: the string is not valid utf-8",
        ),
        (  # the NUL ends a dynamic-length string: one inside its length is malformed
            "41dd999a 01 00 00000007efbbbf61006200 0001000200030004",
            "$.source: the string has a NUL before its end (at byte 1 of 4 after the BOM)",
        ),
        (
            "41dd999a 01 00 00000006efbbbf610000 0001000200030004",
            "$.source: the string has a NUL before its end (at byte 1 of 3 after the BOM)",
        ),
        (
            "41dd999a 01 00 00000004efbbbf00 000100020003",
            "$.wheels: needs 8 bytes at offset 14, 6 left",
        ),
        (
            "41dd999a 01 00 00000004efbbbf00 0001000200030004 ff",
            "$: 1 bytes left over after the layout",
        ),
    ],
)
def test_decoding_errors_name_the_field(wire: str, message: str) -> None:
    with pytest.raises(LayoutError) as caught:
        compile_layout(VEHICLE_SPEED).decode(h(wire))
    assert str(caught.value).startswith(message)


def test_a_dynamic_array_reports_the_item_that_overruns() -> None:
    layout = compile_layout(
        {"type": "array", "items": "uint16", "length_field": 8, "max_length": 2}
    )
    with pytest.raises(LayoutError, match=r"^\$\[1\]: needs 2 bytes at offset 3, 1 left"):
        layout.decode(h("03 0001 00"))
    with pytest.raises(LayoutError, match=r"^\$: 3 items; at most 2 allowed"):
        layout.encode([1, 2, 3])
    with pytest.raises(LayoutError, match=r"^\$: not JSON"):
        layout.from_json(b"[1,")


def test_length_fields_that_overflow() -> None:
    layout = compile_layout({"type": "array", "items": "uint8", "length_field": 8})
    with pytest.raises(LayoutError, match="256 bytes do not fit a 8-bit length field"):
        layout.encode([0] * 256)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("uint17", "layout: unknown type 'uint17'"),
        ({"type": "string", "length_field": 12}, "layout.length_field: expected 8, 16 or 32"),
        (
            {"type": "string", "length_field": 0},
            "a string needs a length field or a fixed 'length'",
        ),
        ({"type": "string", "length": 2}, "layout.length: too small for the BOM and the NUL"),
        ({"type": "string", "encoding": "latin-1"}, "layout.encoding: expected utf-8"),
        ({"type": "array", "length": 2}, "layout: an array needs 'items'"),
        ({"type": "array", "items": "uint8", "length": 2, "length_field": 8}, "excludes"),
        ({"type": "struct", "fields": []}, "a struct needs a non-empty list of 'fields'"),
        (
            {"type": "struct", "fields": [{"type": "uint8"}]},
            "layout.fields[0]: a field needs a 'name'",
        ),
        (
            {
                "type": "struct",
                "fields": [{"name": "a", "type": "uint8"}, {"name": "a", "type": "bool"}],
            },
            "layout.fields[1].name: duplicate field 'a'",
        ),
        ({"type": "uint8", "length": 2}, "layout: unknown key 'length' for type uint8"),
        ({"type": "uint8", "byte_order": "middle"}, "layout.byte_order: expected big or little"),
        ({"type": "Loop"}, "layouts.Loop.items: layout 'Loop' contains itself"),
        (3, "layout: expected a type name or a mapping, got 3"),
    ],
)
def test_declaration_errors_name_the_key(spec: object, message: str) -> None:
    named = {"Loop": {"type": "array", "items": "Loop", "length": 1}}
    with pytest.raises(ValueError, match=None) as caught:
        compile_layout(spec, named)
    assert message in str(caught.value)


NESTED = {
    "type": "struct",
    "length_field": 32,
    "fields": [
        {"name": "n", "type": "int32"},
        {"name": "f", "type": "float64"},
        {"name": "ok", "type": "bool"},
        {"name": "tags", "type": "array", "items": {"type": "string", "encoding": "utf-16le"}},
        {
            "name": "points",
            "type": "array",
            "length_field": 16,
            "items": {
                "type": "struct",
                "fields": [{"name": "x", "type": "int16"}, {"name": "y", "type": "uint64"}],
            },
        },
    ],
}


@given(
    st.fixed_dictionaries(
        {
            "n": st.integers(-(2**31), 2**31 - 1),
            "f": st.floats(allow_nan=False, allow_infinity=False),
            "ok": st.booleans(),
            "tags": st.lists(
                st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))),
                max_size=4,
            ),
            "points": st.lists(
                st.fixed_dictionaries(
                    {"x": st.integers(-(2**15), 2**15 - 1), "y": st.integers(0, 2**64 - 1)}
                ),
                max_size=4,
            ),
        }
    )
)
def test_round_trip(value: dict[str, object]) -> None:
    layout = compile_layout(NESTED)
    assert layout.decode(layout.encode(value)) == value


def test_deeply_nested_json_is_a_layout_error() -> None:
    # 100 kB of '[': json.loads raises RecursionError, not a JSONDecodeError
    layout = compile_layout({"type": "array", "items": "uint8", "length_field": 8})
    with pytest.raises(LayoutError, match=r"^\$: not JSON"):
        layout.from_json(b"[" * 100_000)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16be", "utf-16le"])
def test_a_json_string_that_is_no_unicode_text_does_not_fit(encoding: str) -> None:
    layout = compile_layout({"type": "string", "encoding": encoding})
    with pytest.raises(LayoutError, match="the string is not Unicode text"):
        layout.from_json(b'"a\\udc00b"')
