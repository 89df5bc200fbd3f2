"""``/config``, ``/reload``, ``/adapters``, ``/bridges`` and ``/rules``."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.api.support import KEY, PASSWORD, Http
from tests.integration.broker.support import Clients

SECRET_HEADERS = """
auth:
  http:
    url: "https://user:pw@auth.example.com/check"
    headers:
      Authorization: "Bearer very-secret-token"
"""


def test_config_is_the_effective_one_with_secrets_masked(tmp_path: Path) -> None:
    with running_gateway(tmp_path, API_CONFIG + SECRET_HEADERS) as gw:
        reply = http_of(gw).get("/api/v1/config")
        assert reply.status == 200
        for secret in (KEY, PASSWORD, "very-secret-token", "user:pw"):
            assert secret not in reply.text
        config = reply.json()
        assert config["api"]["keys"] == ["**********"]
        assert config["api"]["users"] == [{"username": "operator", "password": "**********"}]
        assert config["auth"]["http"]["headers"] == {"Authorization": "**********"}
        assert config["auth"]["http"]["url"] == "https://**********@auth.example.com/check"
        assert config["persistence"] == "memory"
        assert config["mqtt"]["max_packet_size"] == "1MB"
        assert config["listeners"][0]["bind"] == "127.0.0.1:0"


def _config_file(tmp_path: Path, gw: RunningGateway, acl: str) -> Path:
    """The running configuration as a file, with another ``acl:`` section."""
    data = yaml.safe_load(API_CONFIG)
    data.update(
        {
            "listeners": [{"type": "tcp", "bind": "127.0.0.1:0"}],
            "data_dir": str(gw.gateway.config.data_dir),
            "persistence": "memory",
            "sys": {"interval": 0},
        }
    )
    data["api"]["bind"] = "127.0.0.1:0"
    data["acl"] = yaml.safe_load(acl)
    path = tmp_path / "edgebus.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_reload_reads_the_acl_again(
    tmp_path: Path, gw: RunningGateway, http: Http, clients: Clients
) -> None:
    path = _config_file(tmp_path, gw, "{default: deny, rules: []}")
    gw.call(lambda: setattr(gw.gateway, "config_path", path))
    pub = clients.paho(5, "pub")
    pub.connect()
    assert pub.publish("x/1", b"1", qos=1) == 0x10  # allowed: no matching subscribers
    reply = http.post("/api/v1/reload")
    assert reply.status == 200
    assert "acl" in reply.json()["reloaded"]
    assert pub.publish("x/2", b"2", qos=1) == 0x87  # not authorized now
    assert http.get("/api/v1/config").json()["acl"]["default"] == "deny"
    assert clients.paho(5, "still-welcome").connect().reason_code == 0


def test_a_broken_file_is_refused_and_changes_nothing(
    tmp_path: Path, gw: RunningGateway, http: Http
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("acl:\n  default: maybe\n")
    gw.call(lambda: setattr(gw.gateway, "config_path", path))
    reply = http.post("/api/v1/reload")
    assert reply.status == 400
    detail = reply.json()["detail"]
    assert detail["message"] == "the configuration was not reloaded"
    assert detail["problems"] == [f"{path}:2 acl.default: expected one of allow, deny, got 'maybe'"]
    assert http.get("/api/v1/config").json()["acl"]["default"] == "allow"


def test_bridges_and_rules_are_empty_lists_today(http: Http) -> None:
    assert http.get("/api/v1/bridges").json() == []
    assert http.get("/api/v1/rules").json() == []


LOOPBACK = """
adapters:
  - type: loopback
    name: echo
    mappings:
      - source: in/{x}
        target: out/{x}
"""


def test_adapters_status_and_restart(tmp_path: Path) -> None:
    with running_gateway(tmp_path, API_CONFIG + LOOPBACK) as gw:
        http = http_of(gw)
        deadline = time.monotonic() + unit(5)
        while http.get("/api/v1/adapters/echo").json()["state"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        [echo] = http.get("/api/v1/adapters").json()
        assert (echo["name"], echo["type"], echo["last_error"], echo["restarts"]) == (
            "echo",
            "loopback",
            None,
            0,
        )
        assert "error" not in echo  # docs/adapters.md and docs/api.md call it last_error
        assert "last_error" not in echo["details"]
        assert echo["details"]["stats"]["published"] == 0
        reply = http.post("/api/v1/adapters/echo/restart")
        assert reply.status == 200
        assert reply.json()["name"] == "echo"
        assert http.post("/api/v1/adapters/ghost/restart").status == 404
        assert http.get("/api/v1/adapters/ghost").json() == {"detail": "no adapter 'ghost'"}
        http.post("/api/v1/publish", {"topic": "in/a", "payload": "1", "qos": 1})
        deadline = time.monotonic() + unit(5)
        while http.get("/api/v1/adapters/echo").json()["details"]["stats"]["published"] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        metrics = http.get("/metrics").text
        assert 'edgebus_adapter_up{adapter="echo",state="running",type="loopback"} 1.0' in metrics
        assert 'edgebus_adapter_messages_published_total{adapter="echo"} 1.0' in metrics
        received = http.get("/api/v1/metrics").json()["messages"]["received"]
        assert received == {"mqtt": 0, "api": 1, "loopback": 1}
