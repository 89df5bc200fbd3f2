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

from pathlib import Path

import pytest
import yaml

from tests.helpers.reload_stream import lost_across_reloads
from tests.helpers.under_load import component
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
        context = zmq.Context()
        push = context.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 0)
        push.connect(f"tcp://{LOOPBACK}:{pull_port}")
        try:
            missing = lost_across_reloads(
                gw,
                api_port,
                "z",
                lambda n: push.send(str(n).encode()),
                count=COUNT,
                reloads=RELOADS,
                subscribe="zin/#",
                edit=("t1.{mqtt.topic}", "t2.{mqtt.topic}"),
            )
            assert missing == [], f"{len(missing)} lost across {RELOADS} reloads: {missing[:20]}"
            assert component(api_port, "z")["restarts"] == RELOADS
        finally:
            push.close(linger=0)
            context.term()
