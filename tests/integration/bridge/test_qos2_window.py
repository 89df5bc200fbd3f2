"""QoS 2, and QoS 1 beside it, to a mosquitto remote left at its defaults, with the
bridge's defaults: every QoS 2 message arrives exactly once, every QoS 1 message at
least once, MQTT 3.1.1 and 5.

Mosquitto (2.0.11 as Debian ships it, upstream since 2.0.16) refuses a client's QoS 1
or QoS 2 PUBLISH while ``max_inflight_messages`` (20 by default) of its QoS 2 messages
await their PUBCOMP (PUBACK / PUBREC 0x97); on MQTT 3.1.1 those have no reason code,
so the refused message is silently gone. MQTT 5 has the remote say its limit (Receive
Maximum, which the bridge obeys); on 3.1.1 the bridge keeps at most
``QOS2_INFLIGHT_V311`` QoS 2 messages in flight, and sends no QoS 1 while that many are
(bridge/forward.py). With the default window of 100 and no such bound, 40 to 50 % of
the QoS 2 stream here was lost on 3.1.1.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.brokers import start_mosquitto
from tests.helpers.gateway import running_gateway
from tests.integration.bridge.qos2 import END, QOS2_WINDOW, drained
from tests.integration.bridge.support import Collector, StreamPublisher, wait_until
from tests.integration.components.support import status_of

TOTAL = 5_000


@pytest.mark.timeout(240)
@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_qos2_with_defaults_arrives_exactly_once(tmp_path: Path, version: str) -> None:
    # mosquitto's defaults but for its subscriber's queue (1,000 by default), so that a
    # subscriber falling behind is not what loses messages here.
    remote = start_mosquitto(
        tmp_path / "remote", "max_queued_messages 1000000", log_type="error warning notice"
    )
    bridge = f"""
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    protocol_version: "{version}"
    client_id: gw-qos2-window
    forwards: [{{local: "stream/{{kind}}", remote: "cloud/{{kind}}", qos: 2}}]
"""
    with remote:
        cloud = Collector(remote.port, "cloud/#", "cloud-sub", qos=2)
        try:
            with running_gateway(tmp_path, bridge) as gw:
                wait_until(
                    lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "running"
                )
                qos2 = StreamPublisher(gw.port, "stream/q2", TOTAL, qos=2, window=QOS2_WINDOW)
                qos1 = StreamPublisher(gw.port, "stream/q1", TOTAL)
                qos2.start()
                qos1.start()
                assert sorted(qos2.done(120)) == list(range(1, TOTAL + 1))
                assert qos1.done(120) == list(range(1, TOTAL + 1))
                stats = wait_until(
                    lambda: status_of(gw, "bridge", "cloud")["component_stats"],
                    lambda s: s["queue_depth"] == 0,
                    seconds=120,
                )
                drained(cloud, remote.port, "cloud/end")
        finally:
            cloud.close()
    got = {
        topic: [int(payload) for t, payload in cloud.messages if t == topic and payload != END]
        for topic in ("cloud/q1", "cloud/q2")
    }
    every = set(range(1, TOTAL + 1))
    assert sorted(every - set(got["cloud/q1"])) == []
    assert sorted(every - set(got["cloud/q2"])) == []
    assert sorted(n for n, count in Counter(got["cloud/q2"]).items() if count > 1) == []
    assert len(got["cloud/q2"]) == TOTAL
    assert (stats["acked"], stats["rejected"], stats["dropped"]) == (2 * TOTAL, 0, 0)
