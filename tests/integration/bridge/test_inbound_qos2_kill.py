"""Inbound QoS 2 (a bridge's remote subscription) across ``kill -9`` of the gateway:
every message the remote's publisher saw completed reaches the local persistent
subscriber exactly once.

The remote is Debian's mosquitto; its publisher sends numbered QoS 2 messages (counting
PUBCOMPs) at a steady rate while the gateway (an ``edgebus run`` process) is killed with
SIGKILL several times, at different points of the stream, and started again. The bridge
keeps a persistent session at the remote (``clean_start: false``, session expiry 1h), so
mosquitto resends every QoS 2 PUBLISH the bridge did not answer with PUBREC, and the
PUBRELs of those it did, when the bridge resumes (MQTT 5.0 4.4). A resent PUBLISH whose
Packet Identifier the bridge recorded (with the local delivery, in the broker's store)
must not be delivered again; one it did not record must be.

The local subscriber (QoS 2, a persistent session) subscribes once and stays offline: what
the bridge brought in waits in its session in the gateway's store, and is read at the end.
In the ``5-tap`` case a second bridge forwards what the first brings in, so its queue, a
durable tap, takes every message too (the record's commit then waits for that queue's).
Before the Packet Identifiers were recorded durably (docs/bridges.md, "Inbound QoS 2"),
mosquitto's resends of the messages between their local commit and its receipt of the
PUBREC came through as duplicates: in most runs, 24 to 988 of them.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from tests.helpers.brokers import BrokerHandle, free_port, start_edgebus
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.bridge.qos2 import END, drained, numbers
from tests.integration.bridge.support import (
    Collector,
    Remote,
    StreamPublisher,
    bridge_reply,
    wait_until,
)

TOTAL = 20_000
#: When the gateway is killed: once the bridge brought in this many messages in the run
#: (the live stream, or the backlog the remote queued while it was down, mid-drain).
KILLS = (200, 50, 600, 20, 1_000, 100, 400, 30, 300, 150)
RATE = 700.0  # messages per second: the stream spans most of the kills
SUBSCRIBER = "local-sub"


def _config(remote: Remote, version: str, api_port: int, tap: bool) -> str:
    session = "    connect_properties: {session_expiry_interval: 1h}\n" if version == "5" else ""
    # A second bridge forwarding what the first brings in: its queue, a durable tap, takes
    # each message too, and the record's commit waits for it.
    mirror = f"""
  - name: mirror
    server: "127.0.0.1:{remote.port}"
    client_id: gw-mirror
    forwards: [{{local: "in/{{rest#}}", remote: "mirror/{{rest}}", qos: 1}}]
"""
    return f"""
persistence: sqlite
mqtt: {{max_queued_messages: 100000}}
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    protocol_version: "{version}"
    client_id: gw-inbound-qos2
    clean_start: false
    keepalive: 5s
    reconnect_backoff: 100ms
    reconnect_backoff_max: 300ms
{session}    subscriptions:
      - {{remote: "in/#", qos: 2}}
{mirror if tap else ""}api:
  bind: 127.0.0.1:{api_port}
  keys: ['{KEY}']
"""


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    """Sorted ``numbers`` as runs of consecutive ones, (first, last): a short failure."""
    runs: list[tuple[int, int]] = []
    for number in numbers:
        if runs and runs[-1][1] == number - 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return runs


def _kill_point(received: Callable[[], int], completed: Callable[[], int], at: int) -> bool:
    return received() >= at or completed() >= TOTAL


def _at_least(count: int) -> Callable[[int], bool]:
    return lambda value: value >= count


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    # MQTT 5 with the tap only: its record waits for the tap's commit, the plain path's
    # (one commit) is the 3.1.1 case's (30 s a case: the suite's time)
    ("version", "tap"),
    [("3.1.1", False), ("5", True)],
    ids=["3.1.1", "5-tap"],
)
def test_sigkill_of_the_gateway_delivers_each_inbound_qos2_message_exactly_once(
    tmp_path: Path, version: str, tap: bool
) -> None:
    api_port = free_port()
    http = Http(f"http://127.0.0.1:{api_port}", bearer(KEY))

    def received() -> int:
        return int(bridge_reply(http).get("stats", {}).get("received", -1))

    remote = Remote(tmp_path / "remote").start()
    config = _config(remote, version, api_port, tap)
    gateway: BrokerHandle = start_edgebus(tmp_path / "gateway", config)
    local: Collector | None = None
    try:
        # The bridge has subscribed at the remote once an END mark comes through.
        probe = Collector(gateway.port, "in/#", "probe", qos=2)
        drained(probe, remote.port, "in/end")
        probe.close()
        # The local subscriber's session, then offline: the bridge's messages wait in it.
        Collector(gateway.port, "in/#", SUBSCRIBER, qos=2).close()

        publisher = StreamPublisher(remote.port, "in/x", TOTAL, qos=2, window=20, rate=RATE)
        publisher.start()
        stream = publisher

        def completed() -> int:
            return len(stream.acked)

        for index, at in enumerate(KILLS):
            # (A stream that ended before the last kills, on a slow machine: killed idle.)
            wait_until(partial(_kill_point, received, completed, at), bool, seconds=60)
            gateway.process.send_signal(signal.SIGKILL)
            gateway.process.wait(10)
            gateway.stop()
            if index % 2:  # the remote queues for the bridge meanwhile
                wait_until(completed, _at_least(min(completed() + 500, TOTAL)))
            gateway = start_edgebus(tmp_path / "gateway", config)
        acked = publisher.done(120)
        assert sorted(acked) == list(range(1, TOTAL + 1))

        local = Collector(gateway.port, "in/#", SUBSCRIBER, qos=2)
        drained(local, remote.port, "in/end", seconds=120)
        got = numbers(local)
    finally:
        gateway.stop()
        if local is not None:
            local.close()
        remote.stop()
    assert local.payloads().count(END) == 1
    twice = sorted(number for number, count in Counter(got).items() if count > 1)
    missing = sorted(set(range(1, TOTAL + 1)) - set(got))
    assert (_ranges(missing), _ranges(twice)) == ([], []), f"{len(got)} received"
