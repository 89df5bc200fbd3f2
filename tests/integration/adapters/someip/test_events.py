"""Events: a someipy server on another daemon (real discovery over loopback multicast)
to MQTT, typed and raw; MQTT to an offered service's events, to a someipy client."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.someip import SomeipPeer, daemons
from tests.helpers.timeouts import unit
from tests.integration.adapters.someip.support import gateway, mqtt, wait_state

SPEED = """
layouts:
  VehicleSpeed:
    type: struct
    fields:
      - {name: speed_kmh, type: float32}
      - {name: valid, type: bool}
consume:
  - service_id: 0x1234
    instance_id: 1
    eventgroups: [1]
    events:
      - {id: 0x8001, layout: VehicleSpeed}
      - {id: 0x8002}
"""


def test_events_of_a_remote_server_reach_mqtt(tmp_path: Path) -> None:
    with daemons("127.0.0.2") as (remote,), SomeipPeer.start(
        remote, role="server", service=0x1234, instance=1, eventgroups={1: [0x8001, 0x8002]}
    ) as server:
        net = remote.net
        with gateway(tmp_path, net, SPEED) as gw:
            wait_state(gw, "running")
            with mqtt(gw, "dash", "someip/1234/0001/event/#") as dash:
                server.send("send", eventgroup=1, event=0x8001, payload="41dd999a01")
                server.send("send", eventgroup=1, event=0x8002, payload="00ff")
                got = {m.topic: m for m in dash.expect_messages(2, unit(10))}
        speed = got["someip/1234/0001/event/8001"]
        assert json.loads(speed.payload) == {"speed_kmh": 27.7, "valid": True}
        assert speed.properties.ContentType == "application/json"
        raw = got["someip/1234/0001/event/8002"]
        assert raw.payload == b"\x00\xff"
