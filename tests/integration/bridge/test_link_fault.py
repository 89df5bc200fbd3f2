"""A real link fault: the remote broker in a network namespace behind a veth pair, the
link cut for 30 s in the middle of a stream (packets vanish: no reset, as on a real
network) and restored. Every message arrives, in order."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers.gateway import running_gateway
from tests.integration.bridge.netns import NamespaceUnavailable, RemoteNamespace
from tests.integration.bridge.support import StreamPublisher, first_occurrences, wait_until
from tests.integration.components.support import status_of

CUT_S = 30.0
RATE = 400  # messages per second, through the whole cut


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_link_cut_for_30s_mid_stream_loses_nothing(tmp_path: Path) -> None:
    try:
        remote = RemoteNamespace(tmp_path / "netns").open()
    except (NamespaceUnavailable, FileNotFoundError) as exc:
        pytest.skip(f"network namespaces cannot be made here: {exc}")
    try:
        config = f"""
bridges:
  - name: cloud
    server: "{remote.remote_ip}:{remote.port}"
    protocol_version: "5"
    client_id: gw-netns
    keepalive: 2s
    connect_timeout: 2s
    reconnect_backoff: 200ms
    reconnect_backoff_max: 1s
    max_inflight: 100
    forwards: [{{local: "stream/#", remote: "cloud/stream", qos: 1}}]
"""
        with running_gateway(tmp_path, config) as gw:
            wait_until(lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "running")
            total = int(RATE * (CUT_S + 8))
            publisher = StreamPublisher(gw.port, "stream/x", total, rate=RATE)
            publisher.start()
            wait_until(lambda: len(remote.payloads()), lambda n: n >= RATE * 2)
            remote.cut()
            cut_at = time.monotonic()
            status = wait_until(
                lambda: status_of(gw, "bridge", "cloud"), lambda s: s["state"] == "degraded"
            )
            assert "keep alive" in status["reason"] or "connect" in status["reason"]
            time.sleep(max(0.0, CUT_S - (time.monotonic() - cut_at)))
            during = status_of(gw, "bridge", "cloud")["component_stats"]
            assert during["connected"] == 0 and during["queue_depth"] > RATE * 20
            remote.restore()
            assert publisher.done(120) == list(range(1, total + 1))
            wait_until(lambda: len(set(remote.payloads())), lambda n: n >= total, seconds=90)
            stats = wait_until(
                lambda: status_of(gw, "bridge", "cloud")["component_stats"],
                lambda s: s["queue_depth"] == 0,
            )
    finally:
        remote.close()
    got = remote.payloads()
    assert first_occurrences(got) == list(range(1, total + 1))
    assert (stats["acked"], stats["dropped"]) == (total, 0)
    assert stats["sent"] - total <= 100  # at most the window sent again
