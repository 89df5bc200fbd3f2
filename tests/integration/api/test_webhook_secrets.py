"""A webhook URL's user info is masked wherever the gateway shows the URL: ``/config``,
``/api/v1/metrics`` and the log line of its start."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.api.conftest import API_CONFIG, http_of

URL = "http://hookuser:hookpass@127.0.0.1:9/x?kind=ops"
SHOWN = "http://**********@127.0.0.1:9/x?kind=ops"
WEBHOOK = f"""
webhooks:
  - name: ops
    url: "{URL}"
"""


def test_the_user_info_of_a_webhook_url_is_masked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.webhook")
    with running_gateway(tmp_path, API_CONFIG + WEBHOOK) as gw:
        http = http_of(gw)
        metrics = http.get("/api/v1/metrics")
        assert metrics.status == 200
        [hook] = metrics.json()["webhooks"]
        assert (hook["name"], hook["url"]) == ("ops", SHOWN)
        assert "hookpass" not in metrics.text
        config = http.get("/api/v1/config")
        assert config.json()["webhooks"][0]["url"] == SHOWN
        assert "hookpass" not in config.text
        deadline = time.monotonic() + unit(10)
        while not [r for r in caplog.records if r.name == "gateway.webhook"]:
            assert time.monotonic() < deadline, "the webhook's start was not logged"
            time.sleep(0.02)
    started = [r.getMessage() for r in caplog.records if r.name == "gateway.webhook"]
    assert f"webhook ops: posting rule results to {SHOWN}" in started
    assert not [r for r in caplog.records if "hookpass" in r.getMessage()]
