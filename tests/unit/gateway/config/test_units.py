"""Durations and sizes: the spellings users write, the errors, and exact round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.config.units import format_duration, format_size, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("500ms", 0.5),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("7d", 604800.0),
        ("1h30m", 5400.0),
        ("1m 30s", 90.0),
        ("1.5s", 1.5),
        (".5s", 0.5),
        ("30 S", 30.0),
        ("0s", 0.0),
        ("10", 10.0),
        ("2.5", 2.5),
        (10, 10.0),
        (2.5, 2.5),
        (0, 0.0),
    ],
)
def test_durations_parse_to_float_seconds(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert type(parse_duration(text)) is float


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("30", None),
        ("abc", "expected a duration like 500ms, 30s, 5m, 1h or 7d, got 'abc'"),
        ("5x", "expected a duration like 500ms, 30s, 5m, 1h or 7d, got '5x'"),
        ("s", "expected a duration like 500ms, 30s, 5m, 1h or 7d, got 's'"),
        ("", "expected a duration like 500ms, 30s, 5m, 1h or 7d, got ''"),
        ("1h30", "expected a duration like 500ms, 30s, 5m, 1h or 7d, got '1h30'"),
        ("-3s", "expected a duration >= 0, got '-3s'"),
        (-1, "expected a duration >= 0, got -1"),
        (float("inf"), "expected a duration >= 0, got inf"),
        (True, "expected a duration like 500ms, 30s, 5m, 1h or 7d, got true"),
        (None, "expected a duration like 500ms, 30s, 5m, 1h or 7d, got null"),
    ],
)
def test_bad_durations_say_what_was_expected(value: object, message: str | None) -> None:
    if message is None:
        parse_duration(value)
        return
    with pytest.raises(ValueError) as caught:
        parse_duration(value)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0s"),
        (0.1, "100ms"),
        (1.5, "1500ms"),
        (30.0, "30s"),
        (90.0, "90s"),
        (300.0, "5m"),
        (5400.0, "90m"),
        (3600.0, "1h"),
        (604800.0, "7d"),
        (65535.0, "65535s"),
        (0.0005, 0.0005),
    ],
)
def test_durations_format_in_the_largest_exact_unit(seconds: float, text: object) -> None:
    assert format_duration(seconds) == text


@given(st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False))
def test_duration_round_trip_is_exact(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("64MB", 64_000_000),
        ("512KB", 512_000),
        ("1GiB", 1024**3),
        ("1gib", 1024**3),
        ("512KiB", 512 * 1024),
        ("64 MiB", 64 * 1024**2),
        ("2GB", 2_000_000_000),
        ("1TB", 10**12),
        ("1TiB", 1024**4),
        ("100B", 100),
        ("1.5KB", 1500),
        ("4096", 4096),
        (4096, 4096),
        (0, 0),
        (1024.0, 1024),
    ],
)
def test_sizes_parse_to_int_bytes(text: object, size: int) -> None:
    assert parse_size(text) == size
    assert type(parse_size(text)) is int


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("big", "expected a size like 512KB, 64MB or 1GiB, got 'big'"),
        ("12XB", "expected a size unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got '12XB'"),
        ("1.0000005MB", "expected a whole number of bytes, got '1.0000005MB'"),
        ("-1KB", "expected a size >= 0, got '-1KB'"),
        (-5, "expected a size >= 0, got -5"),
        (1.5, "expected a whole number of bytes >= 0, got 1.5"),
        (False, "expected a size like 512KB, 64MB or 1GiB, got false"),
    ],
)
def test_bad_sizes_say_what_was_expected(value: object, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_size(value)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, 0),
        (1, 1),
        (1000, "1KB"),
        (1024, "1KiB"),
        (1_000_000, "1MB"),
        (1024**2, "1MiB"),
        (64_000_000, "64MB"),
        (1024**3, "1GiB"),
        (268_435_455, 268_435_455),
    ],
)
def test_sizes_format_in_the_largest_exact_unit(size: int, text: object) -> None:
    assert format_size(size) == text


@given(st.integers(min_value=0, max_value=2**63))
def test_size_round_trip_is_exact(size: int) -> None:
    assert parse_size(format_size(size)) == size
