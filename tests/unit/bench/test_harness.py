"""Pure helpers of the bench harness: process spreading, percentiles, labels, targets."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from bench.latency import percentile
from bench.loadgen import spread
from bench.procstat import cpu_seconds, cpu_split
from bench.runner import BrokerSlot, slots_for
from bench.scenarios import Target
from tests.helpers.timeouts import unit


def test_spread_deals_connections_round_robin() -> None:
    assert spread(4, 2) == [[0, 2], [1, 3]]
    assert spread(10, 3) == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert spread(1, 4) == [[0]]
    assert spread(3, 0) == [[0, 1, 2]]


def test_percentile_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 0.50) == 50
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile([7], 0.99) == 7
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_slots_label_duplicates() -> None:
    assert slots_for(["edgebus", "mosquitto"]) == [
        BrokerSlot("edgebus", "edgebus"),
        BrokerSlot("mosquitto", "mosquitto"),
    ]
    assert [s.label for s in slots_for(["mosquitto", "mosquitto"])] == [
        "mosquitto (A)",
        "mosquitto (B)",
    ]


def test_targets() -> None:
    half = Target("ratio_min", 0.5)
    assert half.met(50.0, 100.0) is True
    assert half.met(49.0, 100.0) is False
    assert half.met(49.0, None) is None
    assert Target("below", 5.0).met(4.99, None) is True
    assert Target("below", 5.0).met(5.0, None) is False
    assert Target("max", 10.0).met(10.0, 1.0) is True
    assert half.describe("msg/s") == ">= 0.5x"
    assert Target("max", 10.0).describe("KiB") == "<= 10 KiB"


def test_cpu_split_parts_a_process_s_time_into_its_own_code_and_the_kernel_s() -> None:
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        deadline = time.monotonic() + unit(30)
        while cpu_split(burner.pid)[0] < 0.2:  # a busy loop's time is its own code's
            assert time.monotonic() < deadline, "the busy loop got no CPU"
            time.sleep(0.05)
        burner.send_signal(signal.SIGSTOP)  # its times stay still while read
        user, system = cpu_split(burner.pid)
        assert user >= 0.2 and system >= 0
        assert cpu_seconds(burner.pid) == pytest.approx(user + system)
    finally:
        burner.kill()
        burner.wait(10)
