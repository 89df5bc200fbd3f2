"""A latched MQTT -> ROS 2 topic (``qos_profile: transient_local``, as /robot_description)
keeps its latest data for late ROS subscribers across adapter restarts and reloads.

Each run of the adapter has a DDS writer of its own, and a run after a restart takes
over the last run's MQTT subscription, which gets no retained messages again. Before,
the new writer held nothing: a ROS node starting after a restart (or after a reload
that changed any mapping of the adapter) never got the robot description. Now the
retained messages on the mapping's filter are written to the new writer at start.

``edgebus run`` in its own process, the ROS 2 node's DDS side in another
(tests/helpers/ros2_peer.py), MQTT through paho.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import yaml

from tests.helpers.dds import DdsPeer, domain_id, unique
from tests.helpers.timeouts import unit
from tests.helpers.under_load import api, component, wait_running_again
from tests.integration.api.support import KEY
from tests.interop.mosquitto.tools import LOOPBACK, EdgebusProcess, free_port


def _config(api_port: int, domain: int, latched: str, other: str) -> str:
    return yaml.safe_dump({
        "api": {"bind": f"{LOOPBACK}:{api_port}", "keys": [KEY]},
        "adapters": [{
            "type": "ros2",
            "name": "robot",
            "domain_id": domain,
            "network": {"interfaces": ["lo"], "peers": ["127.0.0.1"],
                        "allow_multicast": False},
            "mqtt_to_ros": [
                {"from_mqtt": "desc/robot", "to_ros": f"/{latched}",
                 "type": "std_msgs/msg/String", "qos_profile": "transient_local"},
                {"from_mqtt": "other/in", "to_ros": f"/{other}",  # the mapping a reload edits
                 "type": "std_msgs/msg/String"},
            ],
        }],
    })


def _wait_running(api_port: int) -> float:
    deadline = time.monotonic() + unit(20)
    while True:
        status = component(api_port, "robot")
        if status["state"] == "running":
            return float(status["since"])
        assert time.monotonic() < deadline, status
        time.sleep(0.05)


def _late_subscriber_gets(peer: DdsPeer, topic: str, name: str) -> list[object]:
    """What a ROS subscriber that starts now (transient local, keep last 1) gets."""
    peer.call("subscriber", id=name, topic=topic, type="std_msgs/msg/String",
              profile_name="transient_local")
    messages: list[object] = peer.call("take", id=name, count=1, timeout=unit(10))["messages"]
    return messages


def test_a_latched_topic_is_there_for_late_subscribers_after_restart_and_reload(
        tmp_path: Path) -> None:
    api_port, domain = free_port(), domain_id()
    latched, other = unique("robot_description"), unique("other")
    with EdgebusProcess(tmp_path, _config(api_port, domain, latched, other)) as gw, \
            DdsPeer(domain, "tests.helpers.ros2_peer") as peer:
        since = _wait_running(api_port)
        publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="urdf")
        publisher.connect(LOOPBACK, gw.port)
        publisher.loop_start()
        try:
            publisher.publish("desc/robot", json.dumps({"data": "<robot v1/>"}), 1,
                              retain=True).wait_for_publish(unit(10))
        finally:
            publisher.loop_stop()
            publisher.disconnect()
        topic = f"/{latched}"
        assert _late_subscriber_gets(peer, topic, "first") == [{"data": "<robot v1/>"}]

        assert api(api_port, "POST", "/adapters/robot/restart")["name"] == "robot"
        since = float(wait_running_again(api_port, "robot", since)["since"])
        assert _late_subscriber_gets(peer, topic, "after_restart") == [
            {"data": "<robot v1/>"}]

        gw.config.write_text(gw.config.read_text().replace("other/in", "other/in2"))
        assert api(api_port, "POST", "/reload")["reloaded"] == ["adapter: restarted robot"]
        wait_running_again(api_port, "robot", since)
        assert _late_subscriber_gets(peer, topic, "after_reload") == [
            {"data": "<robot v1/>"}]
