"""Value types of the configuration schema, as pydantic annotations.

Each is used as ``Annotated[<python type>, <Spec>(...)]``: the spec parses what the user
wrote, checks its bounds with a message in the ``expected ..., got ...`` style, turns
the value back into its YAML spelling when dumped in JSON mode, and names itself for
the reference (``doc_type``).

=================  ==================  =================================================
spec               Python value        YAML
=================  ==================  =================================================
DurationSpec       float seconds       ``"30s"``, ``"500ms"``, ``"1h30m"``, ``10``
SizeSpec           int bytes           ``"64MB"``, ``"1GiB"``, ``4096``
BindAddress        BindAddress         ``"127.0.0.1:1883"``, ``"[::1]:8883"``
PathSpec           pathlib.Path        ``./edgebus-data`` (relative to the CWD)
NetworkSpec        IPv4/IPv6Network    ``10.0.0.0/8``, ``192.168.1.7``
TopicFilterSpec    str                 ``sensors/+/temp``, ``eq sensors/#``, ``%c/#``
HttpUrlSpec        str                 ``https://auth.example.com/mqtt``
NameSpec           str                 ``cloud``, ``front-door_2``
=================  ==================  =================================================
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from broker_core.mqtt.topics import topic_filter_problem
from gateway.config.address import BindAddress
from gateway.config.errors import show_value
from gateway.config.units import format_duration, format_size, parse_duration, parse_size

__all__ = [
    "BindAddress",
    "DurationSpec",
    "HttpUrlSpec",
    "NameSpec",
    "NetworkSpec",
    "PathSpec",
    "SizeSpec",
    "TopicFilterSpec",
    "plain_schema",
]


def plain_schema(
    validate: Callable[[Any], Any], serialize: Callable[[Any], Any]
) -> core_schema.CoreSchema:
    return core_schema.no_info_plain_validator_function(
        validate,
        serialization=core_schema.plain_serializer_function_ser_schema(serialize, when_used="json"),
    )


class _Spec:
    """Base of the specs: pydantic hooks around ``validate`` and ``serialize``."""

    json_type: tuple[str, ...] = ("string",)

    @property
    def doc_type(self) -> str:
        raise NotImplementedError

    def validate(self, value: Any) -> Any:
        raise NotImplementedError

    def serialize(self, value: Any) -> Any:
        return str(value)

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return plain_schema(self.validate, self.serialize)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        types = list(self.json_type)
        return {"type": types[0] if len(types) == 1 else types, "format": self.doc_type}


def _seconds(value: float) -> str:
    shown = format_duration(value)
    return shown if isinstance(shown, str) else f"{shown}s"


@dataclass(frozen=True)
class DurationSpec(_Spec):
    """A duration, parsed to float seconds, within ``[ge, le]`` (``gt``: exclusive)."""

    ge: float = 0.0
    le: float | None = None
    gt: float | None = None
    whole_seconds: bool = False
    json_type = ("string", "number")

    @property
    def doc_type(self) -> str:
        text = "duration"
        if self.gt is not None:
            text += f" > {_seconds(self.gt)}"
        if self.le is not None:
            text += f", {_seconds(self.ge)} to {_seconds(self.le)}"
        elif self.ge > 0:
            text += f" >= {_seconds(self.ge)}"
        if self.whole_seconds:
            text += ", whole seconds"
        return text

    def validate(self, value: Any) -> float:
        seconds = parse_duration(value)
        got = show_value(value)
        if self.gt is not None and seconds <= self.gt:
            raise ValueError(f"expected a duration longer than {_seconds(self.gt)}, got {got}")
        if seconds < self.ge or (self.le is not None and seconds > self.le):
            if self.le is None:
                raise ValueError(f"expected a duration of at least {_seconds(self.ge)}, got {got}")
            raise ValueError(
                f"expected a duration from {_seconds(self.ge)} to {_seconds(self.le)}, got {got}"
            )
        if self.whole_seconds and not seconds.is_integer():
            raise ValueError(f"expected a whole number of seconds, got {got}")
        return seconds

    def serialize(self, value: Any) -> Any:
        return format_duration(value)


def _bytes(size: int) -> str:
    shown = format_size(size)
    if isinstance(shown, str):
        return shown
    return "1 byte" if shown == 1 else f"{shown} bytes"


@dataclass(frozen=True)
class SizeSpec(_Spec):
    """A size, parsed to int bytes, within ``[ge, le]``."""

    ge: int = 0
    le: int | None = None
    json_type = ("string", "integer")

    @property
    def doc_type(self) -> str:
        if self.le is not None:
            return f"size, {_bytes(self.ge)} to {_bytes(self.le)}"
        return f"size >= {_bytes(self.ge)}" if self.ge else "size"

    def validate(self, value: Any) -> int:
        size = parse_size(value)
        if size < self.ge or (self.le is not None and size > self.le):
            got = show_value(value)
            if self.le is None:
                raise ValueError(f"expected a size of at least {_bytes(self.ge)}, got {got}")
            raise ValueError(
                f"expected a size from {_bytes(self.ge)} to {_bytes(self.le)}, got {got}"
            )
        return size

    def serialize(self, value: Any) -> Any:
        return format_size(value)


@dataclass(frozen=True)
class PathSpec(_Spec):
    """A filesystem path; relative paths are relative to the working directory."""

    @property
    def doc_type(self) -> str:
        return "path"

    def validate(self, value: Any) -> Path:
        if isinstance(value, Path):
            return value
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"expected a file system path, got {show_value(value)}")
        return Path(value)


@dataclass(frozen=True)
class NetworkSpec(_Spec):
    """An IP network in CIDR notation, or one address (a /32 or /128 network)."""

    @property
    def doc_type(self) -> str:
        return "CIDR or IP address"

    def validate(self, value: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        if not isinstance(value, str):
            raise ValueError(
                f"expected a network like 10.0.0.0/8 or an address, got {show_value(value)}"
            )
        try:
            return ipaddress.ip_network(value.strip(), strict=True)
        except ValueError:
            pass
        try:
            loose = ipaddress.ip_network(value.strip(), strict=False)
        except ValueError:
            raise ValueError(
                f"expected a network like 10.0.0.0/8 or an address, got {show_value(value)}"
            ) from None
        raise ValueError(
            f"expected a network address, got {show_value(value)} (host bits set;"
            f" did you mean '{loose}'?)"
        )

    def serialize(self, value: Any) -> Any:
        network = ipaddress.ip_network(value)
        if network.prefixlen == network.max_prefixlen:
            return str(network.network_address)
        return str(network)


@dataclass(frozen=True)
class TopicFilterSpec(_Spec):
    """An ACL topic filter; ``%u``/``%c`` stand for username/client id; ``eq F``
    matches the filter ``F`` literally."""

    @property
    def doc_type(self) -> str:
        return "topic filter"

    def validate(self, value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"expected a topic filter, got {show_value(value)}")
        literal = value[3:] if value.startswith("eq ") else value
        problem = topic_filter_problem(literal)
        if problem is not None:
            raise ValueError(f"{problem}, got {show_value(value)}")
        return value


@dataclass(frozen=True)
class HttpUrlSpec(_Spec):
    """An ``http://`` or ``https://`` URL with a host."""

    @property
    def doc_type(self) -> str:
        return "http(s) URL"

    def validate(self, value: Any) -> str:
        if isinstance(value, str):
            parts = urlsplit(value.strip())
            if parts.scheme in ("http", "https") and parts.hostname:
                return value.strip()
        raise ValueError(f"expected an http:// or https:// URL, got {show_value(value)}")


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class NameSpec(_Spec):
    """The name of an adapter, bridge, rule or webhook: 1 to 64 letters, digits, ``_``,
    ``.`` or ``-``, starting with a letter or digit (it appears in client ids, metrics
    and API paths)."""

    @property
    def doc_type(self) -> str:
        return "name"

    def validate(self, value: Any) -> str:
        if not isinstance(value, str) or not _NAME.fullmatch(value):
            raise ValueError(
                "expected 1 to 64 letters, digits, '_', '.' or '-' (starting with a letter or"
                f" digit), got {show_value(value)}"
            )
        return value
