"""``pause``, ``resume`` and ``restart`` of a component (``/components/...``, and
``/bridges/...`` for a bridge) answer the state after the request: ``stopping`` while it
drains, then ``paused``; never the state from before."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.gateway import running_gateway
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.api.support import Http
from tests.integration.bridge.support import Remote
from tests.integration.components.support import wait_for

LOOPBACK = """
adapters:
  - type: loopback
    name: echo
    mappings:
      - {source: "in/{x}", target: "out/{x}"}
"""

STOPPING = {"stopping", "paused"}
STARTING = {"starting", "running"}
# A bridge is ``degraded`` from the start of a run until its link is up (docs/bridges.md).
BRIDGE_STARTING = {*STARTING, "degraded"}


def _state(http: Http, path: str) -> str:
    reply = http.get(path)
    assert reply.status == 200, reply.text
    return str(reply.json()["state"])


def _answered(http: Http, path: str) -> dict[str, object]:
    reply = http.post(path)
    assert reply.status == 200, reply.text
    answer: dict[str, object] = reply.json()
    return answer


def test_an_adapter_answers_its_state_after_pause_and_resume(tmp_path: Path) -> None:
    with running_gateway(tmp_path, API_CONFIG + LOOPBACK) as gw:
        http = http_of(gw)
        path = "/api/v1/components/adapter/echo"
        wait_for(lambda: _state(http, path), lambda s: s == "running")
        before = http.get(path).json()
        assert _answered(http, f"{path}/resume")["state"] == "running"  # not paused: as is
        after = http.get(path).json()
        assert (after["state"], after["restarts"], after["since"]) == (
            "running",
            before["restarts"],
            before["since"],
        )

        assert _answered(http, f"{path}/pause")["state"] in STOPPING
        assert _state(http, path) in STOPPING
        wait_for(lambda: _state(http, path), lambda s: s == "paused")
        assert _answered(http, f"{path}/pause")["state"] == "paused"

        assert _answered(http, f"{path}/resume")["state"] in STARTING
        assert _state(http, path) in STARTING
        wait_for(lambda: _state(http, path), lambda s: s == "running")

        assert _answered(http, f"{path}/pause")["state"] in STOPPING
        wait_for(lambda: _state(http, path), lambda s: s == "paused")
        assert _answered(http, f"{path}/restart")["state"] in STARTING
        wait_for(lambda: _state(http, path), lambda s: s == "running")
        restarts = http.get(path).json()["restarts"]
        assert _answered(http, f"{path}/restart")["state"] in {"stopping", *STARTING}
        wait_for(lambda: http.get(path).json()["restarts"], lambda n: n == restarts + 1)
        wait_for(lambda: _state(http, path), lambda s: s == "running")


def test_a_bridge_answers_its_state_after_pause_and_resume(tmp_path: Path) -> None:
    with Remote(tmp_path / "remote") as remote:
        bridge = f"""
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    reconnect_backoff: 100ms
    forwards: [{{local: "flow/{{rest#}}", remote: "up/{{rest}}"}}]
"""
        with running_gateway(tmp_path, API_CONFIG + bridge) as gw:
            http = http_of(gw)
            path = "/api/v1/bridges/cloud"
            wait_for(lambda: _state(http, path), lambda s: s == "running")

            assert _answered(http, f"{path}/pause")["state"] in STOPPING
            assert _state(http, path) in STOPPING
            wait_for(lambda: _state(http, path), lambda s: s == "paused")
            assert _answered(http, f"{path}/pause")["state"] == "paused"
            component = "/api/v1/components/bridge/cloud"
            assert _state(http, component) == "paused"

            assert _answered(http, f"{path}/resume")["state"] in STARTING
            assert _state(http, path) in BRIDGE_STARTING
            wait_for(lambda: _state(http, path), lambda s: s == "running")

            assert _answered(http, f"{component}/pause")["state"] in STOPPING
            wait_for(lambda: _state(http, path), lambda s: s == "paused")
            assert _answered(http, f"{component}/resume")["state"] in STARTING
            wait_for(lambda: _state(http, path), lambda s: s == "running")


DISABLED = """
adapters:
  - type: loopback
    name: second
    enabled: false
    mappings:
      - {source: "x/{a}", target: "y/{a}"}
bridges:
  - name: cloud
    enabled: false
    server: "127.0.0.1:1"
    forwards: [{local: "f/#"}]
"""


def test_a_disabled_component_answers_409_saying_it_is_disabled(tmp_path: Path) -> None:
    """Every way to pause, resume or restart a disabled component answers 409 naming it
    disabled; ``/adapters/{name}/restart`` too (it answered 404 while GET answered 200)."""
    with running_gateway(tmp_path, API_CONFIG + DISABLED) as gw:
        http = http_of(gw)
        assert _state(http, "/api/v1/adapters/second") == "stopped"
        paths = {
            "/api/v1/adapters/second/restart": "the adapter 'second' is disabled",
            "/api/v1/bridges/cloud/pause": "the bridge 'cloud' is disabled",
            "/api/v1/bridges/cloud/resume": "the bridge 'cloud' is disabled",
        }
        for action in ("restart", "pause", "resume"):
            paths[f"/api/v1/components/adapter/second/{action}"] = (
                "the adapter 'second' is disabled"
            )
            paths[f"/api/v1/components/bridge/cloud/{action}"] = "the bridge 'cloud' is disabled"
        for path, detail in paths.items():
            reply = http.post(path)
            assert (reply.status, reply.json()) == (409, {"detail": detail}), path
        assert _state(http, "/api/v1/adapters/second") == "stopped"
        assert http.post("/api/v1/adapters/nope/restart").status == 404
