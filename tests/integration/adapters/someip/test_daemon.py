"""The daemon: one shared daemon with server and client apps and the gateway
(``daemon.socket_path``), and the adapter's own daemon, supervised."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.helpers.brokers import start_edgebus
from tests.helpers.someip import SomeipPeer, daemons, sd_net
from tests.helpers.timeouts import unit
from tests.integration.adapters.someip.support import (
    adapter_status,
    adapter_yaml,
    first_event,
    first_message,
    gateway,
    mqtt,
    wait_state,
)
from tests.integration.adapters.someip.test_methods import reply, request
from tests.integration.broker.support import wait_until

BOTH_WAYS = """
consume:
  - service_id: 0x1234
    instance_id: 1
    eventgroups: [1]
    events: [0x8001]
    methods: [1]
offer:
  - service_id: 0x2000
    instance_id: 3
    ttl: 3s
    cyclic_offer_delay: 500ms
    eventgroups: [1]
    events: [0x8001]
"""


def test_one_daemon_serves_server_and_client_apps_and_the_gateway(tmp_path: Path) -> None:
    with (
        daemons("127.0.0.1") as (shared,),
        SomeipPeer.start(
            shared,
            role="server",
            service=0x1234,
            instance=1,
            eventgroups={1: [0x8001]},
            methods={1: "reverse"},
        ) as server,
        gateway(tmp_path, shared.net, BOTH_WAYS, socket_path=shared.socket_path) as gw,
    ):
        wait_state(gw, "running")
        assert not (tmp_path / "data" / "adapter" / "car" / "someipyd.log").exists()
        with (
            SomeipPeer.start(
                shared, role="client", service=0x2000, instance=3, eventgroups={1: [0x8001]}
            ) as ecu,
            mqtt(gw, "dash", "someip/1234/0001/event/#", "replies/#") as dash,
        ):
            event = first_message(
                dash,
                lambda: server.send("send", eventgroup=1, event=0x8001, payload="2a"),
                "someip/1234/0001/event/8001",
            )
            assert event.payload == b"\x2a"
            request(dash, 1, b"ab", b"k")
            assert reply(dash, b"k") == (0, b"ba")
            ecu.wait("available")
            got = first_event(
                ecu, lambda: dash.publish("someip/2000/0003/event/8001", b"\x05", qos=1), 0x8001
            )
            assert got == {"ev": "event", "event": 0x8001, "payload": "05"}


def _daemon_pids(config_path: Path) -> list[int]:
    """Processes running ``adapters.someip.daemon --config <config_path>``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"adapters.someip.daemon" in args and str(config_path).encode() in args:
            found.append(int(entry))
    return found


CONSUME = """
consume:
  - service_id: 0x1234
    instance_id: 1
    eventgroups: [1]
    events: [0x8001]
"""


def test_the_own_daemon_is_restarted_when_it_dies(tmp_path: Path) -> None:
    with (
        daemons("127.0.0.2") as (remote,),
        SomeipPeer.start(
            remote, role="server", service=0x1234, instance=1, eventgroups={1: [0x8001]}
        ) as server,
        gateway(tmp_path, remote.net, CONSUME) as gw,
    ):
        config = tmp_path / "data" / "adapter" / "car" / "someipyd.json"
        wait_state(gw, "running")
        (pid,) = _daemon_pids(config)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: adapter_status(gw)["restarts"] >= 1, unit(10), "a restart")
        wait_state(gw, "running")
        assert _daemon_pids(config) not in ([], [pid])
        with mqtt(gw, "dash", "someip/1234/0001/event/#") as dash:
            first_message(
                dash,
                lambda: server.send("send", eventgroup=1, event=0x8001, payload="01"),
                "someip/1234/0001/event/8001",
            )
        assert "someipyd exited" in json.dumps(adapter_status(gw))


def test_the_own_daemon_ends_with_a_killed_gateway(tmp_path: Path) -> None:
    net = sd_net()
    broker = start_edgebus(tmp_path, adapter_yaml(net, CONSUME))
    config = tmp_path / "data" / "adapter" / "car" / "someipyd.json"
    try:
        wait_until(lambda: _daemon_pids(config), unit(15), "the own daemon")
        broker.process.send_signal(signal.SIGKILL)
        broker.process.wait(unit(5))
        started = time.monotonic()
        wait_until(lambda: not _daemon_pids(config), unit(10), "the daemon's end")
        assert time.monotonic() - started < unit(10)
    finally:
        broker.stop()


def test_an_unreachable_daemon_is_retried_with_backoff_and_the_broker_serves_on(
    tmp_path: Path,
) -> None:
    net = sd_net()
    missing = str(tmp_path / "nobody.sock")
    with gateway(tmp_path, net, CONSUME, socket_path=missing) as gw:
        status = wait_state(gw, "backing_off")
        assert f"cannot connect to someipyd at {missing}" in status["last_error"]
        with mqtt(gw, "still-here", "ping") as client:
            client.publish("ping", b"1", qos=1)
            assert client.expect_message(unit(5)).payload == b"1"
