"""One supervisor for every kind: failing adapters, bridges and sinks restart with backoff,
``degraded(reason)`` shows in the API and ``/metrics``, and the run-time operations
(add, update, pause, resume, restart, remove) work while MQTT clients keep working."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from gateway.components import ADAPTER, BRIDGE, KINDS, SINK, ComponentType, Spec, registry
from tests.helpers import mqtt_builder as mb
from tests.helpers.components import ATTEMPTS, FlakyConfig, registered  # noqa: F401
from tests.helpers.gateway import running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.components.support import API, http_of, metric, status_of, wait_for

FLAKY = {
    "type": "test-flaky",
    "restart_backoff": "0.1s",
    "restart_backoff_max": "0.4s",
    "degrade": "remote unreachable",
}


def _flaky(name: str) -> FlakyConfig:
    return FlakyConfig.model_validate({**FLAKY, "name": name})


def test_adapters_bridges_and_sinks_restart_alike_and_report_degraded(
    tmp_path: Path,
    registered: None,  # noqa: F811
) -> None:
    for kind in KINDS:
        ATTEMPTS.pop(f"{kind}/flaky", None)
    config = API + "adapters:\n  - {" + ", ".join(f"{k}: {v!r}" for k, v in FLAKY.items())
    config += ", name: flaky}\n"
    with running_gateway(tmp_path, config) as gw:
        watcher = RawClient("127.0.0.1", gw.port, protocol_level=5)
        watcher.send(mb.gen_connect("watcher", proto_ver=5))
        watcher.recv_packet()
        watcher.send(mb.gen_subscribe(1, "flaky/#", 1, proto_ver=5))
        watcher.recv_packet()
        for spec in (Spec.of(BRIDGE, _flaky("flaky")), Spec.of(SINK, _flaky("flaky"))):
            gw.call(partial(gw.gateway.components.add, spec))

        errors: dict[str, set[str]] = {kind: set() for kind in KINDS}
        states: dict[str, list[str]] = {kind: [] for kind in KINDS}

        def observe() -> list[dict[str, object]]:
            statuses = []
            for kind in KINDS:
                status = status_of(gw, kind, "flaky")
                if status["last_error"]:
                    errors[kind].add(str(status["last_error"]))
                if not states[kind] or states[kind][-1] != status["state"]:
                    states[kind].append(str(status["state"]))
                statuses.append(status)
            watcher.ping(unit(2))  # MQTT keeps working meanwhile
            return statuses

        wait_for(
            observe,
            lambda statuses: all(
                s["state"] == "degraded" and int(str(s["restarts"])) >= 3 for s in statuses
            ),
        )
        for kind in KINDS:
            assert "backing_off" in states[kind]
            assert any("ConnectionError: native side unreachable" in e for e in errors[kind])
            assert any("RuntimeError: native side crashed" in e for e in errors[kind])
        got = {watcher.recv_publish(unit(5)).topic for _ in range(6)}
        assert got == {f"flaky/{kind}/{n}" for kind in KINDS for n in (3, 4)}

        http = http_of(gw)
        listed = {c["kind"]: c for c in http.get("/api/v1/components").json()}
        assert set(listed) == set(KINDS)
        for component in listed.values():
            assert (component["name"], component["state"]) == ("flaky", "degraded")
            assert component["reason"] == "remote unreachable"
            assert component["restarts"] >= 3
            assert component["component_stats"] == {"answer": 42}
            assert component["stats"]["published"] >= 2
        one = http.get("/api/v1/components/bridge/flaky").json()
        assert (one["state"], one["reason"], one["protocol"]) == (
            "degraded",
            "remote unreachable",
            "bridge",
        )
        adapter = http.get("/api/v1/adapters/flaky").json()
        assert adapter["state"] == "degraded"
        assert adapter["details"]["reason"] == "remote unreachable"
        assert http.get("/api/v1/components/sink/nothing").status == 404

        metrics = http.get("/metrics").text
        for kind in KINDS:
            ident = {"kind": kind, "type": "test-flaky", "name": "flaky"}
            assert metric(metrics, "edgebus_component_degraded", **ident) == 1
            assert metric(metrics, "edgebus_component_up", **ident) == 0
            assert metric(metrics, "edgebus_component_restarts_total", **ident) >= 3
            assert metric(metrics, "edgebus_component_stat", **ident, stat="answer") == 42
        assert metric(metrics, "edgebus_adapter_up", adapter="flaky", state="degraded") == 0


def test_missing_native_library_is_reported_not_retried(tmp_path: Path) -> None:
    unregister = registry.register(
        ComponentType(
            BRIDGE,
            "test-nolib",
            "tests.integration.components.needs_missing_lib:Adapter",
            "tests.helpers.components:FlakyConfig",
            extra="fake-extra",
            library="edgebus_missing_lib",
        )
    )
    try:
        with running_gateway(tmp_path, API) as gw:
            gw.call(lambda: gw.gateway.components.add(Spec(BRIDGE, "test-nolib", "nolib", None)))
            status = wait_for(
                lambda: status_of(gw, BRIDGE, "nolib"), lambda s: s["state"] == "unavailable"
            )
            assert "pip install 'edgebus[fake-extra]'" in status["last_error"]
            assert "edgebus_missing_lib" in status["last_error"]
            gw.call(lambda: gw.gateway.components.add(Spec(SINK, "not-registered", "x", None)))
            status = wait_for(
                lambda: status_of(gw, SINK, "x"), lambda s: s["state"] == "unavailable"
            )
            assert "no sink type 'not-registered' is registered" in status["last_error"]
    finally:
        unregister()


LOOPBACK = """
adapters:
  - type: loopback
    name: ops
    mappings:
      - source: in/{x}
        target: out/{x}
"""


def test_pause_resume_restart_update_and_remove(tmp_path: Path) -> None:
    with running_gateway(tmp_path, API + LOOPBACK) as gw:
        components = gw.gateway.components
        http = http_of(gw)

        def state() -> str:
            return str(status_of(gw, ADAPTER, "ops")["state"])

        wait_for(state, lambda s: s == "running")
        assert http.post("/api/v1/components/adapter/ops/pause").status == 200
        wait_for(state, lambda s: s == "paused")
        assert http.post("/api/v1/components/adapter/ops/resume").status == 200
        wait_for(state, lambda s: s == "running")
        assert http.post("/api/v1/components/adapter/ops/restart").status == 200
        wait_for(lambda: status_of(gw, ADAPTER, "ops"), lambda s: s["restarts"] == 1)
        wait_for(state, lambda s: s == "running")

        old = gw.call(lambda: components.instance(ADAPTER, "ops"))
        changed = old.config.model_copy(update={"queue_size": 7})
        assert gw.call(lambda: components.update(Spec.of(ADAPTER, changed))) is True
        wait_for(
            lambda: gw.call(lambda: components.instance(ADAPTER, "ops")),
            lambda now: now is not None and now is not old and now.config.queue_size == 7,
        )
        wait_for(state, lambda s: s == "running")

        assert gw.call(lambda: components.remove(ADAPTER, "ops")) is True
        assert gw.call(lambda: components.status(ADAPTER, "ops")) is None
        assert http.get("/api/v1/components/adapter/ops").status == 404
        # The same name can come back at once: it starts once the old one has stopped.
        gw.call(lambda: components.add(Spec.of(ADAPTER, changed)))
        wait_for(state, lambda s: s == "running")
