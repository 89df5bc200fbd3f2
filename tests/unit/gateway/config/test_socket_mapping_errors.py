"""``edgebus check`` on a ZeroMQ / NNG mapping whose ``socket`` is a list or a mapping.
The mapping's defaults looked the value up in a set of socket types before validation,
so an unhashable value crashed check (and run, and a reload) with a TypeError
traceback. Now it is a configuration problem at the key, exit status 2."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET, check

CONFIG = """\
adapters:
  - type: zmq
    name: z
    zmq_to_mqtt:
      - socket: [sub, pull]
        connect: tcp://127.0.0.1:5999
        to_mqtt: t
  - type: nng
    name: n
    mqtt_to_nng:
      - socket: {push0: 1}
        connect: tcp://127.0.0.1:5998
        from_mqtt: t
"""


def test_a_socket_that_is_a_list_or_a_mapping_is_a_problem_at_the_key(
    tmp_path: Path,
) -> None:
    code, lines = check(tmp_path, QUIET + CONFIG)
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:7 adapters[0].zmq_to_mqtt[0].socket: expected one of sub, pull, rep,"
            " router, got a list",
            "edgebus.yaml:13 adapters[1].mqtt_to_nng[0].socket: expected one of pub0,"
            " push0, pair0, pair1, req0, got a mapping",
        ],
    )
