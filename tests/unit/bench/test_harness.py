"""Pure helpers of the bench harness: process spreading, percentiles, labels, targets."""

from __future__ import annotations

import pytest

from bench.latency import percentile
from bench.loadgen import spread
from bench.runner import BrokerSlot, slots_for
from bench.scenarios import Target


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
