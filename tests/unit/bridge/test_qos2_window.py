"""QoS 2 in flight on an MQTT 3.1.1 link: at most QOS2_INFLIGHT_V311 (mosquitto's default
max_inflight_messages), and no QoS 1 PUBLISH while that many are, since 3.1.1 has no
Receive Maximum and a refused PUBLISH gets a PUBACK / PUBREC that cannot say so. QoS 1
alone keeps the whole window; MQTT 5 follows the remote's Receive Maximum. A fake link,
a real queue (tests/unit/bridge/test_forward.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.forward import QOS2_INFLIGHT_V311, Forwarder
from tests.helpers import mqtt_builder as mb
from tests.unit.bridge.test_forward import FakeWire, _config, _ctx, _run, _settle


def _publishes(wire: FakeWire) -> list[mb.Packet]:
    return [p for p in wire.packets() if p.type == mb.PacketType.PUBLISH]


def test_a_3_1_1_link_keeps_at_most_20_qos2_in_flight(tmp_path: Path) -> None:
    assert QOS2_INFLIGHT_V311 == 20

    async def body(f: Forwarder) -> None:
        for n in range(1, 51):
            f.offer(_ctx(n, qos=2))
        wire = FakeWire(level=4)
        f.attach(wire, False, None, None)
        await _settle(f)
        sent = _publishes(wire)
        assert [int(p.payload) for p in sent] == list(range(1, 21))
        # Until a PUBCOMP, a PUBREC frees nothing (the remote holds the message).
        f.pubrec(sent[0].packet_id or 0, 0)
        await _settle(f)
        assert _publishes(wire) == []
        f.pubcomp(sent[0].packet_id or 0, 0)
        f.pubrec(sent[1].packet_id or 0, 0x97)  # refused: done too
        await _settle(f)
        assert [int(p.payload) for p in _publishes(wire)] == [21, 22]
        assert (f.qos2_inflight, f.acked, f.rejected) == (20, 1, 1)
        f.detach()
        assert f.qos2_inflight == 0
        again = FakeWire(level=4)
        f.attach(again, True, None, None)
        await _settle(f)
        assert [int(p.payload) for p in _publishes(again)] == list(range(3, 23))

    _run(tmp_path, _config(), body)


def test_on_3_1_1_no_qos1_goes_while_20_qos2_are_in_flight(tmp_path: Path) -> None:
    """Mosquitto refuses a QoS 1 PUBLISH too while its quota is full of QoS 2 (a plain
    PUBACK on 3.1.1): the QoS 1 message behind them waits for a PUBCOMP."""

    async def body(f: Forwarder) -> None:
        for n in range(1, 21):
            f.offer(_ctx(n, qos=2))
        for n in range(21, 31):
            f.offer(_ctx(n, qos=1))
        wire = FakeWire(level=4)
        f.attach(wire, False, None, None)
        await _settle(f)
        sent = _publishes(wire)
        assert [int(p.payload) for p in sent] == list(range(1, 21))
        f.pubrec(sent[0].packet_id or 0, 0)
        await _settle(f)
        f.pubcomp(sent[0].packet_id or 0, 0)
        await _settle(f)
        assert [(int(p.payload), p.qos) for p in _publishes(wire)] == [
            (n, 1) for n in range(21, 31)
        ]

    _run(tmp_path, _config(), body)


@pytest.mark.parametrize(("level", "qos", "expected"), [(4, 1, 50), (5, 2, 50)])
def test_qos1_and_mqtt5_keep_the_whole_window(
    tmp_path: Path, level: int, qos: int, expected: int
) -> None:
    async def body(f: Forwarder) -> None:
        for n in range(1, 51):
            f.offer(_ctx(n, qos=qos))
        wire = FakeWire(level=level)
        f.attach(wire, False, None, None)
        await _settle(f)
        assert len(_publishes(wire)) == expected

    _run(tmp_path, _config(), body)


def test_a_smaller_window_or_receive_maximum_still_bounds_qos2(tmp_path: Path) -> None:
    async def body(f: Forwarder) -> None:
        for n in range(1, 51):
            f.offer(_ctx(n, qos=2))
        wire = FakeWire(level=5)
        f.attach(wire, False, 7, None)  # the remote's Receive Maximum
        await _settle(f)
        assert len(_publishes(wire)) == 7

    _run(tmp_path, _config(max_inflight=10), body)
