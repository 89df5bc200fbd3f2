"""The ``prefix`` frame layout: one frame ``topic + delimiter + payload``.

Both adapters' codecs use it: ZeroMQ for NanoMQ's ``sub_pre`` / ``pub_pre`` gateway
style, NNG for NanoMQ's NNG bridge wire format (``remote_topic + nng_delimiter +
payload``, delimiter ``/`` by default).

Where the topic ends when a frame is read: a topic may contain the delimiter (``/`` in
``remote/nng``), so the search for the delimiter starts after the longest ``subscribe``
prefix the frame begins with. With ``subscribe: [remote/nng]`` and delimiter ``/``, the
frame ``remote/nng/hello`` is topic ``remote/nng``, payload ``hello``. With an empty
delimiter the topic is that prefix itself (NanoMQ's ``sub_pre``: prefix, then payload).
Without a matching prefix the search starts at the first byte.
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.mapping import MappingError

__all__ = ["join_prefixed", "prefix_order", "split_prefixed"]


def prefix_order(prefixes: Iterable[str]) -> tuple[bytes, ...]:
    """The subscribe prefixes as bytes, longest first (the order ``split_prefixed`` tries)."""
    return tuple(sorted({p.encode() for p in prefixes}, key=len, reverse=True))


def split_prefixed(
    frame: bytes, delimiter: bytes, prefixes: tuple[bytes, ...]
) -> tuple[bytes, bytes]:
    """``(topic, payload)`` of a ``topic + delimiter + payload`` frame.

    ``prefixes``: the subscribed prefixes, longest first (``prefix_order``). Raises
    ``MappingError`` when the frame has no delimiter or the topic would be empty.
    """
    start = 0
    for prefix in prefixes:
        if frame.startswith(prefix):
            start = len(prefix)
            break
    end = frame.find(delimiter, start) if delimiter else start
    if end < 0:
        raise MappingError(f"no delimiter {delimiter!r} after the topic in the frame")
    if end == 0:
        raise MappingError("the frame has an empty topic")
    return frame[:end], frame[end + len(delimiter) :]


def join_prefixed(topic: bytes, delimiter: bytes, payload: bytes) -> bytes:
    """The frame ``topic + delimiter + payload``."""
    return b"".join((topic, delimiter, payload))
