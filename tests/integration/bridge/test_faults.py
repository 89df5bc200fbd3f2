"""Store-and-forward under faults, each ending with an exact count.

- the remote stopped in the middle of a 20,000-message QoS 1 stream and started again:
  every message arrives, in order;
- an outage longer than the queue's bound: the oldest are dropped, the count is exact;
- the gateway killed with SIGKILL while 10,000 messages are queued, then started again:
  every message arrives, none twice beyond the inflight window.

Every count is taken by a subscriber at the remote. Where the remote starts after the
bridge's gateway, that subscriber's persistent session must be there before: a bridge
reconnecting within its backoff forwards at once, and what the remote acknowledges with
no subscription in place is gone for good (the remote's loss, not the bridge's).
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.brokers import free_port, start_edgebus
from tests.helpers.gateway import running_gateway
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.bridge.support import (
    Collector,
    Remote,
    StreamPublisher,
    first_occurrences,
    wait_until,
)
from tests.integration.components.support import status_of

WINDOW = 100


def _bridge(remote: Remote, extra: str = "") -> str:
    return f"""
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    protocol_version: "3.1.1"
    client_id: gw-faults
    keepalive: 2s
    reconnect_backoff: 100ms
    reconnect_backoff_max: 500ms
    max_inflight: {WINDOW}
    forwards: [{{local: "stream/#", remote: "cloud/stream", qos: 1}}]
{extra}"""


def _numbers(collector: Collector) -> list[int]:
    return [int(payload) for payload in collector.payloads()]


def test_the_remote_restarting_mid_stream_loses_nothing_and_keeps_the_order(
    tmp_path: Path,
) -> None:
    total = 20_000
    with Remote(tmp_path / "remote") as remote:
        cloud = Collector(remote.port, "cloud/#", "cloud-sub")
        with running_gateway(tmp_path, _bridge(remote)) as gw:
            wait_until(lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "running")
            publisher = StreamPublisher(gw.port, "stream/x", total)
            publisher.start()
            wait_until(cloud.count, lambda n: n >= 4_000, seconds=60)
            remote.stop()
            wait_until(
                lambda: status_of(gw, "bridge", "cloud")["component_stats"]["connected"],
                lambda c: c == 0,
            )
            time.sleep(0.5)  # an outage, while the publisher goes on
            remote.start()
            assert publisher.done(120) == list(range(1, total + 1))
            wait_until(lambda: len(set(_numbers(cloud))), lambda n: n >= total, seconds=120)
            stats = wait_until(
                lambda: status_of(gw, "bridge", "cloud")["component_stats"],
                lambda s: s["queue_depth"] == 0,
            )
        cloud.close()
    assert first_occurrences(_numbers(cloud)) == list(range(1, total + 1))
    # The bridge sent again at most its window: nothing when every message in flight was
    # acknowledged before mosquitto, stopped with SIGTERM, closed the connection. (Its
    # subscriber may see more twice: mosquitto, restarted, delivers again what it had not
    # seen acknowledged.)
    assert total <= stats["sent"] <= total + WINDOW
    assert (stats["acked"], stats["dropped"], stats["rejected"]) == (total, 0, 0)
    assert stats["connects"] >= 2


def test_an_outage_longer_than_the_queue_drops_the_oldest_and_counts_them(
    tmp_path: Path,
) -> None:
    extra = "    queue: {max_messages: 1000, overflow: drop_oldest}\n"
    with Remote(tmp_path / "remote") as remote:
        cloud = Collector(remote.port, "cloud/#", "cloud-sub")
        with running_gateway(tmp_path, _bridge(remote, extra)) as gw:
            wait_until(lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "running")
            assert StreamPublisher(gw.port, "stream/x", 100).done_after_start() == list(
                range(1, 101)
            )
            wait_until(cloud.count, lambda n: n >= 100)
            remote.stop()
            wait_until(lambda: status_of(gw, "bridge", "cloud")["state"], lambda s: s == "degraded")
            publisher = StreamPublisher(gw.port, "stream/x", 3_000, first=101)
            assert publisher.done_after_start() == list(range(101, 3_101))
            stats = status_of(gw, "bridge", "cloud")["component_stats"]
            assert (stats["queue_depth"], stats["dropped_overflow"], stats["dropped"]) == (
                1_000,
                2_000,
                2_000,
            )
            remote.start()
            wait_until(lambda: len(set(_numbers(cloud))), lambda n: n >= 1_100, seconds=30)
            wait_until(
                lambda: status_of(gw, "bridge", "cloud")["component_stats"]["queue_depth"],
                lambda d: d == 0,
            )
        cloud.close()
    assert first_occurrences(_numbers(cloud)) == [*range(1, 101), *range(2_101, 3_101)]


@pytest.mark.timeout(240)
def test_sigkill_with_10000_queued_loses_nothing_and_resends_at_most_the_window(
    tmp_path: Path,
) -> None:
    total = 10_000
    remote = Remote(tmp_path / "remote")
    with remote:  # the subscriber's session waits at the remote, down until the queue is full
        Collector(remote.port, "cloud/#", "cloud-sub").close()
    api_port = free_port()

    def start() -> object:
        extra = _bridge(remote) + f"api:\n  bind: 127.0.0.1:{api_port}\n  keys: ['{KEY}']\n"
        return start_edgebus(tmp_path / "gateway", extra + "persistence: sqlite\n")

    http = Http(f"http://127.0.0.1:{api_port}", bearer(KEY))

    def depth() -> int:
        try:
            reply = http.get("/api/v1/bridges/cloud")
        except OSError:  # its first request loads the API: seconds on a loaded machine
            return -1
        return reply.json()["stats"].get("queue_depth", -1) if reply.status == 200 else -1

    gateway = start()
    try:
        publisher = StreamPublisher(gateway.port, "stream/x", total)  # type: ignore[attr-defined]
        assert publisher.done_after_start(120) == list(range(1, total + 1))
        assert wait_until(depth, lambda d: d == total) == total
        remote.start()
        # Killed in the middle of the drain, with no subscriber connected yet: what the
        # remote acknowledged before the kill waits in the subscriber's session there.
        wait_until(depth, lambda d: 0 <= d <= total - 3_000, seconds=60)
        gateway.process.send_signal(signal.SIGKILL)  # type: ignore[attr-defined]
        gateway.process.wait(10)  # type: ignore[attr-defined]
        gateway.stop()  # type: ignore[attr-defined]
        gateway = start()
        cloud = Collector(remote.port, "cloud/#", "cloud-sub")
        wait_until(lambda: len(set(_numbers(cloud))), lambda n: n >= total, seconds=120)
        wait_until(depth, lambda d: d == 0)
        cloud.close()
    finally:
        gateway.stop()  # type: ignore[attr-defined]
        remote.stop()
    got = _numbers(cloud)
    assert first_occurrences(got) == list(range(1, total + 1))
    twice = [number for number, count in Counter(got).items() if count > 1]
    assert len(got) - total <= WINDOW
    assert len(twice) <= WINDOW
