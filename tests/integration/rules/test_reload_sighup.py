"""A ``SIGHUP`` reload of ``edgebus run``: a rule whose filters the reloaded ACL denies
stops (as the same file at start shows it in state ``error``), and the log line names
the sections that wait for a restart."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.helpers.json_log import wait_logged
from tests.interop.mosquitto.tools import EdgebusProcess

RULE = """\
rules:
  - name: spy
    sql: 'SELECT * FROM "secret/#"'
    actions: [{type: republish, topic: "leak/x"}]
"""
DENY = """\
acl:
  default: allow
  rules:
    - {permission: deny, clientid: "rule:spy", action: subscribe, topics: ["secret/#"]}
"""
WEBHOOK = "webhooks:\n  - {name: new, url: 'http://127.0.0.1:9/x'}\n"


def test_sighup_stops_a_rule_the_new_acl_denies_and_names_what_waits(tmp_path: Path) -> None:
    log = tmp_path / "gw.log"
    logging = f"api:\n  enabled: false\nlogging: {{format: json, file: {log}}}\n"
    with EdgebusProcess(tmp_path, logging + RULE) as gw:
        gw.config.write_text(gw.config.read_text() + DENY + WEBHOOK)
        assert gw.process is not None
        gw.process.send_signal(signal.SIGHUP)
        [entry] = wait_logged(log, "configuration reloaded")
        assert entry["message"] == (
            f"configuration reloaded from {gw.config}: acl, rule: stopped spy; waiting for a"
            " restart: webhooks"
        )
        [stopped] = wait_logged(log, "rule spy stopped")
        assert (stopped["level"], stopped["message"]) == (
            "ERROR",
            "rule spy stopped: rule 'spy': the ACL denies subscribing to 'secret/#'",
        )
        assert gw.signal_and_wait(signal.SIGTERM) == 0
    assert gw.stderr_path.read_text() == ""
