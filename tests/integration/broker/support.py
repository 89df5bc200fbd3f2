"""Helpers of the broker integration tests: a paho-mqtt 2.x client with bounded waits,
a factory that opens paho and raw clients against one in-process gateway, and a bounded
wait-for-condition.

Every wait here is bounded and written in timeout units (``tests.helpers.timeouts.unit``).
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from tests.helpers.gateway import RunningGateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

__all__ = [
    "BOTH",
    "Clients",
    "ConnackInfo",
    "DisconnectInfo",
    "PahoClient",
    "SubscribeOptions",
    "connect_props",
    "disconnect_props",
    "publish_props",
    "raw_publish_ok",
    "short_wait",
    "subscribe_props",
    "wait_until",
    "will_props",
]

T = TypeVar("T")

# MQTT 3.1.1 and MQTT 5.0, for the features both have.
BOTH = pytest.mark.parametrize("proto", [4, 5], ids=["v311", "v5"])


def short_wait() -> float:
    """The bounded wait used to check that something does NOT arrive."""
    return unit(0.3)


def wait_until(
    predicate: Callable[[], T], timeout: float | None = None, what: str = "condition"
) -> T:
    """Polls ``predicate`` until it returns something truthy; fails after ``timeout``."""
    wait = unit(10) if timeout is None else timeout
    deadline = time.monotonic() + wait
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {wait:.2f}s (last: {value!r})")
        time.sleep(0.01)


def _props(packet_type: int, values: dict[str, Any]) -> Properties:
    props = Properties(packet_type)
    for name, value in values.items():
        setattr(props, name, value)
    return props


def connect_props(**values: Any) -> Properties:
    """paho CONNECT properties by paho name: ``connect_props(SessionExpiryInterval=10)``."""
    return _props(PacketTypes.CONNECT, values)


def publish_props(**values: Any) -> Properties:
    """paho PUBLISH properties by paho name: ``publish_props(MessageExpiryInterval=5)``."""
    return _props(PacketTypes.PUBLISH, values)


def disconnect_props(**values: Any) -> Properties:
    """paho DISCONNECT properties: ``disconnect_props(SessionExpiryInterval=0)``."""
    return _props(PacketTypes.DISCONNECT, values)


def will_props(**values: Any) -> Properties:
    """paho Will properties: ``will_props(WillDelayInterval=5)``."""
    return _props(PacketTypes.WILLMESSAGE, values)


def subscribe_props(**values: Any) -> Properties:
    """paho SUBSCRIBE properties: ``subscribe_props(SubscriptionIdentifier=7)``."""
    return _props(PacketTypes.SUBSCRIBE, values)


@dataclass
class ConnackInfo:
    """What paho reported for a CONNACK."""

    reason_code: int
    session_present: bool
    properties: Properties | None

    def prop(self, name: str, default: Any = None) -> Any:
        return getattr(self.properties, name, default) if self.properties else default


@dataclass
class DisconnectInfo:
    """What paho reported when the connection ended."""

    reason_code: int
    from_server: bool
    properties: Properties | None


class PahoClient:
    """A paho-mqtt 2.x client run by its own network thread, with bounded waits.

    Received messages collect in a queue (``expect_message``); SUBACK, PUBACK/PUBCOMP,
    CONNACK and the disconnection are recorded as they arrive. ``reconnect_on_failure``
    is off: a connection the broker closes stays closed.
    """

    def __init__(
        self,
        host: str,
        port: int,
        proto: int,
        client_id: str = "",
        *,
        clean_session: bool = True,
        manual_ack: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.proto = proto
        self.v5 = proto == 5
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=MQTTProtocolVersion.MQTTv5 if self.v5 else MQTTProtocolVersion.MQTTv311,
            clean_session=None if self.v5 else clean_session,
            reconnect_on_failure=False,
            manual_ack=manual_ack,
        )
        self.client_id = client_id
        #: set by ``Clients``: True once the broker has ended this client's connection
        self.broker_saw_the_end: Callable[[], bool] | None = None
        self.messages: queue.Queue[mqtt.MQTTMessage] = queue.Queue()
        self.connack: ConnackInfo | None = None
        self.disconnect_info: DisconnectInfo | None = None
        self._connected = threading.Event()
        self._disconnected = threading.Event()
        self._cond = threading.Condition()
        self._subacks: dict[int, tuple[list[int], Properties | None]] = {}
        self._pubacks: dict[int, int] = {}
        self._running = False
        self._aborted = False
        client = self.client
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        client.on_unsubscribe = self._on_unsubscribe
        client.on_publish = self._on_publish

    # -- callbacks (paho's network thread) --------------------------------------------------

    def _on_connect(self, client: Any, userdata: Any, flags: Any, rc: Any, props: Any) -> None:
        self.connack = ConnackInfo(rc.value, bool(flags.session_present), props)
        self._connected.set()

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, rc: Any, props: Any) -> None:
        self.disconnect_info = DisconnectInfo(
            rc.value, bool(flags.is_disconnect_packet_from_server), props
        )
        self._disconnected.set()

    def _on_message(self, client: Any, userdata: Any, message: mqtt.MQTTMessage) -> None:
        self.messages.put(message)

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, codes: Any, props: Any) -> None:
        with self._cond:
            self._subacks[mid] = ([code.value for code in codes], props)
            self._cond.notify_all()

    def _on_unsubscribe(self, client: Any, userdata: Any, mid: int, codes: Any, props: Any) -> None:
        with self._cond:
            self._subacks[mid] = ([code.value for code in codes], props)
            self._cond.notify_all()

    def _on_publish(self, client: Any, userdata: Any, mid: int, rc: Any, props: Any) -> None:
        with self._cond:
            self._pubacks[mid] = rc.value
            self._cond.notify_all()

    # -- commands ---------------------------------------------------------------------------

    def will_set(
        self,
        topic: str,
        payload: bytes = b"",
        qos: int = 0,
        retain: bool = False,
        properties: Properties | None = None,
    ) -> None:
        self.client.will_set(topic, payload, qos, retain, properties)

    def connect(
        self,
        *,
        keepalive: int = 60,
        clean_start: bool = True,
        properties: Properties | None = None,
        expect_success: bool = True,
    ) -> ConnackInfo:
        """Connects and waits for the CONNACK (success asserted unless told otherwise)."""
        if self.v5:
            self.client.connect(
                self.host, self.port, keepalive, clean_start=clean_start, properties=properties
            )
        else:
            self.client.connect(self.host, self.port, keepalive)
        self.client.loop_start()
        self._running = True
        if not self._connected.wait(unit(10)):
            raise AssertionError(f"{self.client_id}: no CONNACK within {unit(10):.1f}s")
        assert self.connack is not None
        if expect_success:
            assert self.connack.reason_code == 0
        return self.connack

    def subscribe(
        self,
        topic: str | list[tuple[str, Any]],
        qos: int = 0,
        *,
        options: SubscribeOptions | None = None,
        properties: Properties | None = None,
    ) -> list[int]:
        """Subscribes and returns the SUBACK's reason codes (granted QoS)."""
        if options is not None:
            result, mid = self.client.subscribe(topic, options=options, properties=properties)
        elif isinstance(topic, list):
            result, mid = self.client.subscribe(topic, properties=properties)
        else:
            result, mid = self.client.subscribe(topic, qos, properties=properties)
        assert result == mqtt.MQTT_ERR_SUCCESS
        assert mid is not None
        return self._wait_ack(self._subacks, mid, "SUBACK")[0]

    def unsubscribe(self, topic: str) -> list[int]:
        result, mid = self.client.unsubscribe(topic)
        assert result == mqtt.MQTT_ERR_SUCCESS
        assert mid is not None
        return self._wait_ack(self._subacks, mid, "UNSUBACK")[0]

    def publish(
        self,
        topic: str,
        payload: bytes | str = b"",
        qos: int = 0,
        retain: bool = False,
        properties: Properties | None = None,
    ) -> int | None:
        """Publishes and waits until the QoS flow completed.

        Returns the reason code of the PUBACK / PUBREC (MQTT 5; 0 for 3.1.1), None for QoS 0.
        """
        info = self.client.publish(topic, payload, qos, retain, properties)
        assert info.rc == mqtt.MQTT_ERR_SUCCESS
        info.wait_for_publish(unit(10))
        assert info.is_published()
        if not qos:
            return None
        return self._wait_ack(self._pubacks, info.mid, "PUBACK/PUBCOMP")

    def _wait_ack(self, table: dict[int, T], mid: int, what: str) -> T:
        with self._cond:
            ok = self._cond.wait_for(lambda: mid in table, unit(10))
            if not ok:
                raise AssertionError(f"{self.client_id}: no {what} for packet id {mid}")
            return table.pop(mid)

    def ack(self, message: mqtt.MQTTMessage) -> None:
        """With ``manual_ack``: acknowledge a received QoS 1/2 message."""
        self.client.ack(message.mid, message.qos)

    def disconnect(
        self, reason_code: int | None = None, properties: Properties | None = None
    ) -> None:
        """A normal DISCONNECT (MQTT 5: with ``reason_code``), then waits for the close and,
        for a client of ``Clients``, until the broker has read it: a message published by
        another client after this returns is never routed to this connection."""
        if reason_code is not None:
            from paho.mqtt.reasoncodes import ReasonCode

            code = ReasonCode(PacketTypes.DISCONNECT, identifier=reason_code)
            self.client.disconnect(code, properties)
        else:
            self.client.disconnect(properties=properties)
        self.wait_disconnected()
        self._stop()
        if self.broker_saw_the_end is not None:
            wait_until(self.broker_saw_the_end, unit(5), f"{self.client_id}: DISCONNECT handled")

    def abort(self) -> None:
        """Closes the connection without DISCONNECT (an abnormal close: the will is due)."""
        sock = self.client.socket()
        assert sock is not None
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # paho's loop sees the close and ends
        self._aborted = True
        self.wait_disconnected()
        self._stop()

    def _stop(self) -> None:
        if self._running:
            self._running = False
            self.client.loop_stop()

    def close(self) -> None:
        """Teardown: DISCONNECT if still connected, stop the network thread."""
        if self._running and not self._aborted and self.client.is_connected():
            self.client.disconnect()
            self._disconnected.wait(unit(2))
        self._stop()
        sock = self.client.socket()
        if sock is not None:
            sock.close()

    # -- expectations -----------------------------------------------------------------------

    def expect_message(self, timeout: float | None = None) -> mqtt.MQTTMessage:
        wait = unit(10) if timeout is None else timeout
        try:
            return self.messages.get(timeout=wait)
        except queue.Empty:
            raise AssertionError(f"{self.client_id}: no message within {wait:.2f}s") from None

    def expect_messages(self, count: int, timeout: float | None = None) -> list[mqtt.MQTTMessage]:
        wait = unit(10) if timeout is None else timeout
        deadline = time.monotonic() + wait
        got: list[mqtt.MQTTMessage] = []
        while len(got) < count:
            remaining = deadline - time.monotonic()
            try:
                got.append(self.messages.get(timeout=max(remaining, 0.001)))
            except queue.Empty:
                raise AssertionError(
                    f"{self.client_id}: {len(got)} of {count} messages within {wait:.2f}s: "
                    f"{[(m.topic, m.payload) for m in got]}"
                ) from None
        return got

    def expect_no_message(self, wait: float | None = None) -> None:
        try:
            message = self.messages.get(timeout=short_wait() if wait is None else wait)
        except queue.Empty:
            return
        raise AssertionError(
            f"{self.client_id}: unexpected message {message.topic!r} {message.payload!r}"
        )

    def drain(self, wait: float | None = None) -> list[mqtt.MQTTMessage]:
        """Every message that arrives within ``wait`` (already queued ones included)."""
        deadline = time.monotonic() + (short_wait() if wait is None else wait)
        got: list[mqtt.MQTTMessage] = []
        while True:
            remaining = deadline - time.monotonic()
            try:
                got.append(self.messages.get(timeout=max(remaining, 0.001)))
            except queue.Empty:
                return got

    def wait_disconnected(self, timeout: float | None = None) -> DisconnectInfo:
        wait = unit(10) if timeout is None else timeout
        if not self._disconnected.wait(wait):
            raise AssertionError(f"{self.client_id}: still connected after {wait:.2f}s")
        assert self.disconnect_info is not None
        return self.disconnect_info

    @property
    def is_connected(self) -> bool:
        return self.client.is_connected()


class Clients:
    """Opens paho and raw clients against one gateway; closes them all after the test."""

    def __init__(self, gw: RunningGateway) -> None:
        self.gw = gw
        self.host, self.port = gw.address()
        self._count = itertools.count(1)
        self._paho: list[PahoClient] = []
        self._raw: list[RawClient] = []

    def client_id(self, role: str = "c") -> str:
        return f"{role}{next(self._count)}"

    def paho(
        self,
        proto: int,
        client_id: str | None = None,
        *,
        clean_session: bool = True,
        manual_ack: bool = False,
    ) -> PahoClient:
        """A paho client, not connected yet (``client_id=""``: let the server choose)."""
        cid = self.client_id() if client_id is None else client_id
        client = PahoClient(
            self.host, self.port, proto, cid, clean_session=clean_session, manual_ack=manual_ack
        )
        if cid:
            client.broker_saw_the_end = lambda: self.offline(cid)
        self._paho.append(client)
        return client

    def offline(self, client_id: str) -> bool:
        """True when the broker has no connection for ``client_id`` (session or not)."""
        broker = self.gw.broker

        def check() -> bool:
            state = broker.sessions.get(client_id)
            return state is None or state.connection is None

        return self.gw.call(check)

    def connect(
        self,
        proto: int,
        client_id: str | None = None,
        *,
        clean: bool = True,
        keepalive: int = 60,
        properties: Properties | None = None,
        manual_ack: bool = False,
    ) -> PahoClient:
        """A connected paho client; ``clean`` is Clean Session (3.1.1) or Clean Start (5.0)."""
        client = self.paho(proto, client_id, clean_session=clean, manual_ack=manual_ack)
        client.connect(keepalive=keepalive, clean_start=clean, properties=properties)
        return client

    def subscriber(
        self,
        proto: int,
        topics: str | Iterable[str],
        qos: int = 0,
        client_id: str | None = None,
        **connect_args: Any,
    ) -> PahoClient:
        """A connected paho client subscribed to ``topics`` (each granted ``qos``)."""
        client = self.connect(proto, client_id, **connect_args)
        for topic in [topics] if isinstance(topics, str) else list(topics):
            assert client.subscribe(topic, qos) == [qos]
        return client

    def raw(self, proto: int = 4) -> RawClient:
        """A raw TCP connection with nothing sent yet."""
        client = RawClient(self.host, self.port, protocol_level=proto)
        self._raw.append(client)
        return client

    def raw_connect(
        self, proto: int, client_id: str | None = None, **connect_args: Any
    ) -> RawClient:
        """A raw client whose CONNECT was accepted."""
        client = self.raw(proto)
        cid = self.client_id("raw") if client_id is None else client_id
        client.do_connect(cid, proto_ver=proto, **connect_args)
        return client

    def close_all(self) -> None:
        for client in self._paho:
            client.close()
        for raw in self._raw:
            raw.close()
        self._paho.clear()
        self._raw.clear()


def raw_publish_ok(sender: RawClient, receiver: RawClient, topic: str, payload: bytes) -> None:
    """``sender`` publishes QoS 1 and ``receiver`` (subscribed) gets exactly that message."""
    sender.publish(topic, payload, qos=1)
    packet = receiver.recv_publish()
    assert (packet.topic, packet.payload) == (topic, payload)
