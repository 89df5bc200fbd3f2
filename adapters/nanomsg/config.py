"""Configuration of the ``nng`` adapter (NNG through pynng).

```yaml
adapters:
  - type: nng
    name: cell
    nng_to_mqtt:
      - socket: sub0
        connect: ipc:///run/nanomq/nng_pub.ipc      # a NanoMQ NNG pub bridge
        subscribe: [remote/nng]
        to_mqtt: cell/{nng.topic}
    mqtt_to_nng:
      - from_mqtt: cmd/#
        socket: push0
        bind: tcp://127.0.0.1:5600
```
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Self

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

__all__ = ["NngAdapterConfig", "NngInbound", "NngOutbound"]

_FRAMES = (
    "Frame layout: `prefix` (`topic + delimiter + payload`, NanoMQ's NNG bridge format) or"
    " `raw` (the message is the payload)."
)
_DELIMITER = (
    "`prefix` layout: the bytes between topic and payload (NanoMQ's `nng_delimiter`)."
    " Empty: the topic is the `subscribe` prefix the message starts with."
)
_BUFFER = (
    "Messages the socket buffers per direction (NNG's send/receive buffer; up to 8192)."
    " A `pub0` socket drops silently for a subscriber that lags behind it (NNG does not"
    " report it): use `push0` where nothing may be lost."
)


class _Nng(SocketMapping):
    """What NNG mappings have, both ways: schemes, topic key, layouts, buffers."""

    SCHEMES: ClassVar[frozenset[str]] = frozenset({"tcp", "ipc", "ws"})
    TOPIC_KEY: ClassVar[str] = "nng.topic"

    frames: Literal["prefix", "raw"] = Field(
        default="prefix",
        description=_FRAMES,
        json_schema_extra=doc_default("`prefix`; `raw` for `rep0` and `req0`"),
    )
    delimiter: str = Field(default="/", description=_DELIMITER)
    high_water_mark: int = Field(default=8192, ge=1, le=8192, description=_BUFFER)


class NngInbound(_Nng, InboundMapping):
    """NNG messages to MQTT (`nng_to_mqtt[]`): a `sub0`, `pull0` or `pair` socket whose
    messages are published, or a `rep0` front whose requests go to an MQTT responder."""

    REQUEST_SOCKETS: ClassVar[frozenset[str]] = frozenset({"rep0"})

    socket: Literal["sub0", "pull0", "pair0", "pair1", "rep0"] = Field(
        description="`sub0`, `pull0`, `pair0`, `pair1`; `rep0` (up to `max_inflight`"
        " requests at once) to serve NNG requests with an MQTT 5 responder."
    )


class NngOutbound(_Nng, OutboundMapping):
    """MQTT messages to NNG (`mqtt_to_nng[]`): sent on a `pub0`, `push0` or `pair`
    socket, or as requests to an NNG `rep0` service (`req0`) whose replies go back to
    the MQTT 5 requester."""

    REQUEST_SOCKETS: ClassVar[frozenset[str]] = frozenset({"req0"})

    socket: Literal["pub0", "push0", "pair0", "pair1", "req0"] = Field(
        description="`pub0`, `push0`, `pair0`, `pair1`; `req0` (up to `max_inflight`"
        " requests at once) to an NNG `rep0` service."
    )


class NngAdapterConfig(AdapterConfigBase):
    """The `nng` adapter: NNG (nanomsg) sockets mapped to MQTT topics, both ways."""

    type: Literal["nng"] = Field(description="Adapter type.")
    nng_to_mqtt: tuple[NngInbound, ...] = Field(
        default=(), description="NNG sockets whose messages (or requests) go to MQTT."
    )
    mqtt_to_nng: tuple[NngOutbound, ...] = Field(
        default=(), description="MQTT messages (or requests) sent on NNG sockets."
    )

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> list[tuple[Loc, str]]:
        return mapping_names_as_written(data, failed, "nng_to_mqtt", "mqtt_to_nng")

    @model_validator(mode="after")
    def _some_mapping(self) -> Self:
        check_mappings(self.nng_to_mqtt, self.mqtt_to_nng, "nng_to_mqtt or mqtt_to_nng")
        return self
