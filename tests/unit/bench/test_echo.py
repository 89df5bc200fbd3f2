"""``bench.echo``: a client publishing QoS 1 to its own subscription, one at a time."""

from __future__ import annotations

import os
from pathlib import Path

from bench.echo import run_echo
from tests.helpers.gateway import running_gateway


def test_round_trips_acknowledge_the_copies_and_are_counted(tmp_path: Path) -> None:
    with running_gateway(tmp_path, "api:\n  enabled: false\n") as gw:
        _, port = gw.address()
        result = run_echo(port, os.getpid(), lambda: None, warmup_s=0.1, duration_s=0.3)
    assert result.round_trips > 0
    assert 0 < result.p50_ms <= result.p99_ms
