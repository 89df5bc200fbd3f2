"""A reload of an empty configuration file (an editor that truncates, then writes; a
failed copy) is refused and changes nothing, for SIGHUP and POST /api/v1/reload alike:
no YAML document, only comments, or a null document. Before, it was read as the
embedded defaults: every rule and component removed (HTTP 200) and the ACL opened
(``acl.default`` is ``allow`` by default) while authentication stayed as it was.

A start on an empty file serves the embedded defaults, as before; ``edgebus check``
warns. A reload that turns ``acl.default`` from ``deny`` into ``allow`` (the file lost
its ``acl`` section) is applied, with a WARNING naming the change.
"""

from __future__ import annotations

import json
import signal
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest

from tests.helpers.json_log import logged, wait_logged
from tests.helpers.timeouts import unit
from tests.interop.mosquitto.tools import LOOPBACK, EdgebusProcess, free_port, run_edgebus

ACL = """\
acl:
  default: deny
  rules:
    - {permission: allow, topics: ["ok/#"], action: all}
"""
RULE = """\
rules:
  - name: r1
    sql: 'SELECT payload FROM "ok/#"'
    actions: [{type: republish, topic: "ok/copy/x"}]
"""


class _Api:
    def __init__(self, port: int, data_dir: Path) -> None:
        self.base = f"http://{LOOPBACK}:{port}/api/v1"
        self.data_dir = data_dir

    def call(self, method: str, path: str) -> tuple[int, Any]:
        key = (self.data_dir / "api-key").read_text().strip()
        request = urllib.request.Request(
            self.base + path, method=method, headers={"Authorization": f"Bearer {key}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=unit(10)) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


def _granted(port: int, topic: str) -> bool:
    """Whether a fresh client's SUBSCRIBE to ``topic`` is granted."""
    codes: list[Any] = []
    done = threading.Event()

    def on_subscribe(_c: Any, _u: Any, _mid: Any, reason_codes: Any, _p: Any) -> None:
        codes.extend(reason_codes)
        done.set()

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="probe", protocol=mqtt.MQTTv5)
    client.on_subscribe = on_subscribe
    client.connect(LOOPBACK, port)
    client.loop_start()
    try:
        client.subscribe(topic, 1)
        assert done.wait(unit(10)), "no SUBACK"
    finally:
        client.disconnect()
        client.loop_stop()
    [code] = codes
    return not code.is_failure


def _rules(api: _Api) -> list[str]:
    status, rules = api.call("GET", "/rules")
    assert status == 200
    return [rule["name"] for rule in rules]


@pytest.mark.parametrize(
    "empty",
    ["", "# truncated\n\n", "null\n", "---\n~\n"],
    ids=["nothing", "comments", "null", "tilde"],
)
def test_a_reload_of_an_empty_file_is_refused_and_changes_nothing(
    tmp_path: Path, empty: str
) -> None:
    log = tmp_path / "gw.log"
    api_port = free_port()
    extra = f"api: {{bind: '{LOOPBACK}:{api_port}'}}\nlogging: {{format: json, file: {log}}}\n"
    with EdgebusProcess(tmp_path, extra + ACL + RULE) as gw:
        assert gw.process is not None
        api = _Api(api_port, tmp_path / "edgebus-data")
        wait_logged(log, "HTTP API listening")
        assert _rules(api) == ["r1"]
        assert not _granted(gw.port, "secret/x")
        gw.config.write_text(empty)

        gw.process.send_signal(signal.SIGHUP)
        [entry] = wait_logged(log, "reload refused")
        problem = (
            f"{gw.config} is empty (no YAML document, only comments or null): not reloaded,"
            " nothing changed (to run on the embedded defaults, restart with it)"
        )
        assert (entry["level"], entry["message"]) == ("ERROR", f"reload refused: {problem}")

        status, answer = api.call("POST", "/reload")
        assert status == 400
        assert answer["detail"]["problems"] == [problem]

        assert _rules(api) == ["r1"]
        assert not _granted(gw.port, "secret/x")
        assert _granted(gw.port, "ok/x")
        assert not logged(log, "configuration reloaded")
        assert gw.signal_and_wait(signal.SIGTERM) == 0


def test_a_reload_that_drops_the_acl_section_warns_that_the_acl_opens(tmp_path: Path) -> None:
    log = tmp_path / "gw.log"
    extra = f"api: {{enabled: false}}\nlogging: {{format: json, file: {log}}}\n"
    with EdgebusProcess(tmp_path, extra + ACL) as gw:
        assert gw.process is not None
        assert not _granted(gw.port, "secret/x")
        gw.config.write_text(gw.config.read_text().replace(ACL, ""))
        gw.process.send_signal(signal.SIGHUP)
        wait_logged(log, "configuration reloaded")
        [warning] = wait_logged(log, "acl.default changes")
        assert (warning["level"], warning["message"]) == (
            "WARNING",
            f"reload: acl.default changes deny -> allow ({gw.config} has no acl section):"
            " topics no rule names are open to every client",
        )
        assert _granted(gw.port, "secret/x")  # applied, as written
        assert gw.signal_and_wait(signal.SIGTERM) == 0


def test_check_warns_that_an_empty_file_is_the_defaults(tmp_path: Path) -> None:
    config = tmp_path / "empty.yaml"
    config.write_text("# nothing yet\n")
    checked = run_edgebus(tmp_path, "check", str(config))
    assert checked.returncode == 0
    assert checked.stderr.splitlines() == [
        f"{config}: warning: the file is empty: the embedded defaults apply"
        " (a reload of a running gateway refuses it)"
    ]
    assert checked.stdout == f"{config}: OK (1 warning(s))\n"
