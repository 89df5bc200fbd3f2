"""bench/bench_sockets.py builds gateway configurations that load."""

from __future__ import annotations

import pytest

from bench.bench_sockets import COUNTS, _adapter_config
from gateway.config import parse_config


@pytest.mark.parametrize("lib", sorted(COUNTS))
def test_the_adapter_configuration_loads(lib: str) -> None:
    text = _adapter_config(lib, "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", 1000)
    config = parse_config(text, "bench.yaml", env={})
    (adapter,) = config.adapters
    assert adapter.type == lib
    assert adapter.queue_size == 2000
