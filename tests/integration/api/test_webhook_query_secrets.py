"""The secret query parameters of a webhook URL (``token``, ``X-Amz-Signature``...) are
masked wherever a running gateway shows the URL: ``GET /api/v1/metrics``, Prometheus'
``/metrics``, ``/config``, the rule views, the start-up log line and the warning of a
failed attempt (a redirect, not followed, names its ``Location``); while a real local
HTTP server receives the request at the URL as written."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gateway.api.masking import MASK
from tests.helpers.gateway import running_gateway
from tests.helpers.http_sink import HttpSink
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.broker.support import Clients, wait_until

QUERY = "kind=ops&token=t0k-S3CR3T&X-Amz-Signature=AMZSIGs3cr3t&X-Amz-Credential=AKIAs3cr3t%2B2026"
SHOWN_QUERY = f"kind=ops&token={MASK}&X-Amz-Signature={MASK}&X-Amz-Credential={MASK}"
LOOP_QUERY = "Access_Token=L00P%2Bs3cr3t&site=north"
SECRETS = ("t0k-S3CR3T", "AMZSIGs3cr3t", "AKIAs3cr3t", "L00P", "s3cr3t")


@contextmanager
def redirect_loop() -> Iterator[int]:
    """An HTTP server on 127.0.0.1:0 that answers every POST with a 307 to the same
    path and query: the webhook does not follow it, and its warning names the
    ``Location``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(307)
            self.send_header("Location", self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_secret_query_parameters_of_a_webhook_url_are_masked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.webhook")
    with HttpSink() as sink, redirect_loop() as loop_port:
        url = sink.url(f"/hook?{QUERY}")
        loop_url = f"http://127.0.0.1:{loop_port}/loop?{LOOP_QUERY}"
        config = f"""
webhooks:
  - name: ops
    url: "{url}"
    events: [client.connected]
  - name: loop
    url: "{loop_url}"
    events: [client.connected]
    retries: 0
rules:
  - name: alerts
    sql: 'SELECT * FROM "alerts/#"'
    actions: [{{type: webhook, webhook: ops}}]
"""
        with running_gateway(tmp_path, API_CONFIG + config) as gw:
            clients = Clients(gw)
            try:
                clients.connect(5, "c1")
                # the request reaches the endpoint with the query as written
                [request] = sink.wait_for(1)
                assert request.path == f"/hook?{QUERY}"

                def failure_lines() -> list[str]:
                    return [
                        r.getMessage()
                        for r in caplog.records
                        if r.getMessage().startswith("webhook loop: HTTP 307")
                    ]

                [failure] = wait_until(failure_lines, what="the failed attempt logged")
                http = http_of(gw)
                metrics = http.get("/api/v1/metrics")
                prometheus = http.get("/metrics")
                config_view = http.get("/api/v1/config")
                rules = http.get("/api/v1/rules")
                rule = http.get("/api/v1/rules/alerts")
            finally:
                clients.close_all()

    shown = {hook["name"]: hook["url"] for hook in metrics.json()["webhooks"]}
    assert shown == {
        "ops": f"http://127.0.0.1:{sink.port}/hook?{SHOWN_QUERY}",
        "loop": f"http://127.0.0.1:{loop_port}/loop?Access_Token={MASK}&site=north",
    }
    assert [h["url"] for h in config_view.json()["webhooks"]] == [shown["ops"], shown["loop"]]
    assert (prometheus.status, rules.status, rule.status) == (200, 200, 200)
    assert failure.endswith("(redirects are not followed), not retried")
    assert f"/loop?Access_Token={MASK}&site=north" in failure
    assert f"webhook ops: posting client.connected to {shown['ops']}" in [
        r.getMessage() for r in caplog.records
    ]
    for secret in SECRETS:
        for reply in (metrics, prometheus, config_view, rules, rule):
            assert secret not in reply.text
        assert [r.getMessage() for r in caplog.records if secret in r.getMessage()] == []
