"""The bridge and stream actions: a rule's results forwarded through a named bridge to a
real mosquitto, and appended to the stream log, read back over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

from gateway.components import SINK
from tests.helpers.gateway import RunningGateway
from tests.integration.bridge.support import Collector, Remote, wait_until
from tests.integration.components.support import status_of, wait_for
from tests.integration.rules.support import gateway_with_clients
from tests.integration.stream.support import STREAM, http_of, offsets_of, records_of


def _actions(gw: RunningGateway, rule: str) -> list[tuple[str, int, int]]:
    statuses = {s["name"]: s for s in gw.call(gw.gateway.rules.statuses)}
    return [(a["type"], a["succeeded"], a["failed"]) for a in statuses[rule]["actions"]]


def test_results_forwarded_through_a_named_bridge(tmp_path: Path) -> None:
    with Remote(tmp_path / "remote") as remote:
        cloud = Collector(remote.port, "#", "cloud-sub")
        config = f"""
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    forwards:
      - {{local: "up/{{device}}/alerts", remote: "plants/{{device}}/alerts", qos: 1}}
rules:
  - name: hot
    sql: "SELECT payload.t AS t, topic_level(topic, 2) AS device FROM 'telemetry/#'"
    actions:
      - {{type: bridge, bridge: cloud, topic: "up/{{device}}/alerts"}}
      - {{type: bridge, bridge: cloud, topic: "not/forwarded/{{device}}"}}
"""
        with gateway_with_clients(tmp_path, config) as (gw, clients):
            wait_until(lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "running")
            device = clients.connect(5, "dev")
            device.publish("telemetry/d7", b'{"t": 99}', qos=1)
            wait_until(cloud.count, lambda n: n >= 1)
            assert cloud.messages == [("plants/d7/alerts", b'{"t":99,"device":"d7"}')]
            wait_for(lambda: _actions(gw, "hot"), lambda a: a[0][1] == 1)
            assert _actions(gw, "hot") == [("bridge", 1, 0), ("bridge", 0, 1)]
        cloud.close()


def test_results_appended_to_the_stream_log(tmp_path: Path) -> None:
    config = (
        STREAM
        + """  topics: ["derived/#"]
rules:
  - name: derive
    sql: "SELECT payload.t * 10 AS t10, clientid FROM 'raw/#'"
    actions:
      - {type: stream, topic: "derived/{clientid}"}
      - {type: stream, topic: "elsewhere/{clientid}"}
"""
    )
    with gateway_with_clients(tmp_path, config) as (gw, clients):
        http = http_of(gw)
        wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
        clients.connect(5, "s1").publish("raw/x", b'{"t": 4}', qos=1)
        wait_for(lambda: offsets_of(http)["end"], lambda end: end == 1)
        rows = records_of(http)
        wait_for(lambda: _actions(gw, "derive"), lambda a: a[0][1] == 1)
        assert _actions(gw, "derive") == [("stream", 1, 0), ("stream", 0, 1)]
    assert [(r["topic"], r["protocol"], r["source"]) for r in rows] == [
        ("derived/s1", "rule", "derive")
    ]
    assert json.loads(rows[0]["payload_json"]) == {"t10": 40, "clientid": "s1"}
