"""Forwards and subscriptions with templates, MQTT 3.1.1 and 5, to a real mosquitto."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.bridge.support import Collector, Remote, paho_client, settles, wait_until
from tests.integration.components.support import status_of


def _bridge(remote: Remote, version: str) -> str:
    return f"""
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    protocol_version: "{version}"
    client_id: gw-{version}
    keepalive: 5s
    forwards:
      - {{local: "site/{{device}}/{{rest#}}", remote: "plants/p1/{{device}}/{{rest}}", qos: 1}}
      - {{local: "plain/#", qos: 0}}
    subscriptions:
      - {{remote: "plants/p1/cmd/{{device}}", local: "commands/{{device}}", qos: 1}}
      - {{remote: "twoway/#", qos: 2}}
"""


@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_forwards_and_subscriptions_with_templates(tmp_path: Path, version: str) -> None:
    with Remote(tmp_path / "remote") as remote:
        cloud = Collector(remote.port, "#", "cloud-sub")
        with running_gateway(tmp_path, _bridge(remote, version)) as gw:
            wait_until(lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "running")
            local = paho_client("local-pub")
            local.connect("127.0.0.1", gw.port)
            local.loop_start()
            got: list[tuple[str, bytes]] = []
            local.on_message = lambda c, u, m: got.append((m.topic, m.payload))
            local.subscribe([("commands/#", 1), ("twoway/#", 1)])
            for number in range(5):
                local.publish(f"site/dev{number}/temp/c", f"t{number}", qos=1).wait_for_publish(
                    unit(5)
                )
            local.publish("plain/x", b"zero", qos=0)
            local.publish("elsewhere/x", b"not forwarded", qos=1).wait_for_publish(unit(5))
            wait_until(cloud.count, lambda n: n >= 6)
            assert sorted(cloud.messages) == sorted(
                [(f"plants/p1/dev{n}/temp/c", f"t{n}".encode()) for n in range(5)]
                + [("plain/x", b"zero")]
            )
            # Inbound: remote -> local, templates applied, acknowledged once safe.
            remote_pub = paho_client("remote-pub")
            remote_pub.connect("127.0.0.1", remote.port)
            remote_pub.loop_start()
            remote_pub.publish("plants/p1/cmd/dev3", b"open", qos=1).wait_for_publish(unit(5))
            remote_pub.publish("twoway/a", b"both", qos=2).wait_for_publish(unit(5))
            wait_until(lambda: len(got), lambda n: n >= 2)
            assert sorted(got) == [("commands/dev3", b"open"), ("twoway/a", b"both")]
            # No loop: twoway/a came in through the bridge and is not sent back out
            # (the forwards do not match it anyway; the origin would stop it too).
            stats = wait_until(
                lambda: status_of(gw, "bridge", "cloud")["component_stats"],
                lambda s: s["queue_depth"] == 0,
            )
            assert stats["acked"] == 5
            assert stats["received"] == 2
            assert stats["dropped"] == 0
            local.disconnect()
            local.loop_stop()
            remote_pub.disconnect()
            remote_pub.loop_stop()
        cloud.close()


def test_what_a_bridge_brought_in_never_goes_back_out_on_it(tmp_path: Path) -> None:
    """Forwards and subscriptions on the same topics, MQTT 3.1.1 (no no-local at the
    remote, so it echoes the bridge's own messages back): no message goes round."""
    config = """
bridges:
  - name: cloud
    server: "127.0.0.1:{port}"
    protocol_version: "3.1.1"
    forwards: [{{local: "shared/#", qos: 1}}]
    subscriptions: [{{remote: "shared/#", qos: 1}}]
"""
    with Remote(tmp_path / "remote") as remote:
        cloud = Collector(remote.port, "shared/#", "cloud-sub")
        with running_gateway(tmp_path, config.format(port=remote.port)) as gw:
            wait_until(lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "running")
            remote_pub = paho_client("remote-pub")
            remote_pub.connect("127.0.0.1", remote.port)
            remote_pub.loop_start()
            remote_pub.publish("shared/from-cloud", b"c", qos=1).wait_for_publish(unit(5))
            local = paho_client("local-pub")
            local.connect("127.0.0.1", gw.port)
            local.loop_start()
            local.publish("shared/from-edge", b"e", qos=1).wait_for_publish(unit(5))
            stats = wait_until(
                lambda: status_of(gw, "bridge", "cloud")["component_stats"],
                lambda s: s["received"] >= 2 and s["acked"] >= 1,
            )
            # A loop would keep these growing.
            settles(cloud.count)
            stats = settles(lambda: status_of(gw, "bridge", "cloud")["component_stats"])
            for client in (remote_pub, local):
                client.disconnect()
                client.loop_stop()
        cloud.close()
    # The cloud's message came in once and was not sent back; the edge's went out once
    # and its echo, brought in, was not sent out again.
    assert sorted(cloud.messages) == [("shared/from-cloud", b"c"), ("shared/from-edge", b"e")]
    assert (stats["sent"], stats["received"]) == (1, 2)
