"""``edgebus check``: how a value and a misspelt key are shown. A key misspelt only in
letter case (``Max_QoS``) got no hint; a duration or a size given a mapping or a list
showed its Python repr (``got {'zz': 1}``); a YAML number given to a choice of strings
was shown quoted, as text (``got '5'``)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET, check

CONFIG = """\
mqtt:
  Max_QoS: 1
  write_timeout: {zz: 1}
  max_packet_size: [1, 2]
sys:
  interval: [1]
adapters:
  - type: 5
    name: x
bridges:
  - name: b
    server: "127.0.0.1:1883"
    protocol_version: 4
    forwards: [{local: "a/#"}]
"""


def test_values_are_shown_as_written_and_a_case_typo_gets_a_hint(tmp_path: Path) -> None:
    code, lines = check(tmp_path, QUIET + CONFIG)
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:4 mqtt: unknown key 'Max_QoS'; did you mean 'max_qos'?",
            "edgebus.yaml:5 mqtt.write_timeout: expected a duration like 500ms, 30s, 5m, 1h"
            " or 7d, got a mapping",
            "edgebus.yaml:6 mqtt.max_packet_size: expected a size like 512KB, 64MB or 1GiB,"
            " got a list",
            "edgebus.yaml:8 sys.interval: expected a duration like 500ms, 30s, 5m, 1h or 7d,"
            " got a list",
            "edgebus.yaml:10 adapters[0].type: expected one of loopback, someip, zmq, nng,"
            " dds, ros2, got 5",
            "edgebus.yaml:15 bridges[0].protocol_version: expected one of 3.1.1, 5, got 4",
        ],
    )
