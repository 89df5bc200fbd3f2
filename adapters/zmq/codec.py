"""Pure conversions of the ``zmq`` adapter: frame layouts, envelopes, XPUB subscriptions.

Frame layouts (``frames``)
    ``multipart``: ``[topic, payload]``, the topic frame first (what a ``SUB`` filters on).
    ``prefix``: one frame ``topic + delimiter + payload`` (``adapters.sockets.frames``).
    ``raw``: one frame, the payload; the message has no topic.

Envelopes
    A ``router`` socket receives ``[identity, ..., b"", body...]``: the frames up to the
    empty delimiter frame are the envelope, sent back in front of the reply. A ``dealer``
    talking to ``rep`` services sends ``[request id, b"", body...]``: the ``rep`` returns
    the envelope with its reply, which is how concurrent replies find their requests.

XPUB subscriptions (``OnDemand``)
    A subscriber's ``\\x01<prefix>`` becomes an MQTT subscription: the prefix's complete
    topic levels and ``#`` (``sensors/kit`` -> ``sensors/#``), narrowed to the mapping's
    ``from_mqtt`` (``filter_intersection``); a prefix no MQTT topic can start with (a
    level with ``+``, ``#`` or NUL, over 65 535 bytes) asks for nothing. ZeroMQ itself
    still filters by the exact prefix, so a wider MQTT subscription only costs sends that
    ZeroMQ discards.
    ``\\x00<prefix>`` undoes one such subscription; the MQTT subscription ends with the
    last ZeroMQ subscriber needing it.
"""

from __future__ import annotations

from collections.abc import Sequence

from adapters.sockets.config import MULTIPART, PREFIX
from adapters.sockets.frames import join_prefixed, split_prefixed
from broker_core.mqtt.topics import topic_filter_problem
from gateway.mapping import MappingError

__all__ = [
    "OnDemand",
    "decode",
    "encode",
    "filter_intersection",
    "parse_subscription",
    "split_envelope",
    "subscription_filter",
]


def decode(
    frames: Sequence[bytes], layout: str, delimiter: bytes, prefixes: tuple[bytes, ...]
) -> tuple[bytes | None, bytes]:
    """``(topic, payload)`` of a received message (topic None for ``raw``); raises
    ``MappingError`` when the frames do not have the layout."""
    if layout == MULTIPART:
        if len(frames) != 2:
            raise MappingError(f"expected 2 frames [topic, payload], got {len(frames)}")
        return frames[0], frames[1]
    if len(frames) != 1:
        raise MappingError(f"expected 1 frame ({layout} layout), got {len(frames)}")
    if layout == PREFIX:
        return split_prefixed(frames[0], delimiter, prefixes)
    return None, frames[0]


def encode(topic: bytes, payload: bytes, layout: str, delimiter: bytes) -> list[bytes]:
    """The frames of a message to send."""
    if layout == MULTIPART:
        return [topic, payload]
    if layout == PREFIX:
        return [join_prefixed(topic, delimiter, payload)]
    return [payload]


def split_envelope(frames: Sequence[bytes]) -> tuple[list[bytes], list[bytes]]:
    """``(envelope including the empty delimiter frame, body)``; raises ``MappingError``
    when there is no delimiter frame."""
    for i, frame in enumerate(frames):
        if not frame:
            return list(frames[: i + 1]), list(frames[i + 1 :])
    raise MappingError("no empty delimiter frame after the envelope")


def parse_subscription(frame: bytes) -> tuple[bool, bytes] | None:
    """``(subscribe?, prefix)`` of a frame an XPUB socket received; None for anything
    else (an XPUB may also receive ordinary messages)."""
    if frame[:1] == b"\x01":
        return True, frame[1:]
    if frame[:1] == b"\x00":
        return False, frame[1:]
    return None


def filter_intersection(a: str, b: str) -> str | None:
    """The MQTT filter matching exactly the topics both ``a`` and ``b`` match, or None
    when no topic matches both (``sensors/#`` and ``+/kitchen`` -> ``sensors/kitchen``)."""
    left, right = a.split("/"), b.split("/")
    out: list[str] = []
    for i in range(max(len(left), len(right))):
        x = left[i] if i < len(left) else None
        y = right[i] if i < len(right) else None
        if x == "#" or y == "#":
            rest = right[i:] if x == "#" else left[i:]
            return "/".join(out + rest) if (rest or out) else "#"
        if x is None or y is None:
            return None
        if x == "+":
            out.append(y)
        elif y == "+" or x == y:
            out.append(x)
        else:
            return None
    return "/".join(out)


def _text_prefix(prefix: bytes) -> str:
    try:
        return prefix.decode()
    except UnicodeDecodeError as exc:
        return prefix[: exc.start].decode()


def subscription_filter(
    prefix: bytes, topic_head: str, from_filter: str, has_topic: bool
) -> str | None:
    """The MQTT filter a ZeroMQ subscription to ``prefix`` needs, or None when no MQTT
    message of the mapping can match it.

    ``topic_head``: the literal before ``{mqtt.topic}`` in the mapping's ``topic``;
    ``from_filter``: its MQTT filter; ``has_topic``: False for the ``raw`` layout (the
    message starts with the payload, so any subscription needs the whole filter).
    """
    if not has_topic:
        return from_filter
    text = _text_prefix(prefix)
    if not text.startswith(topic_head):
        return from_filter if topic_head.startswith(text) else None
    levels = text[len(topic_head) :].split("/")
    complete = levels[:-1]
    if any("+" in level or "#" in level for level in complete):
        return None  # no MQTT topic has such a level
    candidate = "/".join([*complete, "#"])
    if topic_filter_problem(candidate) is not None:
        return None  # a NUL, or over 65535 bytes: no MQTT topic is like that either
    return filter_intersection(candidate, from_filter)


class OnDemand:
    """Reference counts of an XPUB's subscriptions and the MQTT filters they need."""

    def __init__(self, topic_head: str, from_filter: str, has_topic: bool) -> None:
        self.topic_head = topic_head
        self.from_filter = from_filter
        self.has_topic = has_topic
        self._prefixes: dict[bytes, int] = {}
        self._filters: dict[str, int] = {}

    @property
    def filters(self) -> list[str]:
        return sorted(self._filters)

    def subscribe(self, prefix: bytes) -> str | None:
        """Counts a subscription; returns the MQTT filter to add, if it is a new one."""
        count = self._prefixes.get(prefix, 0)
        self._prefixes[prefix] = count + 1
        if count:
            return None
        topic_filter = self._filter(prefix)
        if topic_filter is None:
            return None
        uses = self._filters.get(topic_filter, 0)
        self._filters[topic_filter] = uses + 1
        return topic_filter if uses == 0 else None

    def unsubscribe(self, prefix: bytes) -> str | None:
        """Counts an unsubscription; returns the MQTT filter to remove, if it is no
        longer needed."""
        count = self._prefixes.get(prefix, 0)
        if count == 0:
            return None
        if count > 1:
            self._prefixes[prefix] = count - 1
            return None
        del self._prefixes[prefix]
        topic_filter = self._filter(prefix)
        if topic_filter is None or topic_filter not in self._filters:
            return None
        uses = self._filters[topic_filter] - 1
        if uses:
            self._filters[topic_filter] = uses
            return None
        del self._filters[topic_filter]
        return topic_filter

    def _filter(self, prefix: bytes) -> str | None:
        return subscription_filter(prefix, self.topic_head, self.from_filter, self.has_topic)
