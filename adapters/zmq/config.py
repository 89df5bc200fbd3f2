"""Configuration of the ``zmq`` adapter (ZeroMQ through pyzmq).

```yaml
adapters:
  - type: zmq
    name: floor
    zmq_to_mqtt:
      - socket: sub
        connect: tcp://127.0.0.1:5556
        subscribe: [sensors/]
        to_mqtt: floor/{zmq.topic}
    mqtt_to_zmq:
      - from_mqtt: cmd/{robot}/{rest#}
        socket: pub
        bind: tcp://127.0.0.1:5557
        topic: "{robot}/{rest}"
```
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import Field, model_validator

from adapters.sockets.config import (
    InboundMapping,
    OutboundMapping,
    SocketMapping,
    check_mappings,
    mapping_names_as_written,
)
from gateway.config.introspect import Loc
from gateway.config.models.adapter_base import AdapterConfigBase
from gateway.config.models.base import doc_default
from gateway.config.values import DurationSpec

__all__ = ["ZmqAdapterConfig", "ZmqInbound", "ZmqOutbound"]

_FRAMES = (
    "Frame layout: `multipart` (`[topic, payload]`), `prefix` (one frame `topic +"
    " delimiter + payload`, NanoMQ's `sub_pre`/`pub_pre`) or `raw` (one frame, the payload)."
)


class _Zmq(SocketMapping):
    """What ZeroMQ mappings have, both ways: schemes, topic key, layouts, high-water
    marks."""

    SCHEMES: ClassVar[frozenset[str]] = frozenset({"tcp", "ipc"})
    TOPIC_KEY: ClassVar[str] = "zmq.topic"

    frames: Literal["multipart", "prefix", "raw"] = Field(
        default="multipart",
        description=_FRAMES,
        json_schema_extra=doc_default(
            "`multipart`; `raw` for request/response sockets (`rep`, `router`, `req`, `dealer`)"
        ),
    )
    high_water_mark: int = Field(
        default=100_000,
        ge=1,
        description="Messages queued per peer and direction (SNDHWM and RCVHWM; ZeroMQ's"
        " own default is 1000). When full, a `push`, `req` or `dealer` send waits for room,"
        " a `pub` / `xpub` send waits up to `send_timeout` and then drops (counted).",
    )


class ZmqInbound(_Zmq, InboundMapping):
    """ZeroMQ messages to MQTT (`zmq_to_mqtt[]`): a `sub` or `pull` socket whose messages
    are published, or a `rep` / `router` front whose requests go to an MQTT responder."""

    REQUEST_SOCKETS: ClassVar[frozenset[str]] = frozenset({"rep", "router"})

    socket: Literal["sub", "pull", "rep", "router"] = Field(
        description="`sub`, `pull`; `rep` (one request at a time) or `router` (up to"
        " `max_inflight`) to serve ZeroMQ requests with an MQTT 5 responder."
    )


class ZmqOutbound(_Zmq, OutboundMapping):
    """MQTT messages to ZeroMQ (`mqtt_to_zmq[]`): sent on a `pub`, `xpub` or `push`
    socket, or as requests to a ZeroMQ service (`req`, `dealer`) whose replies go back to
    the MQTT 5 requester."""

    REQUEST_SOCKETS: ClassVar[frozenset[str]] = frozenset({"req", "dealer"})

    socket: Literal["pub", "xpub", "push", "req", "dealer"] = Field(
        description="`pub`, `push`; `xpub` (subscribes on MQTT to what its ZeroMQ"
        " subscribers subscribe to); `req` (one request at a time) or `dealer` (up to"
        " `max_inflight`) to a ZeroMQ `rep`/`router` service."
    )
    send_timeout: Annotated[float, DurationSpec()] = Field(
        default=1.0,
        description="`pub` / `xpub`: how long a send waits while a subscriber's queue is"
        " full (`high_water_mark`) before the message is dropped (counted); after one such"
        " drop, sends drop at once until one goes through.",
    )

    def _topic_problem(self) -> str | None:
        if self.socket == "xpub":
            head, found, tail = self.topic.partition("{mqtt.topic}")
            if not found or tail or "{" in head:
                return "an xpub socket needs a topic of the form `[prefix]{mqtt.topic}`"
        return super()._topic_problem()


class ZmqAdapterConfig(AdapterConfigBase):
    """The `zmq` adapter: ZeroMQ sockets mapped to MQTT topics, both ways."""

    type: Literal["zmq"] = Field(description="Adapter type.")
    zmq_to_mqtt: tuple[ZmqInbound, ...] = Field(
        default=(), description="ZeroMQ sockets whose messages (or requests) go to MQTT."
    )
    mqtt_to_zmq: tuple[ZmqOutbound, ...] = Field(
        default=(), description="MQTT messages (or requests) sent on ZeroMQ sockets."
    )
    linger: Annotated[float, DurationSpec()] = Field(
        default=1.0,
        description="At shutdown, how long unsent messages may wait for their peers.",
    )

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> list[tuple[Loc, str]]:
        return mapping_names_as_written(data, failed, "zmq_to_mqtt", "mqtt_to_zmq")

    @model_validator(mode="after")
    def _some_mapping(self) -> Self:
        check_mappings(self.zmq_to_mqtt, self.mqtt_to_zmq, "zmq_to_mqtt or mqtt_to_zmq")
        return self
