"""A reload that changes one ZeroMQ mapping leaves the unchanged ones' sockets open: a
restart (on request, or by a reload) hands the plain sockets (``sub``, ``pull``, ``pub``,
``push``) of the mappings that did not change over to the next run, so their peers stay
connected and nothing in flight toward them is lost (docs/adapters/zmq.md, "Restarts
and reloads").

Before, every restart closed every socket: a ``push`` peer sending numbered messages to
an unchanged ``pull`` mapping lost what was in flight at each reload (the probe: 11 of
2000 over 21 reloads), uncounted.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
import yaml

from tests.helpers.timeouts import unit
from tests.helpers.under_load import api, component, wait_running_again
from tests.integration.api.support import KEY
from tests.interop.mosquitto.tools import LOOPBACK, EdgebusProcess, free_port

zmq = pytest.importorskip("zmq")

COUNT = 12000
RELOADS = 40


def _config(api_port: int, pull_port: int, pub_port: int, topic: str) -> str:
    return yaml.safe_dump(
        {
            "api": {"bind": f"{LOOPBACK}:{api_port}", "keys": [KEY]},
            "mqtt": {"max_queued_messages": 100_000},
            "adapters": [
                {
                    "type": "zmq",
                    "name": "z",
                    "zmq_to_mqtt": [
                        {
                            "socket": "pull",
                            "bind": f"tcp://{LOOPBACK}:{pull_port}",
                            "frames": "raw",
                            "to_mqtt": "zin/a",
                            "qos": 1,
                        }
                    ],
                    "mqtt_to_zmq": [  # the mapping each reload changes
                        {
                            "from_mqtt": "zout/#",
                            "socket": "pub",
                            "bind": f"tcp://{LOOPBACK}:{pub_port}",
                            "topic": topic,
                        }
                    ],
                }
            ],
        }
    )


def test_unchanged_pull_mapping_loses_nothing_across_reloads(tmp_path: Path) -> None:
    api_port, pull_port, pub_port = free_port(), free_port(), free_port()
    with EdgebusProcess(tmp_path, _config(api_port, pull_port, pub_port, "t1.{mqtt.topic}")) as gw:
        config = gw.config.read_text()
        received: set[int] = set()
        subscribed = threading.Event()
        sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="counter")
        sub.on_subscribe = lambda *_: subscribed.set()
        sub.on_message = lambda _c, _u, msg: received.add(int(msg.payload))
        sub.connect(LOOPBACK, gw.port)
        sub.subscribe("zin/#", 1)
        sub.loop_start()
        context = zmq.Context()
        push = context.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 0)
        push.connect(f"tcp://{LOOPBACK}:{pull_port}")
        sent = 0
        stop = threading.Event()

        def send() -> None:  # a steady stream, so that every reload meets messages
            nonlocal sent
            for n in range(COUNT):
                if stop.is_set():
                    return
                push.send(str(n).encode())  # waits while the gateway has no socket
                sent = n + 1
                if n % 20 == 19:
                    time.sleep(0.002)

        sender = threading.Thread(target=send, daemon=True)
        try:
            assert subscribed.wait(unit(10))
            sender.start()
            for reload in range(RELOADS):
                deadline = time.monotonic() + unit(30)
                while sent < (reload + 1) * COUNT // (RELOADS + 1):  # spread out
                    assert time.monotonic() < deadline, sent
                    time.sleep(0.005)
                topic = "t2.{mqtt.topic}" if reload % 2 == 0 else "t1.{mqtt.topic}"
                gw.config.write_text(config.replace("t1.{mqtt.topic}", topic))
                since = component(api_port, "z")["since"]
                assert api(api_port, "POST", "/reload")["reloaded"] == ["adapter: restarted z"]
                # each reload's restart done before the next
                wait_running_again(api_port, "z", since)
            sender.join(unit(60))
            assert not sender.is_alive()
            deadline = time.monotonic() + unit(30)
            while len(received) < COUNT and time.monotonic() < deadline:
                time.sleep(0.05)
            missing = sorted(set(range(COUNT)) - received)
            assert missing == [], f"{len(missing)} lost across {RELOADS} reloads: {missing[:20]}"
            assert component(api_port, "z")["restarts"] == RELOADS
        finally:
            stop.set()
            push.close(linger=0)
            context.term()
            sub.loop_stop()
            sub.disconnect()
