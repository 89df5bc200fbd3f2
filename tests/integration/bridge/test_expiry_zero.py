"""A message with Message Expiry Interval 0 over a bridge (MQTT 5.0 3.3.2.3.3): its
lifetime has passed, so it is forwarded only when sent at once (QoS 0 on a link with
nothing waiting, with the interval 0), never stored and forwarded (QoS 1/2: the disk
queue), counted as dropped_expired."""

from __future__ import annotations

from pathlib import Path

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.bridge.support import Collector, Remote, paho_client, wait_until
from tests.integration.components.support import status_of


def _zero() -> Properties:
    props = Properties(PacketTypes.PUBLISH)
    props.MessageExpiryInterval = 0
    return props


def test_sent_at_once_or_dropped_never_queued(tmp_path: Path) -> None:
    with Remote(tmp_path / "remote") as remote:
        cloud = Collector(remote.port, "#", "cloud-sub")
        config = f"""
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    protocol_version: "5"
    client_id: gw-e0
    keepalive: 5s
    forwards:
      - {{local: "fq/#", qos: 1}}
      - {{local: "f0/#", qos: 0}}
"""
        with running_gateway(tmp_path, config) as gw:
            wait_until(lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "running")
            local = paho_client("local-pub", version=paho.MQTTv5)
            local.connect("127.0.0.1", gw.port)
            local.loop_start()
            local.publish("f0/a", b"at once", qos=0, properties=_zero()).wait_for_publish(unit(5))
            wait_until(cloud.count, lambda n: n >= 1)
            local.publish("fq/a", b"queued", qos=1, properties=_zero()).wait_for_publish(unit(5))
            local.publish("fq/b", b"marker", qos=1).wait_for_publish(unit(5))
            wait_until(cloud.count, lambda n: n >= 2)
            assert cloud.messages == [("f0/a", b"at once"), ("fq/b", b"marker")]
            stats = status_of(gw, "bridge", "cloud")["component_stats"]
            assert stats["dropped_expired"] == 1
            local.disconnect()
            local.loop_stop()
        cloud.close()
