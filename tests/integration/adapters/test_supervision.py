"""A failing adapter is restarted with backoff while MQTT clients keep working."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from adapters import registry
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

CONFIG = """
adapters:
  - type: loopback
    name: {name}
    restart_backoff: 0.1s
    restart_backoff_max: 0.4s
    mappings:
      - source: never/used
        target: never/used2
"""


@pytest.fixture
def adapter_class(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def use(path: str, library: str | None = None) -> None:
        entry = registry.REGISTRY["loopback"]
        monkeypatch.setitem(
            registry.REGISTRY,
            "loopback",
            registry.AdapterType(entry.config, path, "fake-extra" if library else None, library),
        )

    return use


def test_failing_adapter_backs_off_and_recovers(tmp_path: Path, adapter_class) -> None:  # type: ignore[no-untyped-def]
    adapter_class("tests.integration.adapters.flaky:FlakyAdapter")
    with running_gateway(tmp_path, CONFIG.format(name="flaky")) as gw:
        watcher = RawClient("127.0.0.1", gw.port, protocol_level=5)
        watcher.send(mb.gen_connect("watcher", proto_ver=5))
        watcher.recv_packet()
        watcher.send(mb.gen_subscribe(1, "flaky/#", 1, proto_ver=5))
        watcher.recv_packet()
        states: list[str] = []
        errors: set[str] = set()
        deadline = time.monotonic() + unit(10)
        while True:
            status = gw.call(lambda: gw.gateway.adapters.status("flaky"))
            if not states or states[-1] != status["state"]:
                states.append(status["state"])
            if status["last_error"]:
                errors.add(status["last_error"])
            if status["restarts"] >= 3 and status["state"] == "running":
                break
            assert time.monotonic() < deadline, states
            # MQTT keeps working while the adapter fails.
            watcher.ping(unit(2))
            time.sleep(0.02)
        assert "backing_off" in states
        assert any("ConnectionError: native side unreachable" in e for e in errors)
        assert any("RuntimeError: native side crashed" in e for e in errors)
        got = {watcher.recv_publish(unit(5)).topic for _ in range(2)}
        assert got == {"flaky/3", "flaky/4"}


def test_missing_native_library_is_reported_not_retried(tmp_path: Path, adapter_class) -> None:  # type: ignore[no-untyped-def]
    adapter_class("tests.integration.adapters.needs_missing_lib:Adapter", "edgebus_missing_lib")
    with running_gateway(tmp_path, CONFIG.format(name="nolib")) as gw:
        deadline = time.monotonic() + unit(5)
        while gw.call(lambda: gw.gateway.adapters.status("nolib"))["state"] != "unavailable":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        status = gw.call(lambda: gw.gateway.adapters.status("nolib"))
        assert "pip install 'edgebus[fake-extra]'" in status["last_error"]
        assert "edgebus_missing_lib" in status["last_error"]


def test_restart_on_request(tmp_path: Path) -> None:
    with running_gateway(tmp_path, CONFIG.format(name="again")) as gw:
        deadline = time.monotonic() + unit(5)
        while gw.call(lambda: gw.gateway.adapters.status("again"))["state"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        gw.call(lambda: gw.loop.create_task(gw.gateway.adapters.restart("again")))
        while gw.call(lambda: gw.gateway.adapters.status("again"))["restarts"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
