"""A reload that changes one NNG mapping leaves the unchanged ones' sockets open: a
restart (on request, or by a reload) hands the plain sockets (``sub0``, ``pull0``,
``pair0``, ``pair1``, ``pub0``, ``push0``) of the mappings that did not change, with the
threads reading them, over to the next run, so their peers stay connected and nothing in
flight toward them is lost (docs/adapters/nanomsg.md, "Restarts and reloads").

Before, every restart closed every socket: a ``push0`` peer sending numbered messages
to an unchanged ``pull0`` mapping lost what was in flight at each reload, uncounted.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
import yaml

from tests.helpers.reload_stream import lost_across_reloads
from tests.helpers.timeouts import unit
from tests.helpers.under_load import api, component, wait_running_again
from tests.integration.api.support import KEY
from tests.interop.mosquitto.tools import LOOPBACK, EdgebusProcess, free_port

pynng = pytest.importorskip("pynng")

COUNT = 12000
RELOADS = 40


def _config(api_port: int, pull_port: int, changed: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "api": {"bind": f"{LOOPBACK}:{api_port}", "keys": [KEY]},
            "mqtt": {"max_queued_messages": 100_000},
            "adapters": [
                {
                    "type": "nng",
                    "name": "n",
                    "nng_to_mqtt": [
                        {
                            "socket": "pull0",
                            "bind": f"tcp://{LOOPBACK}:{pull_port}",
                            "frames": "raw",
                            "to_mqtt": "nin/a",
                            "qos": 1,
                        }
                    ],
                    **changed,
                }
            ],
        }
    )


def test_unchanged_pull0_mapping_loses_nothing_across_reloads(tmp_path: Path) -> None:
    api_port, pull_port, pub_port = free_port(), free_port(), free_port()
    changed = {  # the mapping each reload changes
        "mqtt_to_nng": [
            {
                "from_mqtt": "nout/#",
                "socket": "pub0",
                "bind": f"tcp://{LOOPBACK}:{pub_port}",
                "topic": "t1.{mqtt.topic}",
            }
        ]
    }
    with EdgebusProcess(tmp_path, _config(api_port, pull_port, changed)) as gw:
        push = pynng.Push0(dial=f"tcp://{LOOPBACK}:{pull_port}")
        try:
            missing = lost_across_reloads(
                gw,
                api_port,
                "n",
                lambda n: push.send(str(n).encode()),  # waits while no pull0 is there
                count=COUNT,
                reloads=RELOADS,
                subscribe="nin/#",
                edit=("t1.{mqtt.topic}", "t2.{mqtt.topic}"),
            )
            assert missing == [], f"{len(missing)} lost across {RELOADS} reloads: {missing[:20]}"
            status = component(api_port, "n")
            assert status["restarts"] == RELOADS
            # a message the reading thread had for an inbox closing under it went to the next
            stats = status["stats"]
            assert stats["inbox_dropped"] == 0, {k: v for k, v in stats.items() if "inbox" in k}
        finally:
            push.close()


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _wait_back_to(what: str, now: Any, baseline: int) -> None:
    deadline = time.monotonic() + unit(20)
    while (count := now()) > baseline:
        assert time.monotonic() < deadline, f"{what}: {count}, {baseline} before the reloads"
        time.sleep(0.05)


def test_fifty_reloads_leak_no_thread_or_socket_and_the_changed_mapping_moves(
    tmp_path: Path,
) -> None:
    """A ``pull0`` mapping moving between two ports at each reload (and restarts on
    request between them) gets a new socket each time, listening on its new port; the
    unchanged mapping's socket and thread are kept; threads and descriptors end where
    they began. Pausing the adapter then closes both sockets and ends both threads."""
    api_port, pull_port, port_a, port_b = free_port(), free_port(), free_port(), free_port()

    def moving(port: int) -> dict[str, Any]:
        return {
            "socket": "pull0",
            "bind": f"tcp://{LOOPBACK}:{port}",
            "frames": "raw",
            "to_mqtt": "nmv/a",
            "qos": 1,
        }

    config = _config(api_port, pull_port, {})
    with EdgebusProcess(tmp_path, config) as gw:
        assert gw.process is not None
        pid = gw.process.pid
        text = yaml.safe_load(gw.config.read_text())
        mappings = text["adapters"][0]["nng_to_mqtt"]

        def reload_to(port: int) -> None:
            text["adapters"][0]["nng_to_mqtt"] = [mappings[0], moving(port)]
            gw.config.write_text(yaml.safe_dump(text))
            since = component(api_port, "n")["since"]
            assert api(api_port, "POST", "/reload")["reloaded"] == ["adapter: restarted n"]
            wait_running_again(api_port, "n", since)

        def restart() -> None:
            since = component(api_port, "n")["since"]
            api(api_port, "POST", "/components/adapter/n/restart")
            wait_running_again(api_port, "n", since)

        reload_to(port_a)  # the moving mapping's first socket
        reload_to(port_b)
        threads, fds = _threads(pid), _fds(pid)
        for k in range(50):
            reload_to(port_a if k % 2 == 0 else port_b)
            if k % 10 == 9:
                restart()
        # 50 reloads: the moving mapping is on port_b, as it was before them
        _wait_back_to("threads", lambda: _threads(pid), threads)
        _wait_back_to("descriptors", lambda: _fds(pid), fds)
        counter = _Counter(gw.port)
        try:
            with (
                pynng.Push0(dial=f"tcp://{LOOPBACK}:{pull_port}") as kept,
                pynng.Push0(dial=f"tcp://{LOOPBACK}:{port_b}") as moved,
            ):
                kept.send(b"1")
                moved.send(b"2")
                counter.wait_for({"nin/a": b"1", "nmv/a": b"2"})
                reload_to(port_a)  # the moving mapping leaves port_b for port_a
                with pynng.Push0(dial=f"tcp://{LOOPBACK}:{port_a}") as moved_again:
                    moved_again.send(b"3")
                    kept.send(b"4")
                    counter.wait_for({"nin/a": b"4", "nmv/a": b"3"})
            # Pausing closes every socket (none is kept for a next run) with its thread.
            api(api_port, "POST", "/components/adapter/n/pause")
            _wait_closed(pull_port)
            _wait_closed(port_a)
            _wait_back_to("threads when paused", lambda: _threads(pid), threads - 2)
            api(api_port, "POST", "/components/adapter/n/resume")
            with pynng.Push0(dial=f"tcp://{LOOPBACK}:{pull_port}") as kept:
                kept.send(b"5")
                counter.wait_for({"nin/a": b"5"})
        finally:
            counter.close()


def _wait_closed(port: int) -> None:
    """Waits until nothing listens on ``port`` (a connection is refused)."""
    deadline = time.monotonic() + unit(20)
    while True:
        try:
            socket.create_connection((LOOPBACK, port), timeout=unit(1)).close()
        except ConnectionRefusedError:
            return
        assert time.monotonic() < deadline, f"{port} still listening"
        time.sleep(0.05)


class _Counter:
    """The last payload per topic of ``nin/#`` and ``nmv/#``."""

    def __init__(self, port: int) -> None:
        self.last: dict[str, bytes] = {}
        subscribed = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="last")
        self.client.on_subscribe = lambda *_: subscribed.set()
        self.client.on_message = self._take
        self.client.connect(LOOPBACK, port)
        self.client.subscribe([("nin/#", 1), ("nmv/#", 1)])
        self.client.loop_start()
        assert subscribed.wait(unit(10))

    def _take(self, _client: Any, _userdata: Any, msg: mqtt.MQTTMessage) -> None:
        self.last[msg.topic] = bytes(msg.payload)

    def wait_for(self, expected: dict[str, bytes]) -> None:
        deadline = time.monotonic() + unit(20)
        while any(self.last.get(t) != p for t, p in expected.items()):
            assert time.monotonic() < deadline, self.last
            time.sleep(0.02)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def test_a_kept_dialing_socket_without_its_peer_keeps_the_adapter_degraded(
    tmp_path: Path,
) -> None:
    """The grace a dialing socket has to reach its peer runs from the socket's opening,
    not from each run's start: after a reload, a kept ``sub0`` socket still without its
    peer leaves the adapter ``degraded`` from the new run's start, not ``running`` for a
    second; once the peer is there, the adapter runs."""
    api_port, pull_port, pub_port = free_port(), free_port(), free_port()
    changed = {
        "mqtt_to_nng": [
            {
                "from_mqtt": "nout/#",
                "socket": "pub0",
                "bind": f"tcp://{LOOPBACK}:{free_port()}",
                "topic": "t1.{mqtt.topic}",
            }
        ]
    }
    config = yaml.safe_load(_config(api_port, pull_port, changed))
    config["adapters"][0]["nng_to_mqtt"].append(
        {"socket": "sub0", "connect": f"tcp://{LOOPBACK}:{pub_port}", "to_mqtt": "nsub/a"}
    )
    with EdgebusProcess(tmp_path, yaml.safe_dump(config)) as gw:
        reason = f"nng_to_mqtt[1]: cannot reach tcp://{LOOPBACK}:{pub_port}; redialing"
        status = _wait_until(api_port, ("degraded",))
        assert status["reason"] == reason
        for k in range(3):
            old, new = ("t1.", "t2.") if k % 2 == 0 else ("t2.", "t1.")
            gw.config.write_text(gw.config.read_text().replace(old, new))
            since = status["since"]
            assert api(api_port, "POST", "/reload")["reloaded"] == ["adapter: restarted n"]
            status = _wait_until(api_port, ("running", "degraded"), since)  # the new run's
            assert (status["state"], status["reason"]) == ("degraded", reason)
        with pynng.Pub0(listen=f"tcp://{LOOPBACK}:{pub_port}"):  # NNG redials within 5 s
            _wait_until(api_port, ("running",))


def _wait_until(api_port: int, states: tuple[str, ...], since: float = 0.0) -> dict[str, Any]:
    """The adapter's status once it is in one of ``states``, entered after ``since``."""
    deadline = time.monotonic() + unit(20)
    while True:
        status = component(api_port, "n")
        if status["state"] in states and status["since"] > since:
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.01)
