"""The states of one MQTT network connection (see the table in ``session``)."""

from __future__ import annotations

import enum

__all__ = ["ConnState"]


class ConnState(enum.Enum):
    AWAIT_CONNECT = "await_connect"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    CLOSED = "closed"
