"""A reload that SIGHUP refuses is logged through the configured logging (an ERROR
record; JSON in the log file with `format: json`), and SIGHUP refuses what
`edgebus check` refuses (a broken password file) and a rule naming a webhook the
running gateway does not have."""

from __future__ import annotations

import signal
from pathlib import Path

from broker_core.passwords import MIN_ITERATIONS, hash_password, write_password_file
from tests.helpers.json_log import logged, wait_logged
from tests.interop.mosquitto.tools import EdgebusProcess


def _hup(gw: EdgebusProcess) -> None:
    assert gw.process is not None
    gw.process.send_signal(signal.SIGHUP)


def _json_log(tmp_path: Path) -> tuple[Path, str]:
    log = tmp_path / "gw.log"
    return log, f"api:\n  enabled: false\nlogging: {{format: json, file: {log}}}\n"


def test_a_refused_sighup_reload_goes_to_the_json_log_file(tmp_path: Path) -> None:
    log, logging = _json_log(tmp_path)
    with EdgebusProcess(tmp_path, logging + "acl: {default: allow}\n") as gw:
        gw.config.write_text(gw.config.read_text().replace("default: allow", "default: maybe"))
        _hup(gw)
        [entry] = wait_logged(log, "reload refused")
        line = gw.config.read_text().splitlines().index("acl: {default: maybe}") + 1
        assert (entry["level"], entry["logger"], entry["message"]) == (
            "ERROR",
            "gateway.app",
            f"reload refused: {gw.config}:{line} acl.default:"
            " expected one of allow, deny, got 'maybe'",
        )
        assert gw.process is not None and gw.process.poll() is None
        assert gw.signal_and_wait(signal.SIGTERM) == 0
    assert gw.stderr_path.read_text() == ""  # everything went to the file


def test_sighup_refuses_a_broken_password_file(tmp_path: Path) -> None:
    users = tmp_path / "passwd"
    write_password_file(users, {"alice": hash_password("pw", MIN_ITERATIONS)})
    log, logging = _json_log(tmp_path)
    with EdgebusProcess(tmp_path, logging + f"auth: {{password_file: {users}}}\n") as gw:
        text = gw.config.read_text()
        missing = tmp_path / "missing.txt"
        gw.config.write_text(text.replace(str(users), str(missing)))
        _hup(gw)
        [entry] = wait_logged(log, "reload refused")
        assert entry["level"] == "ERROR"
        assert "auth.password_file" in entry["message"]
        assert f"{missing}: cannot read the password file" in entry["message"]

        bad = tmp_path / "bad.txt"
        bad.write_text("alice:not-a-hash\n")
        gw.config.write_text(text.replace(str(users), str(bad)))
        _hup(gw)
        entry = wait_logged(log, "reload refused", 2)[1]
        assert f"auth.password_file: {bad}:1: " in entry["message"]
        assert not logged(log, "configuration reloaded")
        assert gw.signal_and_wait(signal.SIGTERM) == 0


def test_sighup_refuses_a_rule_naming_a_webhook_that_is_not_running(tmp_path: Path) -> None:
    log, logging = _json_log(tmp_path)
    with EdgebusProcess(tmp_path, logging) as gw:
        gw.config.write_text(
            gw.config.read_text()
            + "webhooks:\n  - {name: w, url: 'http://127.0.0.1:9/x'}\n"
            + 'rules:\n  - name: r2\n    sql: SELECT 1 AS one FROM "a/#"\n'
            + "    actions: [{type: webhook, webhook: w}]\n"
        )
        _hup(gw)
        [entry] = wait_logged(log, "reload refused")
        action = "    actions: [{type: webhook, webhook: w}]"
        line = gw.config.read_text().splitlines().index(action)
        assert entry["message"] == (
            f"reload refused: {gw.config}:{line + 1} rules[0].actions[0].webhook: no webhook"
            " named 'w' in this running gateway (the webhooks section takes effect at the"
            " next restart)"
        )
        assert not logged(log, "rule r2")
        assert gw.signal_and_wait(signal.SIGTERM) == 0
