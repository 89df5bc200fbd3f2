"""Rows: the fields of a message or a broker event, as rules and webhooks see them.

A rule's statement reads columns of a row; a webhook posts a row as its JSON body. Both
use EMQX's names (``clientid``, ``peername``, ``proto_ver``, ``publish_received_at``,
timestamps in milliseconds), so a body reads like EMQX's and NanoMQ's webhooks.

A message row (``MessageRow``) is built lazily from the ``Context``: a rule that reads
``topic`` never decodes the payload, and the JSON payload is parsed once per message
however many rules read ``payload.x``.

Message columns: ``id``, ``topic``, ``qos``, ``retain``, ``payload`` (text; bytes when it
is not UTF-8), ``clientid`` and ``username`` (the publisher; a component's name for an
adapter), ``peerhost`` / ``peername``, ``origin`` (the publisher's protocol: ``mqtt``,
``zmq``, ``rule``, ...), ``timestamp`` and ``publish_received_at`` (ms), ``event``
(``message.publish``), ``node``, ``meta`` (``meta.dds.type``), ``properties``
(``properties.content_type``, ``properties.user_properties.<key>``), ``flags``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from broker_core.clock import to_wall, to_wall_ns
from broker_core.context import Context
from broker_core.mqtt.properties import Properties
from broker_core.observe import (
    BrokerEvent,
    ClientConnack,
    ClientConnect,
    ClientConnected,
    ClientDisconnected,
    ClientSubscribe,
    MessageAcked,
    MessageDelivered,
    MessageDropped,
    MessagePublish,
    SessionSubscribed,
    SessionTerminated,
)

__all__ = [
    "EVENT_COLUMNS",
    "EVENT_COMMON_COLUMNS",
    "EVENT_MESSAGE_COLUMNS",
    "MESSAGE_COLUMNS",
    "EventRow",
    "MessageRow",
    "Row",
    "event_row",
    "properties_fields",
]

_MISSING = object()


class Row:
    """Columns by name; ``json()`` is the payload parsed as JSON (None if it is not)."""

    __slots__ = ("_json",)

    def __init__(self) -> None:
        self._json: Any = _MISSING

    def column(self, name: str) -> Any:
        raise NotImplementedError

    def as_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def json(self) -> Any:
        if self._json is _MISSING:
            payload = self.column("payload")
            try:
                self._json = json.loads(payload) if payload is not None else None
            except (ValueError, TypeError):
                self._json = None
        return self._json


def _text(payload: bytes) -> str | bytes:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        return payload


def properties_fields(properties: Properties) -> dict[str, Any]:
    """The MQTT 5 publish properties a message carries, by name (user properties as an
    object)."""
    out: dict[str, Any] = {}
    for name in (
        "payload_format_indicator",
        "message_expiry_interval",
        "content_type",
        "response_topic",
        "correlation_data",
    ):
        value = getattr(properties, name)
        if value is not None:
            out[name] = value
    if properties.user_properties:
        out["user_properties"] = dict(properties.user_properties)
    return out


#: A message's columns, each read from its Context.
MESSAGE_COLUMNS: dict[str, Callable[[Context], Any]] = {
    "id": attrgetter("id"),
    "topic": attrgetter("topic"),
    "qos": attrgetter("qos"),
    "retain": attrgetter("retain"),
    "payload": lambda c: _text(c.payload),
    "clientid": attrgetter("origin.name"),
    "username": attrgetter("origin.username"),
    "peerhost": lambda c: (c.origin.peer or "").rpartition(":")[0] or None,
    "peername": attrgetter("origin.peer"),
    "origin": attrgetter("origin.protocol"),
    # received_at is on the broker's clock: shown on the wall clock (broker_core.clock)
    "timestamp": lambda c: to_wall_ns(c.received_at) // 1_000_000,
    "publish_received_at": lambda c: to_wall_ns(c.received_at) // 1_000_000,
    "event": lambda c: "message.publish",
    "meta": lambda c: dict(c.meta),
    "properties": lambda c: properties_fields(c.properties),
    "flags": lambda c: {"retain": c.retain},
}


class MessageRow(Row):
    """The row of a message (``message.publish``)."""

    __slots__ = ("context", "node")

    def __init__(self, context: Context, node: str = "edgebus") -> None:
        self._json = _MISSING  # Row.__init__'s, inline: a row is built per message
        self.context = context
        self.node = node

    def column(self, name: str) -> Any:
        getter = MESSAGE_COLUMNS.get(name)
        if getter is not None:
            return getter(self.context)
        if name == "node":
            return self.node
        return None

    def meta(self, key: str) -> Any:
        return self.context.meta.get(key)

    def as_dict(self) -> dict[str, Any]:
        out = {name: getter(self.context) for name, getter in MESSAGE_COLUMNS.items()}
        out["node"] = self.node
        return out


class EventRow(Row):
    """The row of a broker event: a dict of columns (``event_row``)."""

    __slots__ = ("columns",)

    def __init__(self, columns: dict[str, Any]) -> None:
        super().__init__()
        self.columns = columns

    def column(self, name: str) -> Any:
        return self.columns.get(name)

    def meta(self, key: str) -> Any:
        meta = self.columns.get("meta")
        return meta.get(key) if isinstance(meta, dict) else None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.columns)


def _ms(seconds: float) -> int:
    """A broker-clock time (an event's ``at``) in ms on the wall clock (broker_core.clock)."""
    return int(to_wall(seconds) * 1000)


def _message_columns(context: Context) -> dict[str, Any]:
    return {
        "id": context.id,
        "from_clientid": context.origin.name,
        "from_username": context.origin.username,
        "from_protocol": context.origin.protocol,
        "topic": context.topic,
        "qos": context.qos,
        "retain": context.retain,
        "payload": _text(context.payload),
        "publish_received_at": to_wall_ns(context.received_at) // 1_000_000,
        "meta": dict(context.meta),
        "properties": properties_fields(context.properties),
    }


#: The columns every broker event's row has (``event_row``), those a
#: ``$events/message_*`` row adds (the message's, with the receiving client's), and every
#: column some event's row has (``SELECT *`` on events; names a rule may mean).
EVENT_COMMON_COLUMNS = ("event", "timestamp", "node", "clientid", "username")
EVENT_MESSAGE_COLUMNS = (
    "id", "from_clientid", "from_username", "from_protocol", "topic", "qos", "retain",
    "payload", "publish_received_at", "meta", "properties",
)  # fmt: skip
EVENT_COLUMNS = tuple(dict.fromkeys((
    *EVENT_COMMON_COLUMNS, *MESSAGE_COLUMNS, *EVENT_MESSAGE_COLUMNS, "peername", "packet_id",
    "reason", "ipaddress", "proto_ver", "proto_name", "keepalive", "clean_start",
    "expiry_interval", "listener", "reason_code", "conn_ack", "connected_at",
    "session_present", "disconnected_at", "opts",
)))  # fmt: skip


def event_row(event: BrokerEvent, node: str = "edgebus") -> dict[str, Any]:
    """The columns of a broker event, with EMQX's names: ``event`` (``client.connected``),
    ``timestamp`` (ms), ``node`` and the event's own fields."""
    row: dict[str, Any] = {"event": event.NAME, "timestamp": _ms(event.at), "node": node}
    if isinstance(event, MessagePublish):
        row.update(MessageRow(event.message, node).as_dict())
        row["event"] = event.NAME
        return row
    if isinstance(event, MessageDelivered | MessageAcked | MessageDropped):
        row.update(_message_columns(event.message))
        row["clientid"] = event.client_id
        row["username"] = event.username
        if isinstance(event, MessageDelivered | MessageAcked):
            row["peername"] = event.peer
            row["qos"] = event.qos
        if isinstance(event, MessageDelivered):
            row["retain"] = event.retain
        if isinstance(event, MessageAcked):
            row["packet_id"] = event.packet_id
        if isinstance(event, MessageDropped):
            row["reason"] = event.reason
        return row
    row["clientid"] = event.client_id
    row["username"] = event.username
    if isinstance(event, SessionTerminated):
        row["reason"] = event.reason
        return row
    row["peername"] = event.peer
    if event.peer:
        row["ipaddress"] = event.peer.rpartition(":")[0]
    if isinstance(event, ClientConnect | ClientConnack | ClientConnected):
        row["proto_ver"] = event.protocol_level
        row["proto_name"] = "MQIsdp" if event.protocol_level == 3 else "MQTT"
        row["keepalive"] = event.keep_alive
        row["clean_start"] = event.clean_start
        row["expiry_interval"] = event.expiry_interval
        row["listener"] = event.listener
        if isinstance(event, ClientConnack):
            row["reason_code"] = event.reason_code
            row["conn_ack"] = event.reason_code
        if isinstance(event, ClientConnected):
            row["connected_at"] = _ms(event.at)
            row["session_present"] = event.session_present
        return row
    if isinstance(event, ClientDisconnected):
        row["proto_ver"] = event.protocol_level
        row["reason_code"] = event.reason_code
        row["reason"] = "normal" if event.reason_code == 0 else event.reason  # EMQX's word
        row["disconnected_at"] = _ms(event.at)
        return row
    # subscribe, unsubscribe, subscribed, unsubscribed
    row["topic"] = event.topic_filter
    if isinstance(event, ClientSubscribe | SessionSubscribed):
        row["qos"] = event.qos
        row["opts"] = {
            "qos": event.qos,
            "nl": int(event.no_local),
            "rap": int(event.retain_as_published),
            "rh": event.retain_handling,
        }
    return row
