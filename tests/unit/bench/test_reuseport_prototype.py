"""The multi-core prototype's workers share one port and each answers as a broker."""

from __future__ import annotations

from bench.client import mqtt_connect
from bench.frames import encode_disconnect
from bench.reuseport_prototype import _measure
from bench.servers import serving
from tests.helpers.timeouts import unit


def test_two_workers_on_one_port_answer_connects_and_the_load_runs() -> None:
    with serving("bench.reuseport_prototype", 2) as (port, pids):
        assert len(set(pids)) == 2
        for n in range(20):  # the kernel spreads these over both workers
            with mqtt_connect(port, f"proto-{n}", 4, timeout_s=unit(10)) as sock:
                sock.sendall(encode_disconnect())
                sock.settimeout(unit(10))
                assert sock.recv(16) == b""  # closed after the DISCONNECT
        result = _measure(port, pids, warmup_s=0.2, duration_s=0.5)
    assert result.rate > 0  # connects completed in the window
