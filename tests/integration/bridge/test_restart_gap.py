"""A bridge restarted while a QoS 1 stream flows loses nothing that was acknowledged.

A restart on request (``POST /components/bridge/{name}/restart``) and a change of the
bridge (``PUT /bridges/{name}``, which a reload does the same way) stop the running
bridge and start a new one on the same queue. Every message a local publisher saw
acknowledged meanwhile must reach the remote, whether the remote is up or down.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.models.security import AclConfig, AclRule
from tests.helpers.gateway import running_gateway
from tests.integration.bridge.support import (
    Collector,
    Remote,
    StreamPublisher,
    first_occurrences,
    wait_until,
)
from tests.integration.components.support import API, http_of

BRIDGE = {
    "name": "cloud",
    "reconnect_backoff": "100ms",
    "reconnect_backoff_max": "500ms",
    "forwards": [{"local": "gap/#", "qos": 1}],
}


def _config(remote: Remote) -> str:
    return f"""{API}
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    reconnect_backoff: 100ms
    reconnect_backoff_max: 500ms
    forwards:
      - {{local: "gap/#", qos: 1}}
"""


@pytest.mark.parametrize(
    ("how", "remote_up"),
    [("restart", True), ("restart", False), ("update", True), ("update", False)],
)
def test_no_acknowledged_message_is_lost_across_restarts(
    tmp_path: Path, how: str, remote_up: bool
) -> None:
    with Remote(tmp_path / "remote") as remote, running_gateway(tmp_path, _config(remote)) as gw:
        http = http_of(gw)
        wait_until(
            lambda: http.get("/api/v1/bridges/cloud").json()["state"], lambda s: s == "running"
        )
        cloud = Collector(remote.port, "gap/#", "cloud-sub")
        try:
            if not remote_up:
                cloud.close()
                remote.stop()
            publisher = StreamPublisher(gw.port, "gap/x", 6000, rate=1500)
            publisher.start()
            for after, backoff in ((1000, "200ms"), (2500, "300ms"), (4000, "400ms")):
                # three restarts mid-stream
                wait_until(lambda: len(publisher.acked), lambda n, a=after: n >= a)
                if how == "restart":
                    reply = http.post("/api/v1/components/bridge/cloud/restart")
                else:
                    body = {**BRIDGE, "server": f"127.0.0.1:{remote.port}"}
                    reply = http.request(
                        "PUT", "/api/v1/bridges/cloud", {**body, "reconnect_backoff": backoff}
                    )
                assert reply.status == 200, reply.text
            acked = publisher.done(60)
            assert len(acked) == 6000
            if not remote_up:
                remote.start()
                cloud = Collector(remote.port, "gap/#", "cloud-sub")
            missing = wait_until(
                lambda: sorted(set(acked) - {int(p) for p in cloud.payloads()}),
                lambda left: not left,
                30,
            )
            assert not missing
            # In order: what a restart sent again (DUP) comes back only as a repeat.
            arrived = first_occurrences([int(p) for p in cloud.payloads()])
            assert arrived == sorted(arrived)
            stats = http.get("/api/v1/bridges/cloud").json()["stats"]
            assert stats["dropped"] == 0
        finally:
            cloud.close()


def test_a_restart_that_fails_to_tap_closes_what_the_last_run_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The ACL came to deny the bridge its forwards: the restarted run cannot tap, so
    the tap and queue kept for it are closed (nothing taps into a closed queue)."""
    with Remote(tmp_path / "remote") as remote, running_gateway(tmp_path, _config(remote)) as gw:
        http = http_of(gw)
        wait_until(
            lambda: http.get("/api/v1/bridges/cloud").json()["state"], lambda s: s == "running"
        )
        deny = AclConfig(rules=(AclRule(permission="deny", action="subscribe", topics=("gap/#",)),))
        gw.call(lambda: gw.gateway.security.reload(deny))
        assert http.post("/api/v1/components/bridge/cloud/restart").status == 200
        status = wait_until(
            lambda: http.get("/api/v1/bridges/cloud").json(),
            lambda s: s["state"] == "backing_off",
        )
        assert "the ACL denies" in status["last_error"]
        publisher = StreamPublisher(gw.port, "gap/x", 50)
        assert publisher.done_after_start() == list(range(1, 51))
        assert gw.call(lambda: dict(gw.gateway.broker.acks.participants)) == {}
        assert not [r for r in caplog.records if "tap of bridge:cloud failed" in r.getMessage()]
