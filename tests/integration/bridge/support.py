"""What the bridge tests share: a mosquitto standing in for the cloud, paho peers on
both sides, waiting for counts.

``Remote`` runs Debian's mosquitto on fixed loopback ports, so that it can be stopped
and started again where the bridge expects it:

- ``port``: plain MQTT, anonymous (the generic ``mqtt`` bridge, and the readiness probe);
- ``tls_port`` (with a ``Pki``): TLS and a password file, like EMQX Cloud;
- ``mtls_port`` (with a ``Pki``): mutual TLS, ``require_certificate`` and
  ``use_identity_as_username``, like AWS IoT Core's data plane.

Persistence is on and the subscribers' sessions are persistent, so what mosquitto
acknowledged survives its own restart (it saves on SIGTERM): a count that comes up
short is the bridge's loss, not the stand-in's.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle, free_port, start_mosquitto
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.api.support import Http
from tests.integration.components.support import wait_for
from tests.integration.listeners.pki import Pki

__all__ = [
    "PASSWORD",
    "USER",
    "Collector",
    "Remote",
    "StreamPublisher",
    "first_occurrences",
    "paho_client",
    "settles",
    "wait_until",
]

T = TypeVar("T")

#: Polls ``what()`` until ``done`` says yes (scaled deadline); the components tests' own.
wait_until = wait_for

USER = "gateway-1"
PASSWORD = "cloud-secret-1"


class Remote:
    """A restartable mosquitto; see the module docstring."""

    def __init__(self, workdir: Path, pki: Pki | None = None, *, host: str = "127.0.0.1") -> None:
        self.workdir = workdir
        self.pki = pki
        self.host = host
        self.port = free_port()
        self.tls_port = free_port() if pki else None
        self.mtls_port = free_port() if pki else None
        self.handle: BrokerHandle | None = None
        workdir.mkdir(parents=True, exist_ok=True)
        if pki is not None:
            passwd = workdir / "passwd"
            subprocess.run(
                ["mosquitto_passwd", "-c", "-b", str(passwd), USER, PASSWORD],
                check=True,
                capture_output=True,
            )

    def _conf(self) -> str:
        lines = [
            "persistence true",
            f"persistence_location {self.workdir}/",
            "max_queued_messages 1000000",
            "max_inflight_messages 100",
        ]
        pki = self.pki
        if pki is not None:
            tls = [
                f"cafile {pki.ca}",
                f"certfile {pki.server.cert}",
                f"keyfile {pki.server.key}",
            ]
            lines += [
                f"listener {self.tls_port} {self.host}",
                *tls,
                f"password_file {self.workdir / 'passwd'}",
                "allow_anonymous false",
                f"listener {self.mtls_port} {self.host}",
                *tls,
                "require_certificate true",
                "use_identity_as_username true",
            ]
        return "\n".join(lines)

    def start(self) -> Remote:
        self.handle = start_mosquitto(
            self.workdir,
            self._conf(),
            port=self.port,
            head_conf="per_listener_settings true",
            log_type="error warning notice",
        )
        return self

    def stop(self) -> None:
        """SIGTERM: mosquitto saves its persistence file and exits."""
        if self.handle is not None:
            self.handle.stop()
            self.handle = None

    def __enter__(self) -> Remote:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def paho_client(client_id: str, *, version: int = paho.MQTTv311, **kw: Any) -> paho.Client:
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=version, **kw)
    client.reconnect_delay_set(0.05, 0.5)
    return client


class Collector:
    """A paho subscriber (persistent session, QoS 1) recording what arrives, in order."""

    def __init__(
        self,
        port: int,
        topic_filter: str,
        client_id: str = "collector",
        *,
        qos: int = 1,
        host: str = "127.0.0.1",
    ) -> None:
        self.messages: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        self.subscribed = threading.Event()
        self.client = paho_client(client_id, clean_session=False)
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe(topic_filter, qos)
        self.client.on_subscribe = lambda *a: self.subscribed.set()
        self.client.on_message = self._message
        self.client.connect(host, port, keepalive=30)
        self.client.loop_start()
        assert self.subscribed.wait(unit(10)), "the collector could not subscribe"

    def _message(self, client: paho.Client, userdata: Any, message: paho.MQTTMessage) -> None:
        with self.lock:
            self.messages.append((message.topic, message.payload))

    def payloads(self) -> list[bytes]:
        with self.lock:
            return [payload for _, payload in self.messages]

    def count(self) -> int:
        with self.lock:
            return len(self.messages)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def first_occurrences(numbers: list[int]) -> list[int]:
    """``numbers`` with every repeat removed, the first occurrence kept."""
    seen: set[int] = set()
    out = []
    for number in numbers:
        if number not in seen:
            seen.add(number)
            out.append(number)
    return out


#: What ends a publish's flow: PUBACK at QoS 1, PUBCOMP at QoS 2.
_FINAL = (mb.PacketType.PUBACK, mb.PacketType.PUBCOMP)


class StreamPublisher(threading.Thread):
    """Publishes ``count`` numbered QoS 1 (or 2) messages (payload ``b"<n>"``) to the gateway
    with a window of unfinished ones, on a raw socket (paho is too slow for a stream);
    records the numbers acknowledged (PUBACK; PUBCOMP at QoS 2), in the order of their
    acknowledgements. At QoS 2 keep ``window`` within the gateway's
    ``mqtt.receive_maximum`` (32 by default)."""

    def __init__(
        self,
        port: int,
        topic: str,
        count: int,
        *,
        first: int = 1,
        window: int = 100,
        rate: float | None = None,
        qos: int = 1,
    ) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.topic = topic
        self.numbers = range(first, first + count)
        self.window = window
        self.rate = rate  # messages per second at most (a stream spread over time)
        self.qos = qos
        self.acked: list[int] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            client = RawClient("127.0.0.1", self.port, protocol_level=4)
            client.send(mb.gen_connect(f"pub-{self.topic}-{self.numbers[0]}", keepalive=60))
            assert client.recv_packet().reason_code == 0
            inflight: dict[int, int] = {}
            numbers = iter(self.numbers)
            left = len(self.numbers)
            mid = 0
            started = time.monotonic()
            sent = 0
            while left:
                frames = []
                due = len(self.numbers)
                if self.rate is not None:
                    due = int((time.monotonic() - started) * self.rate) + 1
                while (
                    len(inflight) < self.window
                    and sent < due
                    and (number := next(numbers, None)) is not None
                ):
                    sent += 1
                    mid = mid % 65535 + 1
                    inflight[mid] = number
                    frames.append(mb.gen_publish(self.topic, str(number), qos=self.qos, mid=mid))
                if frames:
                    client.send(b"".join(frames))
                if not inflight:
                    time.sleep(0.005)  # paced: nothing to wait for yet
                    continue
                packet = client.recv_packet(unit(30))
                if packet.type == mb.PacketType.PUBREC:
                    client.send(mb.gen_pubrel(packet.packet_id))
                elif packet.type in _FINAL and packet.packet_id in inflight:
                    self.acked.append(inflight.pop(packet.packet_id))
                    left -= 1
            client.send(mb.gen_disconnect())
            client.close()
        except BaseException as exc:  # reported by done()
            self.error = exc

    def done_after_start(self, seconds: float = 60) -> list[int]:
        """Starts, waits until every message is acknowledged; the numbers acknowledged."""
        self.start()
        return self.done(seconds)

    def done(self, seconds: float = 60) -> list[int]:
        self.join(unit(seconds))
        assert not self.is_alive(), "the publisher did not finish"
        if self.error is not None:
            raise self.error
        return self.acked


def settles(what: Callable[[], T], quiet_s: float = 0.5, seconds: float = 10) -> T:
    """Waits until ``what()`` stays the same for ``quiet_s``; returns that value. (A count
    that must stop growing: a loop, a bridge that should have stopped.)"""

    def quiet() -> tuple[bool, T]:
        before = what()
        time.sleep(quiet_s)
        after = what()
        return before == after, after

    return wait_until(quiet, lambda q: q[0], seconds)[1]


def bridge_reply(http: Http, name: str = "cloud") -> dict[str, Any]:
    """``GET /api/v1/bridges/<name>``'s answer; {} while the gateway does not answer
    (restarting, stopped) or answers with an error."""
    try:
        reply = http.get(f"/api/v1/bridges/{name}")
    except OSError:
        return {}
    found: dict[str, Any] = reply.json() if reply.status == 200 else {}
    return found
