"""The connection's flow control reaches the real transport on both event loops.

uvloop's transports are not subclasses of ``asyncio.Transport``: a connection that
checked ``isinstance`` before setting its write high-water mark or pausing reading did
neither under uvloop, the loop ``edgebus run`` uses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
import uvloop

from broker_core.listeners.connection import MqttConnection
from tests.helpers.gateway import running_gateway
from tests.helpers.raw_client import RawClient

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_write_high_water_and_paused_reading_reach_the_transport(
    tmp_path: Path, loop: str
) -> None:
    config = "api:\n  enabled: false\nmqtt:\n  write_high_water: 300KB\n"
    with running_gateway(tmp_path, config, LOOPS[loop]) as gw:
        host, port = gw.address()
        with RawClient(host, port) as client:
            client.do_connect("flow")

            def connection() -> MqttConnection:
                [conn] = list(gw.broker.connections)
                return conn

            def limits() -> tuple[int, int]:
                transport = connection().transport
                assert transport is not None
                low, high = transport.get_write_buffer_limits()
                return low, high

            assert gw.call(limits)[1] == gw.broker.write_high_water == 300_000

            def reading_after(change: Callable[[MqttConnection], None]) -> bool:
                conn = connection()
                change(conn)
                transport = conn.transport
                assert transport is not None
                return transport.is_reading()

            assert gw.call(lambda: reading_after(lambda c: c._pause(4))) is False
            assert gw.call(lambda: reading_after(lambda c: c._resume(4))) is True
