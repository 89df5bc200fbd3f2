"""A latched ROS 2 topic with several publishers (``/tf_static``: one static transform
broadcaster per node, each keeping its last message for late joiners) gives the adapter
one message per publisher when it reads the topic later (``qos_profile:
transient_local``): its reader keeps 100, as tf2's static listener does. Before, the
reader kept 1, the profile's writer depth, and got one of them.

An in-process gateway, the ROS 2 nodes' DDS side in another process
(tests/helpers/ros2_peer.py), MQTT through paho.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.dds import NETWORK_YAML, DdsPeer, domain_id, unique
from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import Clients, wait_until

CONFIG = """
adapters:
  - type: ros2
    name: robot
    domain_id: {domain}
{network}    ros_to_mqtt:
      - from_ros: /{tf}/*
        type: std_msgs/msg/String
        to_mqtt: tf/{{ros.topic}}
        qos_profile: transient_local
"""


def test_every_publisher_of_a_latched_topic_is_read_by_a_late_reader(tmp_path: Path) -> None:
    domain, tf = domain_id(), unique("tf")
    config = CONFIG.format(domain=domain, network=NETWORK_YAML, tf=tf)
    with running_gateway(tmp_path, config) as gw, \
            DdsPeer(domain, "tests.helpers.ros2_peer") as peer:
        wait_until(lambda: gw.call(lambda: gw.gateway.adapters.status("robot"))["state"]
                   == "running", unit(15), "the ros2 adapter runs")
        clients = Clients(gw)
        try:
            sub = clients.subscriber(5, f"tf/{tf}/#", 1)
            topic = f"/{tf}/static"
            # broadcasters, each with its own latched message, before the adapter reads
            # the topic (the pattern's reader is made once a publisher is discovered)
            names = [f"link{n}" for n in range(20)]
            for name in names:
                peer.call("publisher", id=name, topic=topic, type="std_msgs/msg/String",
                          profile_name="transient_local")
                peer.call("publish", id=name, messages=[{"data": name}])
            got = sub.expect_messages(len(names), unit(15))
            assert sorted(json.loads(m.payload)["data"] for m in got) == sorted(names)
        finally:
            clients.close_all()
