"""Pure conversions of the ``nng`` adapter: its two frame layouts.

An NNG message is one body, so the layouts are:

``prefix`` (the default)
    ``topic + delimiter + payload``: NanoMQ's NNG bridge wire format, with its default
    delimiter ``/`` (``bridges.nng`` ``nng_delimiter``). A ``sub0`` socket subscribes to
    topic prefixes, which is why the topic comes first. Where the topic ends is
    explained in ``adapters.sockets.frames``: list the topics in ``subscribe`` when they
    contain the delimiter.
``raw``
    the body is the payload; the message has no topic.
"""

from __future__ import annotations

from adapters.sockets.config import PREFIX
from adapters.sockets.frames import join_prefixed, split_prefixed

__all__ = ["decode", "encode"]


def decode(
    body: bytes, layout: str, delimiter: bytes, prefixes: tuple[bytes, ...]
) -> tuple[bytes | None, bytes]:
    """``(topic, payload)`` of a received body (topic None for ``raw``); raises
    ``MappingError`` when it does not have the layout."""
    if layout == PREFIX:
        return split_prefixed(body, delimiter, prefixes)
    return None, body


def encode(topic: bytes, payload: bytes, layout: str, delimiter: bytes) -> bytes:
    """The body of a message to send."""
    if layout == PREFIX:
        return join_prefixed(topic, delimiter, payload)
    return payload
