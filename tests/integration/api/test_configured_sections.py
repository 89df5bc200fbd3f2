"""Bridges, the stream log, rules and webhooks run; the API lists bridges and rules."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.helpers.gateway import running_gateway
from tests.integration.api.conftest import API_CONFIG, http_of

SECTIONS = (
    API_CONFIG
    + """
bridges:
  - name: cloud
    server: "127.0.0.1:1"
    password: "s3cret-value"
    forwards:
      - {local: "site/{device}/{rest#}", remote: "plants/{device}/{rest}"}
rules:
  - name: hot
    sql: 'SELECT payload.t FROM "sensors/#" WHERE payload.t > 30'
    actions: [{type: webhook, webhook: ops}]
webhooks:
  - {name: ops, url: "http://127.0.0.1:1/hook", events: [client.connected]}
stream:
  enabled: true
"""
)


def test_bridges_and_rules_run_and_are_listed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="gateway.app"),
        running_gateway(tmp_path, SECTIONS) as gw,
    ):
        http = http_of(gw)
        bridges = http.get("/api/v1/bridges").json()
        rules = http.get("/api/v1/rules").json()
        config = http.get("/api/v1/config").json()
    # Bridges run (docs/bridges.md): this one cannot reach its remote and says so.
    assert [(b["name"], b["type"]) for b in bridges] == [("cloud", "mqtt")]
    assert bridges[0]["state"] in ("starting", "degraded")
    assert bridges[0]["details"]["kind"] == "bridge"
    assert [(r["name"], r["state"]) for r in rules] == [("hot", "running")]
    assert "s3cret-value" not in str(config)
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "configured" not in warned  # bridges, the stream log, rules, webhooks run
