"""bench.connect_phases drives the gateway's own connections up to each phase, and its
server answers the connect load while it does."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.connect_phases import PHASES, drive
from bench.connects import run_connects
from bench.servers import serving
from broker_core.listeners.settings import ListenerSettings
from tests.helpers.gateway import running_gateway

CONNACK = b"\x20\x02\x00\x00"


@pytest.mark.parametrize("phase", PHASES)
def test_each_phase_goes_as_far_as_it_says(tmp_path: Path, phase: str) -> None:
    settings = ListenerSettings(name="tcp")
    with running_gateway(tmp_path) as gw:
        written = gw.call(lambda: drive(gw.broker, settings, gw.loop, phase))
        left = gw.call(lambda: (len(gw.broker.connections), len(gw.broker.sessions)))
    assert written == (b"" if phase == "accept" else CONNACK)
    assert left == (0, 0)  # it ended with connection_lost, its clean session with it


def test_the_load_runs_against_a_gateway_driving_its_connections() -> None:
    with serving("bench.connect_phases", args=("disconnect", "2")) as (port, pids):
        result = run_connects(port, pids[0], lambda: None, warmup_s=0.2, duration_s=0.5)
    assert result.connects > 0 and result.failures == 0
