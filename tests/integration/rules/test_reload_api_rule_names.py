"""A reload keeps the rules created through the API (docs/api.md), also when the file
has a rule of the same name: written otherwise, the reload is refused naming the
conflict (SIGHUP and POST /api/v1/reload), nothing changed; written as the API's rule
runs (an operator keeping it across restarts), the file takes it over: it runs on with
its counters, source ``config``. Before, the file's rule replaced the API's silently
(``rule: updated api1``, its counters reset).
"""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.helpers.json_log import wait_logged
from tests.helpers.timeouts import unit
from tests.interop.mosquitto.tools import LOOPBACK, EdgebusProcess, free_port, mosquitto_pub

API_RULE = {
    "name": "api1",
    "sql": 'SELECT payload FROM "c/#"',
    "actions": [{"type": "republish", "topic": "copy/c"}],
}
OTHER = """\
rules:
  - name: api1
    sql: 'SELECT payload FROM "zz/#"'
    actions: [{type: republish, topic: "copy/zz"}]
"""
SAME = """\
rules:
  - name: api1
    sql: 'SELECT payload FROM "c/#"'
    actions: [{type: republish, topic: "copy/c"}]
"""


class _Api:
    def __init__(self, port: int, data_dir: Path) -> None:
        self.base = f"http://{LOOPBACK}:{port}/api/v1"
        self.data_dir = data_dir

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        key = (self.data_dir / "api-key").read_text().strip()
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=unit(10)) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


def _rules(api: _Api) -> dict[str, dict[str, Any]]:
    status, rules = api.call("GET", "/rules")
    assert status == 200
    return {rule["name"]: rule["details"] for rule in rules}


def _wait_matched(api: _Api, count: int) -> None:
    deadline = time.monotonic() + unit(10)
    while _rules(api)["api1"]["matched"] < count:
        assert time.monotonic() < deadline, _rules(api)
        time.sleep(0.05)


def test_a_file_rule_named_as_an_api_rule_is_refused_or_takes_it_over(tmp_path: Path) -> None:
    log = tmp_path / "gw.log"
    api_port = free_port()
    extra = f"api: {{bind: '{LOOPBACK}:{api_port}'}}\nlogging: {{format: json, file: {log}}}\n"
    with EdgebusProcess(tmp_path, extra) as gw:
        assert gw.process is not None
        api = _Api(api_port, tmp_path / "edgebus-data")
        wait_logged(log, "HTTP API listening")
        status, _ = api.call("POST", "/rules", API_RULE)
        assert status == 201
        mosquitto_pub(LOOPBACK, gw.port, "-t", "c/1", "-m", "x", "-q", "1")
        _wait_matched(api, 1)
        text = gw.config.read_text()

        gw.config.write_text(text + OTHER)
        line = (text + OTHER).splitlines().index("  - name: api1") + 1
        problem = (
            f"{gw.config}:{line} rules[0].name: rule 'api1' was created through the API and"
            " runs with another configuration; a reload keeps the API's rules: delete that"
            " rule first (DELETE /api/v1/rules/api1), or write it in the file as it runs,"
            " or rename this one"
        )
        status, answer = api.call("POST", "/reload")
        assert (status, answer["detail"]["problems"]) == (400, [problem])
        gw.process.send_signal(signal.SIGHUP)
        assert [e["message"] for e in wait_logged(log, "reload refused", 2)] == [
            f"reload refused: {problem}"
        ] * 2
        shown = _rules(api)["api1"]
        assert (shown["source"], shown["sql"], shown["matched"]) == (
            "api",
            API_RULE["sql"],
            1,
        )

        gw.config.write_text(text + SAME)
        status, answer = api.call("POST", "/reload")
        assert (status, answer["reloaded"]) == (200, ["rule: api1 now configured"])
        shown = _rules(api)["api1"]
        assert (shown["source"], shown["matched"]) == ("config", 1)  # ran on, counters kept
        mosquitto_pub(LOOPBACK, gw.port, "-t", "c/1", "-m", "y", "-q", "1")
        _wait_matched(api, 2)

        gw.config.write_text(text)  # now a rule of the file: a reload removes it
        status, answer = api.call("POST", "/reload")
        assert (status, answer["reloaded"]) == (200, ["rule: removed api1"])
        assert gw.signal_and_wait(signal.SIGTERM) == 0
