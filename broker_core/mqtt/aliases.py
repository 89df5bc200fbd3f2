"""Topic aliases a client sets on one connection (MQTT 5.0 section 3.3.2.3.4).

A PUBLISH with a Topic Alias and a topic maps the alias to that topic; one with the
alias and an empty topic uses the mapping. Aliases run from 1 to the broker's
``max_topic_alias`` (0 or beyond: 0x94 Topic Alias invalid [MQTT-3.3.2-8, -9]); an
unknown alias is a protocol error. The topic characters held by every connection's
table together stay within ``max_topic_alias_bytes`` (``Counters.topic_alias_bytes``):
a new mapping beyond it is refused with 0x97 Quota exceeded and counted in limit
``topic_alias_bytes``. ``release`` gives a closed connection's share back.
"""

from __future__ import annotations

from typing import Any

from broker_core.errors import ProtocolError, ProtocolViolation
from broker_core.mqtt.reason_codes import ReasonCode

__all__ = ["TopicAliases"]


class TopicAliases:
    __slots__ = ("_topics", "max_bytes", "maximum")

    def __init__(self, maximum: int, max_bytes: int) -> None:
        self.maximum = maximum
        self.max_bytes = max_bytes
        self._topics: dict[int, str] = {}

    def resolve(self, alias: int, topic: str, counters: Any) -> str:
        """The topic of a PUBLISH carrying ``alias``; maps it when ``topic`` is given."""
        if not 0 < alias <= self.maximum:  # [MQTT-3.3.2-8, -9]
            raise ProtocolError(f"topic alias {alias} out of range", ReasonCode.TOPIC_ALIAS_INVALID)
        topics = self._topics
        if not topic:
            found = topics.get(alias)
            if found is None:
                raise ProtocolViolation(f"unknown topic alias {alias}")
            return found
        old = topics.get(alias)
        grow = len(topic) - (0 if old is None else len(old))
        if grow > 0 and counters.topic_alias_bytes + grow > self.max_bytes:
            counters.hit("topic_alias_bytes")
            raise ProtocolError("topic alias memory is full", ReasonCode.QUOTA_EXCEEDED)
        counters.topic_alias_bytes += grow
        topics[alias] = topic
        return topic

    def release(self, counters: Any) -> None:
        """The connection ended: its topic characters leave the broker-wide count."""
        topics = self._topics
        if topics:
            counters.topic_alias_bytes -= sum(map(len, topics.values()))
            self._topics = {}
