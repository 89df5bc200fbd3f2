"""``BindAddress``, the value of every ``bind:`` key, in a module that imports no pydantic:
the running gateway holds these (``gateway.config.light``) without loading the schema."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from gateway.config.shown import show_value

__all__ = ["BindAddress"]


_HOSTNAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(?:\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?")
_NUMERIC = re.compile(r"[0-9.]+")
_BIND_SHAPE = "'host:port' like 127.0.0.1:1883 or [::1]:1883"


def _ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


def _scope(host: str) -> set[tuple[str, str | None]]:
    """What ``host`` binds as ``(family, address)`` pairs; address None: every address of
    that family (the wildcard)."""
    name = host.lower().rstrip(".")
    if name == "localhost":
        return {("4", "127.0.0.1"), ("6", "::1")}
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return {("name", name)}
    family = str(address.version)
    return {(family, None if address.is_unspecified else str(address))}


@dataclass(frozen=True, slots=True)
class BindAddress:
    """A listening address: ``host`` (name, IPv4 or IPv6 literal) and ``port`` (0..65535).

    Port 0 asks the operating system for a free port. Written ``host:port``, with IPv6
    literals in brackets: ``[::1]:1883``.
    """

    host: str
    port: int

    def overlaps(self, other: BindAddress) -> bool:
        """True when ``self`` and ``other`` cannot both be bound: the same port (not 0)
        and the same address, or one is the wildcard (``0.0.0.0``, ``::``) of the
        other's IP version. ``localhost`` is 127.0.0.1 and ::1; other names compare as
        written."""
        if self.port != other.port or self.port == 0:
            return False
        return any(
            mine == theirs or (mine[0] == theirs[0] and None in (mine[1], theirs[1]))
            for mine in _scope(self.host)
            for theirs in _scope(other.host)
        )

    def __str__(self) -> str:
        if ":" in self.host:
            return f"[{self.host}]:{self.port}"
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, value: object) -> BindAddress:
        """Parse ``host:port`` / ``[v6]:port``; ``ValueError`` says what is wrong."""
        if isinstance(value, BindAddress):
            return value
        if not isinstance(value, str):
            raise ValueError(f"expected {_BIND_SHAPE}, got {show_value(value)}")
        text = value.strip()
        host, sep, port_text = text.rpartition(":")
        if not sep or not host:
            raise ValueError(f"expected {_BIND_SHAPE}, got {show_value(value)}")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                raise ValueError(
                    f"expected an IPv6 address in brackets, got {show_value(value)}"
                ) from None
        elif ":" in host:
            raise ValueError(
                f"expected an IPv6 address in brackets like [::1]:1883, got {show_value(value)}"
            )
        elif not _HOSTNAME.fullmatch(host) or (_NUMERIC.fullmatch(host) and not _ipv4(host)):
            # 999.1.1.1 is shaped like a host name, but no name is all digits
            raise ValueError(f"expected a host name or IP address, got {show_value(value)}")
        if not port_text.isdigit() or int(port_text) > 65535:
            raise ValueError(f"expected a port from 0 to 65535, got {show_value(value)}")
        return cls(host, int(port_text))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from gateway.config.values import plain_schema  # pydantic: only where it validates

        return plain_schema(cls.parse, str)

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict[str, Any]:
        return {"type": "string", "format": "host:port"}
