"""The derived fields of a record as readers see it: pure, shared by Arrow and JSON lines.

- ``payload_json``: the payload as text when it is a JSON document of RFC 8259 (UTF-8
  that ``json.loads`` accepts without ``NaN``, ``Infinity`` or ``-Infinity``, which
  Python's json takes and the RFC does not), else None;
- ``properties_map``: the MQTT 5 properties of a message as string pairs: its user
  properties by name (a repeated name keeps the last value), and
  ``payload_format_indicator``, ``message_expiry_interval``, ``response_topic`` and
  ``correlation_data`` (base64) when set; ``content_type`` is a column of its own;
- ``meta_map``: the protocol metadata (``dds.type``, ``loopback.source``, ...) as string
  pairs, non-string values as JSON;
- ``TopicMatcher``: topic filters applied to many topics, remembering the answers.
"""

from __future__ import annotations

import base64
import json

from broker_core.errors import ProtocolError
from broker_core.mqtt.properties import PacketKind, decode_properties
from broker_core.mqtt.topics import filter_matches

__all__ = ["TopicMatcher", "meta_map", "payload_json", "properties_map"]

_CACHE_LIMIT = 10_000


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON (RFC 8259)")


def payload_json(payload: bytes) -> str | None:
    """``payload`` as text if it is a JSON document (RFC 8259), else None."""
    if not payload:
        return None
    try:
        text = payload.decode("utf-8")
        json.loads(text, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return text


def properties_map(block: bytes) -> list[tuple[str, str]]:
    """The pairs of an MQTT 5 property block (``Properties.encoded()``); [] when empty."""
    if not block:
        return []
    try:
        properties, _ = decode_properties(block, 0, len(block), PacketKind.PUBLISH)
    except ProtocolError:  # never written by the log itself
        return []
    pairs: dict[str, str] = {}
    if properties.payload_format_indicator is not None:
        pairs["payload_format_indicator"] = str(properties.payload_format_indicator)
    if properties.message_expiry_interval is not None:
        pairs["message_expiry_interval"] = str(properties.message_expiry_interval)
    if properties.response_topic is not None:
        pairs["response_topic"] = properties.response_topic
    if properties.correlation_data is not None:
        pairs["correlation_data"] = base64.b64encode(properties.correlation_data).decode()
    for name, value in properties.user_properties:
        pairs[name] = value
    return list(pairs.items())


def meta_map(text: str) -> list[tuple[str, str]]:
    """The pairs of the metadata JSON object ``text``; [] when empty."""
    if not text:
        return []
    try:
        meta = json.loads(text)
    except ValueError:
        return []
    if not isinstance(meta, dict):
        return []
    return [
        (str(key), value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))
        for key, value in meta.items()
    ]


class TopicMatcher:
    """``matcher(topic)``: whether ``topic`` matches one of the filters (answers cached)."""

    def __init__(self, *topic_filters: str) -> None:
        self.topic_filters = topic_filters
        self._known: dict[str, bool] = {}

    def __call__(self, topic: str) -> bool:
        known = self._known.get(topic)
        if known is None:
            if len(self._known) >= _CACHE_LIMIT:
                self._known.clear()
            known = self._known[topic] = any(
                filter_matches(topic_filter, topic) for topic_filter in self.topic_filters
            )
        return known
