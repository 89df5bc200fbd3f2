"""The one exception hierarchy of edgebus.

::

    EdgebusError
    ├── ConfigError                 a configuration file or value is wrong
    ├── ProtocolError(reason_code)  the peer's bytes break the MQTT specification
    │   ├── MalformedPacket         cannot be parsed (reason code 0x81 by default)
    │   └── ProtocolViolation       parses, but breaks a rule (0x82 by default)
    ├── AdapterError                a protocol adapter failed
    │   ├── AdapterUnavailable      its optional library is not installed
    │   └── AdapterConnectionError  its native side could not connect or broke
    ├── IdlError(file, line, column) an IDL schema is wrong
    └── BridgeError                 a bridge to a remote broker failed

Errors caused by the peer's bytes (``ProtocolError``) are kept apart from misuse of
our own API, which raises the ordinary ``TypeError`` / ``ValueError`` /
``RuntimeError`` (the h11 distinction).

``broker_core`` is at the bottom of the dependency graph, so the whole hierarchy
lives here and the other packages import it from here.
"""

from __future__ import annotations

__all__ = [
    "AdapterConnectionError",
    "AdapterError",
    "AdapterUnavailable",
    "BridgeError",
    "ConfigError",
    "EdgebusError",
    "IdlError",
    "MalformedPacket",
    "ProtocolError",
    "ProtocolViolation",
]


class EdgebusError(Exception):
    """Base class of every error edgebus raises on purpose."""


class ConfigError(EdgebusError):
    """A configuration file or value is wrong.

    ``problems`` holds one line per problem, each naming file, YAML path and line.
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems: list[str] = problems if problems is not None else [message]


class ProtocolError(EdgebusError):
    """The peer broke the MQTT specification; ``reason_code`` is what the spec names."""

    default_reason_code = 0x82

    def __init__(self, message: str, reason_code: int | None = None) -> None:
        super().__init__(message)
        self.reason_code: int = self.default_reason_code if reason_code is None else reason_code


class MalformedPacket(ProtocolError):
    """The bytes cannot be parsed as an MQTT control packet."""

    default_reason_code = 0x81


class ProtocolViolation(ProtocolError):
    """The packet parses but breaks a protocol rule."""

    default_reason_code = 0x82


class AdapterError(EdgebusError):
    """A protocol adapter failed."""


class AdapterUnavailable(AdapterError):
    """An adapter's optional library is not installed."""


class AdapterConnectionError(AdapterError):
    """An adapter's native side could not connect or broke."""


class IdlError(EdgebusError):
    """An IDL schema is wrong; names the file, line and column."""

    def __init__(self, message: str, file: str, line: int, column: int) -> None:
        super().__init__(f"{file}:{line}:{column}: {message}")
        self.message = message
        self.file = file
        self.line = line
        self.column = column


class BridgeError(EdgebusError):
    """A bridge to a remote broker failed."""
