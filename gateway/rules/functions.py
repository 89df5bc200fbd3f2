"""The functions a rule statement may call: strings, math, JSON, time, topics, types.

``FUNCTIONS`` maps a lower-case name to ``(function, min_args, max_args)`` (``None``: any
number). A function receives evaluated arguments; ``NULL`` (None) arguments give NULL
unless the function is about NULL (``coalesce``, ``is_null``, ...). A function that
fails (a bad argument) raises ``RuleEvaluationError``: the rule counts a failure.
Names follow EMQX's rule language where it has one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext
from functools import lru_cache
from typing import Any

from broker_core.errors import EdgebusError

__all__ = [
    "FUNCTIONS",
    "RuleEvaluationError",
    "remainder",
    "to_json",
    "to_number",
    "to_text",
]


class RuleEvaluationError(EdgebusError):
    """A rule's expression failed on a message (a bad argument, a division by zero)."""


def to_text(value: Any) -> str:
    """A value as text: strings as they are, JSON for lists and objects."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list | tuple):
        return to_json(value)
    return str(value)


def _default(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _finite(value: Any) -> Any:
    """``value`` with each number that is not finite (inf, NaN) as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def to_json(value: Any) -> str:
    """Compact JSON; bytes become base64 text; a number that is not finite (inf, NaN,
    which JSON has no word for) becomes null, as the API's ``/rules/test`` shows it."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_default,
                          allow_nan=False)  # fmt: skip
    except ValueError:  # a number that is not finite: rare, so looked for only then
        return json.dumps(_finite(value), separators=(",", ":"), ensure_ascii=False,
                          default=_default)  # fmt: skip


#: Numeric text: an optional sign, digits, an optional fraction and exponent (no spaces,
#: no ``inf``, ``nan``, ``1_000`` or ``0x10``, which Python's ``float()`` would take).
_NUMBER = re.compile(r"[-+]?(?:(\d+)|\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?", re.ASCII)
_NUMBER_BYTES = re.compile(_NUMBER.pattern.encode("ascii"))


def to_number(value: Any) -> int | float:
    """A number, or numeric text as its number (an integer when it has no fraction or
    exponent); ``RuleEvaluationError`` for anything else, a boolean too (as EMQX's)."""
    if isinstance(value, int | float) and type(value) is not bool:
        return value
    if isinstance(value, str):
        match = _NUMBER.fullmatch(value)
    elif isinstance(value, bytes):
        match = _NUMBER_BYTES.fullmatch(value)  # type: ignore[assignment]
    else:
        match = None
    if match is not None:
        whole = match.group(1) is not None and match.end(1) == match.end()
        return int(value) if whole else float(value)
    shown = ("true" if value else "false") if type(value) is bool else repr(value)
    raise RuleEvaluationError(f"not a number: {shown}")


def remainder(x: int | float, y: int | float) -> int | float:
    """``x % y`` / ``x MOD y`` / ``mod(x, y)``: Erlang's ``rem``, truncated toward zero
    (the sign of ``x``: ``-7 % 3`` is -1); ``fmod`` for floats."""
    if y == 0:
        raise RuleEvaluationError("division by zero")
    if isinstance(x, int) and isinstance(y, int):
        result = abs(x) % abs(y)
        return -result if x < 0 else result
    return math.fmod(x, y)


def _nulls(function: Callable[..., Any]) -> Callable[..., Any]:
    """NULL in, NULL out."""

    def wrapped(*args: Any) -> Any:
        if any(arg is None for arg in args):
            return None
        return function(*args)

    wrapped.__name__ = function.__name__
    return wrapped


# -- strings ------------------------------------------------------------------------------


def _substr(text: str, start: Any, length: Any = None) -> str:
    begin = int(to_number(start))
    if length is None:
        return text[begin:]
    return text[begin : begin + int(to_number(length))]


def _split(text: str, separator: str = "/", *_: Any) -> list[str]:
    return [part for part in text.split(separator) if part != ""]


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise RuleEvaluationError(f"bad regular expression {pattern!r}: {exc}") from exc


def _pad(text: str, length: Any, direction: str = "trailing", char: str = " ") -> str:
    width = int(to_number(length))
    if direction == "leading":
        return text.rjust(width, char[:1] or " ")
    if direction == "both":
        return text.center(width, char[:1] or " ")
    return text.ljust(width, char[:1] or " ")


# -- topics -------------------------------------------------------------------------------


def _topic_level(topic: str, index: Any) -> str | None:
    """The ``index``-th level (1-based; negative counts from the end) of a topic."""
    levels = topic.split("/")
    n = int(to_number(index))
    if n == 0 or abs(n) > len(levels):
        return None
    return levels[n - 1] if n > 0 else levels[n]


def _nth(index: Any, items: Any) -> Any:
    n = int(to_number(index))
    if not isinstance(items, list | tuple) or n < 1 or n > len(items):
        return None
    return items[n - 1]


def _topic_matches(topic: str, topic_filter: str) -> bool:
    from broker_core.mqtt.topics import filter_matches

    return filter_matches(topic_filter, topic)


# -- JSON ---------------------------------------------------------------------------------


def _json_decode(text: Any) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError) as exc:
        raise RuleEvaluationError(f"not JSON: {exc}") from exc


def _map_get(key: Any, mapping: Any, default: Any = None) -> Any:
    if isinstance(mapping, str):
        mapping = _json_decode(mapping)
    node = mapping
    for part in str(key).split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return default
    return node


def _map_put(key: Any, value: Any, mapping: Any) -> dict[str, Any]:
    out = dict(mapping) if isinstance(mapping, dict) else {}
    out[str(key)] = value
    return out


def _map_keys(mapping: Any) -> list[Any]:
    return list(mapping) if isinstance(mapping, dict) else []


def _map_values(mapping: Any) -> list[Any]:
    return list(mapping.values()) if isinstance(mapping, dict) else []


# -- time ---------------------------------------------------------------------------------

_UNITS = {"second": 1, "millisecond": 1_000, "microsecond": 1_000_000, "nanosecond": 10**9}


def _unit(name: Any) -> int:
    try:
        return _UNITS[str(name)]
    except KeyError:
        raise RuleEvaluationError(f"unknown time unit {name!r}: one of {sorted(_UNITS)}") from None


def _now_timestamp(unit: Any = "second") -> int:
    return time.time_ns() * _unit(unit) // 10**9


def _to_rfc3339(timestamp: Any, unit: Any = "second") -> str:
    seconds = to_number(timestamp) / _unit(unit)
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _rfc3339_to_unix(text: str, unit: Any = "second") -> int:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise RuleEvaluationError(f"not an RFC 3339 time: {text!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * _unit(unit))


_OFFSET = re.compile(r"([+-])(\d{2}):?(\d{2})?", re.ASCII)


def _zone(offset: Any) -> tzinfo | None:
    """The time zone of an offset (EMQX's): ``Z`` (UTC), ``+08:00`` / ``-0230`` / ``+08``,
    an integer of seconds east of UTC, or ``local`` (None: the machine's zone)."""
    if isinstance(offset, int | float) and not isinstance(offset, bool):
        seconds = offset
    elif isinstance(offset, str) and offset in ("Z", "z", ""):
        return UTC
    elif isinstance(offset, str) and offset == "local":
        return None
    elif isinstance(offset, str) and (found := _OFFSET.fullmatch(offset)) is not None:
        sign, hours, minutes = found.groups()
        seconds = (int(hours) * 3600 + int(minutes or 0) * 60) * (-1 if sign == "-" else 1)
    else:
        raise RuleEvaluationError(
            f"bad time offset {offset!r}: 'Z', '+08:00', '-02:30', 'local' or seconds"
        )
    try:
        return timezone(timedelta(seconds=seconds))
    except (ValueError, OverflowError) as exc:
        raise RuleEvaluationError(f"bad time offset {offset!r}: {exc}") from None


def _format_date(unit: Any, offset: Any, pattern: str, timestamp: Any = None) -> str:
    scale = _unit(unit)
    seconds = time.time() if timestamp is None else to_number(timestamp) / scale
    try:
        return datetime.fromtimestamp(seconds, _zone(offset)).strftime(to_text(pattern))
    except (ValueError, OverflowError, OSError) as exc:
        raise RuleEvaluationError(f"format_date: {exc}") from exc


# -- types --------------------------------------------------------------------------------


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off", ""):
            return False
        raise RuleEvaluationError(f"not a boolean: {value!r}")
    return bool(value)


def _int(value: Any) -> int:
    if type(value) is bool:  # int(true) is 1, as EMQX's
        return int(value)
    number = to_number(value)
    try:
        return int(number)
    except (ValueError, OverflowError) as exc:  # inf, NaN
        raise RuleEvaluationError(f"int: {exc}") from exc


def _round(value: Any, digits: Any = 0) -> int | float:
    """Half away from zero, as EMQX's (Erlang's ``round``): round(2.5) is 3, round(-2.5)
    -3; with ``digits``, on the number as written (round(2.675, 2) is 2.68)."""
    number, places = to_number(value), int(to_number(digits))
    if isinstance(number, int) and places >= 0:
        return number
    if isinstance(number, float) and not math.isfinite(number):
        raise RuleEvaluationError(f"round: {number} is not a finite number")
    if isinstance(number, float) and places <= 0 and abs(number) >= 2**52:
        number = int(number)  # a float this large is an integer already
        if places == 0:
            return number
    with localcontext() as context:
        context.prec, context.Emax, context.Emin = 800, 1000, -1000
        try:
            rounded = Decimal(repr(number)).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)
        except InvalidOperation:  # more digits than a float has: nothing to round
            return number
    return int(rounded) if places <= 0 else float(rounded)


def _find(text: str, part: str, direction: str = "leading") -> str:
    """EMQX's ``find``: ``text`` from the first (``leading``) or last (``trailing``)
    occurrence of ``part`` on; "" when there is none."""
    if direction not in ("leading", "trailing"):
        raise RuleEvaluationError(f"find: direction {direction!r}: 'leading' or 'trailing'")
    at = text.find(part) if direction == "leading" else text.rfind(part)
    return "" if at < 0 else text[at:]


def _mod(x: Any, y: Any) -> int | float:
    return remainder(to_number(x), to_number(y))


def _coalesce(*args: Any) -> Any:
    return next((arg for arg in args if arg is not None), None)


def _math(function: Callable[..., float]) -> Callable[..., Any]:
    def wrapped(*args: Any) -> Any:
        try:
            return function(*(to_number(arg) for arg in args))
        except (ValueError, OverflowError, ZeroDivisionError) as exc:
            raise RuleEvaluationError(f"{function.__name__}: {exc}") from exc

    wrapped.__name__ = function.__name__
    return wrapped


def _hash(name: str) -> Callable[[Any], str]:
    def digest(value: Any) -> str:
        data = value if isinstance(value, bytes) else to_text(value).encode()
        return hashlib.new(name, data).hexdigest()

    return digest


def _b64decode(value: Any) -> str | bytes:
    try:
        raw = base64.b64decode(value, validate=True)
    except (ValueError, TypeError) as exc:
        raise RuleEvaluationError(f"not base64: {exc}") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def _b64encode(value: Any) -> str:
    data = value if isinstance(value, bytes) else to_text(value).encode()
    return base64.b64encode(data).decode("ascii")


Function = tuple[Callable[..., Any], int, int | None]

FUNCTIONS: dict[str, Function] = {
    # strings
    "lower": (_nulls(lambda s: to_text(s).lower()), 1, 1),
    "upper": (_nulls(lambda s: to_text(s).upper()), 1, 1),
    "trim": (_nulls(lambda s: to_text(s).strip()), 1, 1),
    "ltrim": (_nulls(lambda s: to_text(s).lstrip()), 1, 1),
    "rtrim": (_nulls(lambda s: to_text(s).rstrip()), 1, 1),
    "reverse": (_nulls(lambda s: to_text(s)[::-1]), 1, 1),
    "strlen": (_nulls(lambda s: len(to_text(s))), 1, 1),
    "concat": (lambda *a: "".join(to_text(x) for x in a), 1, None),
    "substr": (_nulls(lambda s, *a: _substr(to_text(s), *a)), 2, 3),
    "replace": (_nulls(lambda s, a, b: to_text(s).replace(to_text(a), to_text(b))), 3, 3),
    "split": (_nulls(lambda s, *a: _split(to_text(s), *(to_text(x) for x in a))), 1, 2),
    "find": (_nulls(lambda s, sub, *a: _find(to_text(s), to_text(sub), *map(to_text, a))), 2, 3),
    "pad": (_nulls(lambda s, n, *a: _pad(to_text(s), n, *(to_text(x) for x in a))), 2, 4),
    "regex_match": (_nulls(lambda s, p: _regex(to_text(p)).search(to_text(s)) is not None), 2, 2),
    "regex_replace": (
        _nulls(lambda s, p, r: _regex(to_text(p)).sub(to_text(r), to_text(s))),
        3,
        3,
    ),
    "regex_extract": (
        _nulls(lambda s, p: [m for m in _regex(to_text(p)).findall(to_text(s))]),
        2,
        2,
    ),
    "sprintf": (
        _nulls(lambda fmt, *a: to_text(fmt).replace("~p", "%s").replace("~s", "%s") % a),
        1,
        None,
    ),
    "str": (_nulls(to_text), 1, 1),
    # math
    "abs": (_math(abs), 1, 1),
    "ceil": (_math(math.ceil), 1, 1),
    "floor": (_math(math.floor), 1, 1),
    "round": (_nulls(_round), 1, 2),
    "sqrt": (_math(math.sqrt), 1, 1),
    "power": (_math(math.pow), 2, 2),
    "exp": (_math(math.exp), 1, 1),
    "log": (_math(math.log), 1, 1),
    "log10": (_math(math.log10), 1, 1),
    "log2": (_math(math.log2), 1, 1),
    "sin": (_math(math.sin), 1, 1),
    "cos": (_math(math.cos), 1, 1),
    "tan": (_math(math.tan), 1, 1),
    "mod": (_nulls(_mod), 2, 2),
    "max": (_nulls(lambda *a: max(to_number(x) for x in a)), 1, None),
    "min": (_nulls(lambda *a: min(to_number(x) for x in a)), 1, None),
    "random": (lambda: __import__("random").random(), 0, 0),
    # JSON and maps
    "json_encode": (to_json, 1, 1),
    "json_decode": (_nulls(_json_decode), 1, 1),
    "map_get": (lambda k, m, d=None: _map_get(k, m, d), 2, 3),
    "map_put": (_map_put, 3, 3),
    "map_keys": (_map_keys, 1, 1),
    "map_values": (_map_values, 1, 1),
    "nth": (_nth, 2, 2),
    "length": (lambda v: len(v) if isinstance(v, list | dict | str) else None, 1, 1),
    "contains": (lambda item, items: isinstance(items, list) and item in items, 2, 2),
    # time
    "now_timestamp": (_now_timestamp, 0, 1),
    "now_rfc3339": (lambda unit="second": _to_rfc3339(_now_timestamp(unit), unit), 0, 1),
    "unix_ts_to_rfc3339": (_nulls(_to_rfc3339), 1, 2),
    "rfc3339_to_unix_ts": (_nulls(lambda t, *u: _rfc3339_to_unix(to_text(t), *u)), 1, 2),
    "format_date": (_format_date, 3, 4),
    # topics
    "topic_level": (_nulls(lambda t, n: _topic_level(to_text(t), n)), 2, 2),
    "topic_levels": (_nulls(lambda t: len(to_text(t).split("/"))), 1, 1),
    "topic_matches": (_nulls(lambda t, f: _topic_matches(to_text(t), to_text(f))), 2, 2),
    # types and NULL
    "int": (_nulls(_int), 1, 1),
    "float": (_nulls(lambda v: float(to_number(v))), 1, 1),
    "bool": (_nulls(_bool), 1, 1),
    "is_null": (lambda v: v is None, 1, 1),
    "is_not_null": (lambda v: v is not None, 1, 1),
    "is_num": (lambda v: isinstance(v, int | float) and not isinstance(v, bool), 1, 1),
    "is_str": (lambda v: isinstance(v, str), 1, 1),
    "is_bool": (lambda v: isinstance(v, bool), 1, 1),
    "is_map": (lambda v: isinstance(v, dict), 1, 1),
    "is_array": (lambda v: isinstance(v, list), 1, 1),
    "coalesce": (_coalesce, 1, None),
    # encodings and hashes
    "base64_encode": (_nulls(_b64encode), 1, 1),
    "base64_decode": (_nulls(_b64decode), 1, 1),
    "md5": (_nulls(_hash("md5")), 1, 1),
    "sha256": (_nulls(_hash("sha256")), 1, 1),
}
