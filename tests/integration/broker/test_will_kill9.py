"""The wills of clients connected when the gateway is killed (``kill -9``) are published
after the restart (MQTT 5.0 3.1.2.5 [MQTT-3.1.2-8]: the will is published after the
Network Connection is closed, once its Will Delay Interval has passed or its session has
ended; a kill closes every connection).

A real ``edgebus run`` process with the SQLite store; SIGKILL; a restart on the same data
directory. The wills are watched by a subscriber with a persistent session made before the
kill (connected at the kill too): what is published for it at the restart waits in its
session until it resumes it. A QoS 1 PUBACK before the kill says that everything the store
was handed before it is committed.

Before, the will of a connected client was only in memory: every one of them was lost
(the subscriber got only the sentinel published after the restart).
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.brokers import BrokerHandle, start_edgebus
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

CONFIG = "persistence: sqlite\nsys:\n  events: true\n"
HOUR = 3600


class Run:
    """One gateway process, killed and started again on the same data directory."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.broker: BrokerHandle = start_edgebus(tmp_path, CONFIG)
        self.clients: list[RawClient] = []

    def raw(self, proto: int, client_id: str, **connect_args: object) -> RawClient:
        client = RawClient(self.broker.host, self.broker.port, protocol_level=proto)
        self.clients.append(client)
        client.do_connect(client_id, proto_ver=proto, **connect_args)  # type: ignore[arg-type]
        return client

    def subscriber(self, resume: bool) -> RawClient:
        """The watcher of ``k9w/#`` (QoS 1, session expiry 1 h)."""
        sub = self.raw(5, "k9-sub", clean_session=not resume,
                       properties={"session_expiry_interval": HOUR})  # fmt: skip
        if resume:
            assert sub.connack is not None and sub.connack.session_present
        else:
            assert sub.subscribe([("k9w/#", 1)]).reason_codes == [1]
        return sub

    def will(self, proto: int, client_id: str, persistent: bool, delay: int = 0) -> RawClient:
        """A client with a will on ``k9w/<client_id>``, payload ``gone``, QoS 1."""
        props = {"session_expiry_interval": HOUR} if proto == 5 and persistent else None
        will_props = {"will_delay_interval": delay} if delay else None
        return self.raw(proto, client_id, clean_session=not persistent or proto == 5,
                        properties=props, will_topic=f"k9w/{client_id}", will_payload=b"gone",
                        will_qos=1, will_properties=will_props)  # fmt: skip

    def kill(self, barrier: RawClient) -> None:
        """SIGKILL once ``barrier``'s QoS 1 PUBACK says the store committed what came
        before; the gateway is started again on the same data directory."""
        ack = barrier.publish("k9-barrier", b"", qos=1)
        assert ack is not None
        self.broker.process.send_signal(signal.SIGKILL)
        self.broker.process.wait(unit(10))
        self.broker.stop()  # closes its logs
        self.close_clients()
        self.broker = start_edgebus(self.tmp_path, CONFIG)

    def terminate(self) -> None:
        """A clean stop (SIGTERM), then a start on the same data directory."""
        self.broker.stop()
        assert self.broker.process.returncode == 0, self.broker.log_tail()
        self.close_clients()
        self.broker = start_edgebus(self.tmp_path, CONFIG)

    def close_clients(self) -> None:
        for client in self.clients:
            client.close()
        self.clients.clear()


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    gateway = Run(tmp_path)
    try:
        yield gateway
    finally:
        gateway.close_clients()
        gateway.broker.stop()


def wills_until_sentinel(run: Run, sub: RawClient) -> list[str]:
    """The topics ``sub`` receives up to a sentinel published now (in order)."""
    run.raw(5, "k9-sentinel").publish("k9w/sentinel", b"", qos=1)
    topics: list[str] = []
    while True:
        packet = sub.recv_publish(unit(15))
        if packet.topic == "k9w/sentinel":
            return topics
        assert packet.topic is not None and packet.payload == b"gone"
        topics.append(packet.topic)


def wait_disconnected(watcher: RawClient, client_ids: set[str]) -> None:
    """The broker's $SYS events say it handled the end of these clients' connections."""
    ended: set[str] = set()
    while ended != client_ids:
        packet = watcher.recv_publish(unit(15))
        assert packet.topic is not None and packet.topic.endswith("/disconnected")
        ended.add(packet.topic.split("/")[-2])


def test_the_wills_of_clients_connected_at_a_kill_are_published_after_it(run: Run) -> None:
    run.subscriber(resume=False)
    watcher = run.raw(5, "k9-watcher")
    assert watcher.subscribe([("$SYS/brokers/+/clients/+/disconnected", 0)]).reason_codes == [0]
    run.will(5, "v5-persistent", persistent=True)
    run.will(5, "v5-clean", persistent=False)
    run.will(4, "v311-persistent", persistent=True)
    run.will(4, "v311-clean", persistent=False)
    # A normal DISCONNECT (0x00) deletes the will [MQTT-3.1.2-10]: nothing after the kill.
    run.will(5, "v5-disconnected", persistent=True).disconnect(0)
    run.will(4, "v311-disconnected", persistent=True).disconnect()
    wait_disconnected(watcher, {"v5-disconnected", "v311-disconnected"})
    run.kill(barrier=watcher)
    sub = run.subscriber(resume=True)
    assert sorted(wills_until_sentinel(run, sub)) == [
        "k9w/v311-clean",
        "k9w/v311-persistent",
        "k9w/v5-clean",
        "k9w/v5-persistent",
    ]
    # Published once: a second kill and restart brings none back.
    run.kill(barrier=sub)
    sub = run.subscriber(resume=True)
    assert wills_until_sentinel(run, sub) == []


def test_a_delayed_will_after_a_kill_waits_its_delay_or_a_resume(run: Run) -> None:
    # The Will Delay Interval counts from when the broker last ran; a client that resumes
    # its session within it cancels the will [MQTT-3.1.3-9], as after a lost connection.
    # Two wills due at the same moment: the control's arrives, the resumed one's never.
    delay = math.ceil(unit(8))
    run.subscriber(resume=False)
    run.will(5, "v5-resumed", persistent=True, delay=delay)
    run.will(5, "v5-control", persistent=True, delay=delay)
    killed_at = time.time()
    run.kill(barrier=run.raw(5, "k9-barrier-client"))
    resumed = run.raw(5, "v5-resumed", clean_session=False,
                      properties={"session_expiry_interval": HOUR})  # fmt: skip
    assert time.time() < killed_at + delay, "resumed after the will was due: raise the delay"
    assert resumed.connack is not None and resumed.connack.session_present
    sub = run.subscriber(resume=True)
    assert sub.recv_publish(delay + unit(15)).topic == "k9w/v5-control"
    assert wills_until_sentinel(run, sub) == []
    resumed.disconnect(0)


def test_a_clean_stop_publishes_the_wills_once(run: Run) -> None:
    # A clean stop ends every connection first: the wills go out then, and the store
    # holds none of them afterwards, so the restart publishes nothing again.
    run.subscriber(resume=False)
    run.will(5, "v5-stopped", persistent=False)
    run.will(4, "v311-stopped", persistent=True)
    run.terminate()
    sub = run.subscriber(resume=True)
    assert sorted(wills_until_sentinel(run, sub)) == ["k9w/v311-stopped", "k9w/v5-stopped"]
    log = run.broker.log_tail(200)
    assert "0 wills of ended sessions" in log  # the store's line at open, read
    assert "left after a clean stop" not in log
