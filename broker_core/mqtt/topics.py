"""Topic names and topic filters (MQTT 5.0 section 4.7, shared subscriptions 4.8.2).

A topic filter that breaks the wildcard rules raises ``MalformedPacket`` (as mosquitto
does); a topic name with a wildcard parses fine but breaks [MQTT-3.3.2-2], so it
raises ``ProtocolViolation``. A PUBLISH's topic meets the other rules of a topic name by
construction (the decoder reads at most 65535 bytes of well-formed UTF-8 without NUL);
a topic made in the process (a rule's or an adapter's template) is checked with
``topic_name_problem`` before it is routed.

A Topic Name starting ``$share/`` (``SHARE_PREFIX``), the form of a shared subscription's
filter (4.8.2), is refused by the publish policy (``Broker.publish_checked``: 0x90 Topic
Name invalid; MQTT 3.1.1 and 3.1: the connection closes), not by the decoder: no
subscription could match it (a filter starting ``$share/`` is a shared one, matching the
filter after its group), and $ topics are not for clients to exchange messages (4.7.2).
mosquitto 2.0.11 refuses it as an ACL denial (0x87; 3.1.1: a PUBACK, the message dropped).
"""

from __future__ import annotations

from typing import NamedTuple

from broker_core.errors import MalformedPacket, ProtocolViolation

__all__ = [
    "SHARE_PREFIX",
    "SharedFilter",
    "abbreviate",
    "filter_matches",
    "is_wildcard_filter",
    "parse_shared",
    "too_deep",
    "topic_filter_problem",
    "topic_name_problem",
    "validate_topic_filter",
    "validate_topic_name",
]

SHARE_PREFIX = "$share/"


class SharedFilter(NamedTuple):
    group: str
    topic_filter: str


def validate_topic_name(topic: str) -> None:
    """A Topic Name must not contain wildcards [MQTT-3.3.2-2]; emptiness is the caller's."""
    if "+" in topic or "#" in topic:
        raise ProtocolViolation(f"topic name contains a wildcard: {topic!r}")


def topic_name_problem(topic: str) -> str | None:
    """Why ``topic`` cannot be a PUBLISH's Topic Name, or None when it can.

    At least one character [MQTT-4.7.3-1], well-formed UTF-8 (no surrogate code points)
    of at most 65535 bytes [MQTT-1.5.4-1, MQTT-1.5.4-2: no U+0000], no wildcard
    [MQTT-3.3.2-2], not ``$share/...`` (see above). An ASCII topic costs no encoding
    (``str.isascii`` is O(1)).
    """
    if not topic:
        return "a topic name must not be empty"
    if topic[0] == "$" and topic.startswith(SHARE_PREFIX):
        return "a topic name must not start with $share/ (the form of a shared subscription)"
    if topic.isascii():
        size = len(topic)
    else:
        try:
            size = len(topic.encode("utf-8"))
        except UnicodeEncodeError:
            return "a topic name must be well-formed UTF-8 (it holds a surrogate code point)"
    if size > 65535:
        return f"a topic name must be at most 65535 bytes of UTF-8 (this one has {size})"
    if "\0" in topic:
        return "a topic name must not contain the NUL character"
    if "+" in topic or "#" in topic:
        return "a topic name must not contain wildcards (+ or #)"
    return None


def too_deep(topic: str, max_levels: int) -> bool:
    """True when ``topic`` (a name or a filter) has more than ``max_levels`` levels
    (``mqtt.max_topic_levels``). A topic of fewer than ``max_levels`` characters cannot
    have that many separators, so a usual topic pays one length comparison; a longer one
    is counted at C speed (``str.count``), without splitting it."""
    return len(topic) >= max_levels and topic.count("/") >= max_levels


def abbreviate(topic: str, keep: int = 64) -> str:
    """``topic`` for a log line or an error: its first ``keep`` characters and its length
    when it is longer (a topic can be 65535 bytes)."""
    if len(topic) <= keep:
        return repr(topic)
    return f"{topic[:keep]!r}... ({len(topic)} characters)"


def topic_filter_problem(topic_filter: str) -> str | None:
    """Why ``topic_filter`` is not a valid topic filter, or None when it is.

    ``#`` only as the whole last level, ``+`` only as a whole level [MQTT-4.7.1-1, -2],
    at least one character [MQTT-4.7.3-1].
    """
    if not topic_filter:
        return "a topic filter must not be empty"
    if "\0" in topic_filter:
        return "a topic filter must not contain the NUL character"
    if len(topic_filter) > 16383 and len(topic_filter.encode("utf-8")) > 65535:
        return "a topic filter must be at most 65535 bytes"
    if "+" not in topic_filter and "#" not in topic_filter:
        return None
    levels = topic_filter.split("/")
    last = len(levels) - 1
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != last):
            return "'#' must be a whole level and the last one"
        if "+" in level and level != "+":
            return "'+' must be a whole level"
    return None


def validate_topic_filter(topic_filter: str) -> None:
    problem = topic_filter_problem(topic_filter)
    if problem is not None:
        raise MalformedPacket(f"{problem}: {topic_filter!r}")


def parse_shared(topic_filter: str) -> SharedFilter | None:
    """``$share/{group}/{filter}`` -> (group, filter); None for an ordinary filter.

    The group must be non-empty without ``/``, ``+`` or ``#`` and be followed by ``/``
    and a valid filter [MQTT-4.8.2-1, -2].
    """
    if not topic_filter.startswith(SHARE_PREFIX):
        return None
    rest = topic_filter[len(SHARE_PREFIX) :]
    group, slash, inner = rest.partition("/")
    if not group or "+" in group or "#" in group or not slash:
        raise MalformedPacket(f"malformed shared subscription: {topic_filter!r}")
    validate_topic_filter(inner)
    return SharedFilter(group, inner)


def is_wildcard_filter(topic_filter: str) -> bool:
    return "+" in topic_filter or "#" in topic_filter


def filter_matches(topic_filter: str, topic: str) -> bool:
    """True when ``topic`` matches ``topic_filter``; leading wildcards skip ``$`` topics."""
    if topic_filter == topic:
        return True
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False  # [MQTT-4.7.2-1]
    f_levels = topic_filter.split("/")
    t_levels = topic.split("/")
    for i, f in enumerate(f_levels):
        if f == "#":
            return True
        if i >= len(t_levels):
            return False
        if f != "+" and f != t_levels[i]:
            return False
    return len(f_levels) == len(t_levels)
