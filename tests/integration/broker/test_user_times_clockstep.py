"""The times a user sees follow the wall clock after an NTP step (broker_core.clock).

An edge device without a real-time clock boots a day behind, starts ``edgebus``, then
NTP steps the clock right. The broker times keep alive and expiry on its own clock
(wall time at start + monotonic time), which the step does not move; but what it shows
is converted to the wall clock when it is read: after the step, the API's
``received_at`` of a retained message received before the step and of one received
after it, a rule's ``timestamp`` and the stream record (read as the Spark source reads
it, ``spark_sink.client.GatewayClient``) of the message received after it are the real
time, not a day off. Before the step, the rule's ``timestamp`` agrees with its
``now_timestamp()`` (the wall clock of then), after it too.

``edgebus run`` runs with its wall clock offset (``tests.helpers.clock_offset``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest

from spark_sink.client import GatewayClient, GatewayError
from tests.helpers.brokers import BrokerHandle, free_port, start_edgebus
from tests.helpers.clock_offset import CLOCK_OFFSET_MAIN, OFFSET_ENV, ClockStep
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY, Http, bearer

DAY = 86_400.0
#: How far from the real time a time may be: the test's steps, not a day.
NEAR_S = 300.0

T = TypeVar("T")


def _config(api_port: int) -> str:
    return f"""
persistence: memory
api:
  bind: 127.0.0.1:{api_port}
  keys: ["{KEY}"]
stream:
  enabled: true
  topics: ["t/#"]
  fsync: never
rules:
  - name: stamps
    sql: >-
      SELECT topic, timestamp, publish_received_at,
             now_timestamp('millisecond') AS now FROM "t/#"
    actions:
      - {{type: republish, topic: "stamps", qos: 1}}
"""


@pytest.fixture
def stepped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[BrokerHandle, ClockStep, Http, GatewayClient]]:
    # The device boots a day behind: the broker starts with its wall clock a day off.
    step = ClockStep(tmp_path / "clock_offset", -DAY)
    monkeypatch.setenv(OFFSET_ENV, str(step.path))
    api_port = free_port()
    broker = start_edgebus(tmp_path / "edgebus", _config(api_port), main=CLOCK_OFFSET_MAIN)
    base = f"http://127.0.0.1:{api_port}"
    with broker:
        yield broker, step, Http(base, bearer(KEY)), GatewayClient(base, KEY, timeout_s=unit(10))


def _until(what: str, probe: Callable[[], T | None]) -> T:
    deadline = time.monotonic() + unit(15)
    while True:
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not in time")
        time.sleep(0.05)


def _retained_at(http: Http, topic: str) -> float | None:
    try:
        reply = http.get(f"/api/v1/retained/{topic}")
    except OSError:  # the API is not listening yet
        return None
    if reply.status != 200:
        return None
    received_at: float = reply.json()["received_at"]
    return received_at


def _records(client: GatewayClient, count: int) -> list[dict[str, Any]] | None:
    try:
        offsets = client.offsets()
        if offsets["end"] - offsets["start"] < count:
            return None
        response = client.records(offsets["start"], offsets["end"], format="jsonl")
    except GatewayError:
        return None
    try:
        return [json.loads(line) for line in response.body.read().splitlines()]
    finally:
        response.close()


def _near(what: str, seconds: float, real: float) -> None:
    off = seconds - real
    assert abs(off) < NEAR_S, (
        f"{what} is {off / 3600:+.2f} h from the wall clock (the step was +24 h): "
        f"{datetime.fromtimestamp(seconds).isoformat()} for "
        f"{datetime.fromtimestamp(real).isoformat()}"
    )


def _stamp(watcher: RawClient, topic: str) -> dict[str, Any]:
    message = watcher.recv_publish(unit(10))
    assert message.topic == "stamps"
    row: dict[str, Any] = json.loads(message.payload)
    assert row["topic"] == topic
    return row


def test_times_shown_after_an_ntp_step_are_the_wall_clock(
    stepped: tuple[BrokerHandle, ClockStep, Http, GatewayClient],
) -> None:
    broker, step, http, client = stepped
    watcher = RawClient(broker.host, broker.port, protocol_level=5)
    watcher.do_connect("watcher", proto_ver=5)
    watcher.subscribe("stamps", qos=1)
    device = RawClient(broker.host, broker.port, protocol_level=5)
    device.do_connect("device", proto_ver=5)
    try:
        # Received while the wall clock is a day behind.
        device.publish("t/before", b"1", qos=1, retain=True)
        before = _stamp(watcher, "t/before")
        # Its rule row agrees with the rule engine's wall clock of then (a day behind).
        assert abs(before["timestamp"] - before["now"]) < NEAR_S * 1000
        _near("the rule's timestamp before the step", before["timestamp"] / 1000, time.time() - DAY)
        _until("the record of t/before", lambda: _records(client, 1))

        step.set(0.0)  # NTP sets the clock right: a step of +1 day
        device.publish("t/after", b"2", qos=1, retain=True)
        after = _stamp(watcher, "t/after")
        real = time.time()

        # The rule engine: timestamp, publish_received_at and now_timestamp() agree.
        _near("the rule's timestamp after the step", after["timestamp"] / 1000, real)
        _near("the rule's publish_received_at", after["publish_received_at"] / 1000, real)
        assert abs(after["timestamp"] - after["now"]) < NEAR_S * 1000

        # The API: both retained messages at the corrected time they were received,
        # the one received before the step included.
        for topic in ("t/before", "t/after"):
            shown = _until(f"retained {topic}", partial(_retained_at, http, topic))
            _near(f"the API's received_at of retained {topic}", shown, real)

        # The stream, as Spark reads it: the record written after the step is at the
        # real time; the one written before it keeps the wall clock of then.
        records = _until("the records of both", lambda: _records(client, 2))
        times = {r["topic"]: datetime.fromisoformat(r["ts"]).timestamp() for r in records}
        _near("the stream record of t/after", times["t/after"], real)
        _near(
            "the stream record of t/before (written before the step)", times["t/before"], real - DAY
        )
    finally:
        for mqtt in (device, watcher):
            mqtt.close()
