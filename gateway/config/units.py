"""Durations and sizes as users write them, and back.

Durations: ``"500ms"``, ``"30s"``, ``"5m"``, ``"1h"``, ``"7d"``, compounds such as
``"1h30m"``, or a plain number of seconds (``10``, ``2.5``, ``"10"``). They parse to
float seconds.

Sizes: ``"512B"``, ``"64KB"``, ``"1MB"``, ``"2GB"``, ``"1TB"`` (powers of 1000),
``"512KiB"``, ``"64MiB"``, ``"1GiB"``, ``"1TiB"`` (powers of 1024), or a plain integer
number of bytes. Units are case-insensitive; a space may separate number and unit.
They parse to int bytes.

The formatters pick the largest unit that represents the value exactly, so
``parse_duration(format_duration(x)) == x`` and ``parse_size(format_size(n)) == n``.
Every parse error is a ``ValueError`` whose message reads ``expected ..., got ...``.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from gateway.config.shown import show_value

__all__ = [
    "DURATION_UNITS",
    "SIZE_UNITS",
    "format_duration",
    "format_size",
    "parse_duration",
    "parse_size",
]

#: Duration units and their length in seconds, longest first.
DURATION_UNITS: dict[str, Fraction] = {
    "d": Fraction(86400),
    "h": Fraction(3600),
    "m": Fraction(60),
    "s": Fraction(1),
    "ms": Fraction(1, 1000),
}

#: Size units (lower-cased) and their length in bytes.
SIZE_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}

# Spelling of each size unit in formatted output, largest first.
_SIZE_SPELLING: tuple[tuple[str, int], ...] = tuple(
    sorted(
        (
            ("TiB", 1024**4),
            ("TB", 1000**4),
            ("GiB", 1024**3),
            ("GB", 1000**3),
            ("MiB", 1024**2),
            ("MB", 1000**2),
            ("KiB", 1024),
            ("KB", 1000),
        ),
        key=lambda item: -item[1],
    )
)

_NUMBER = r"\d+(?:\.\d+)?|\.\d+"
_PLAIN_NUMBER = re.compile(rf"\s*(?:{_NUMBER})\s*")
_DURATION_TERM = re.compile(rf"\s*({_NUMBER})\s*(ms|s|m|h|d)", re.IGNORECASE)
_SIZE = re.compile(rf"\s*({_NUMBER})\s*([a-z]*)\s*", re.IGNORECASE)

_DURATION_HINT = "a duration like 500ms, 30s, 5m, 1h or 7d"
_SIZE_HINT = "a size like 512KB, 64MB or 1GiB"


def parse_duration(value: object) -> float:
    """Parse a duration (``"30s"``, ``"1h30m"``, ``10``) into float seconds (>= 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected {_DURATION_HINT}, got {show_value(value)}")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"expected a duration >= 0, got {show_value(value)}")
        return float(value)
    text = value.strip()
    if _PLAIN_NUMBER.fullmatch(text):
        return float(text)
    total = Fraction(0)
    position = 0
    for match in _DURATION_TERM.finditer(text):
        if match.start() != position:
            break
        total += Fraction(match.group(1)) * DURATION_UNITS[match.group(2).lower()]
        position = match.end()
    if position == 0 or position != len(text):
        if text.startswith("-"):
            raise ValueError(f"expected a duration >= 0, got {show_value(value)}")
        raise ValueError(f"expected {_DURATION_HINT}, got {show_value(value)}")
    return float(total)


def format_duration(seconds: float) -> str | float:
    """Spell float seconds in the largest unit that is exact (``604800.0 -> "7d"``).

    Values that no unit represents exactly come back as the plain number of seconds,
    which :func:`parse_duration` reads back unchanged.
    """
    if seconds == 0:
        return "0s"
    for unit, length in DURATION_UNITS.items():
        count = round(seconds / float(length))
        if count > 0:
            text = f"{count}{unit}"
            if parse_duration(text) == seconds:
                return text
    return float(seconds)


def parse_size(value: object) -> int:
    """Parse a size (``"64MB"``, ``"1GiB"``, ``4096``) into int bytes (>= 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected {_SIZE_HINT}, got {show_value(value)}")
    if isinstance(value, float):
        if not value.is_integer() or value < 0:
            raise ValueError(f"expected a whole number of bytes >= 0, got {show_value(value)}")
        return int(value)
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected a size >= 0, got {show_value(value)}")
        return value
    match = _SIZE.fullmatch(value)
    if match is None:
        if value.strip().startswith("-"):
            raise ValueError(f"expected a size >= 0, got {show_value(value)}")
        raise ValueError(f"expected {_SIZE_HINT}, got {show_value(value)}")
    unit = match.group(2).lower() or "b"
    if unit not in SIZE_UNITS:
        units = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"
        raise ValueError(f"expected a size unit ({units}), got {show_value(value)}")
    amount = Fraction(match.group(1)) * SIZE_UNITS[unit]
    if amount.denominator != 1:
        raise ValueError(f"expected a whole number of bytes, got {show_value(value)}")
    return amount.numerator


def format_size(size: int) -> str | int:
    """Spell int bytes in the largest unit that is exact (``67108864 -> "64MiB"``).

    Sizes below 1KB, or that no unit divides, come back as the plain int.
    """
    for unit, length in _SIZE_SPELLING:
        if size and size % length == 0:
            return f"{size // length}{unit}"
    return size
