"""``POST /reload`` while ``edgebus run`` shuts down (after SIGTERM) answers 503 and
changes nothing, with one INFO line and no traceback; the process still ends with
status 0.

The HTTP API serves until the components have stopped; an adapter whose ``stop()`` never
returns (``test-slowstop``, tests/integration/api/slow_stop_gateway.py) holds the shutdown
for the supervisor's stop timeout (5 s), so the request lands in that window every time.
A bridge added to the file meanwhile is what a reload would start. Before, the reload ran
during the shutdown: 500 Internal Server Error, and ``RuntimeError: the gateway is
stopping`` with its traceback in the log.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from tests.helpers.brokers import start_edgebus
from tests.helpers.timeouts import unit
from tests.integration.broker.support import wait_until
from tests.interop.mosquitto.tools import LOOPBACK, free_port

KEY = "reload-during-shutdown-test-key-0123456789"


def _post_reload(api: str) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://{api}/api/v1/reload", method="POST", headers={"X-API-Key": KEY}
    )
    try:
        with urllib.request.urlopen(request, timeout=unit(10)) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_reload_through_the_api_during_the_shutdown_answers_503(tmp_path: Path) -> None:
    extra = (
        "adapters:\n  - {type: test-slowstop, name: mule}\n"
        f"api: {{bind: '{LOOPBACK}:0', keys: ['{KEY}']}}\n"
        "logging: {level: info}\n"
    )
    with start_edgebus(tmp_path, extra, main="tests.integration.api.slow_stop_gateway") as gw:
        found = wait_until(
            lambda: re.search(
                r"HTTP API listening on http://([\d.]+:\d+)/", gw.stderr_path.read_text()
            ),
            unit(10),
            "the API's address in the log",
        )
        assert found is not None
        api = found.group(1)
        config = tmp_path / "cfg.yaml"
        config.write_text(
            config.read_text()
            + "bridges:\n"
            + f"  - {{name: late, server: '{LOOPBACK}:{free_port()}',"
            + " forwards: [{local: 'a/x', remote: 'b/x', qos: 1}]}\n"
        )
        gw.process.send_signal(signal.SIGTERM)
        wait_until(
            lambda: "slowstop: stop called" in gw.stderr_path.read_text(),
            unit(10),
            "the shutdown reaching the slow adapter",
        )
        code, body = _post_reload(api)
        try:
            status = gw.process.wait(unit(20))
        except subprocess.TimeoutExpired:
            raise AssertionError("still running after SIGTERM") from None
        log = gw.stderr_path.read_text()
        assert code == 503, (body, log[-3000:])
        assert json.loads(body) == {"detail": "the gateway is stopping: not reloaded"}
        assert status == 0, log[-3000:]
        assert "Traceback" not in log
        assert "bridge late" not in log
        ignored = [line for line in log.splitlines() if "ignored: the gateway is stopping" in line]
        assert len(ignored) == 1, log[-3000:]
        assert " INFO " in f" {ignored[0]} "
