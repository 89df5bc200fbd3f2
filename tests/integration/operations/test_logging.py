"""`logging.format: json` gives one JSON object per line, with the client id of lines
about a client; `logging.file` writes a file rotated at `max_size`, keeping `backups`."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

from tests.helpers import mqtt_builder as mb
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.interop.mosquitto.tools import LOOPBACK, EdgebusProcess

KEYS = {"time", "level", "logger", "message"}


def connect_and_leave(port: int, client_id: str) -> None:
    client = RawClient(LOOPBACK, port)
    client.do_connect(client_id)
    client.send(mb.gen_disconnect())
    client.close()


def json_lines(*paths: Path) -> list[dict[str, Any]]:
    """Every line of the files, each parsed as one JSON object."""
    entries = []
    for path in paths:
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            assert isinstance(entry, dict)
            assert set(entry) >= KEYS
            entries.append(entry)
    return entries


def wait_for_line(path: Path, text: str) -> None:
    deadline = time.monotonic() + unit(10)
    while text not in path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"{text!r} never logged in {path}"
        time.sleep(0.05)


def test_json_lines_on_standard_error_with_the_client_id(tmp_path: Path) -> None:
    with EdgebusProcess(tmp_path, "logging:\n  format: json\napi:\n  enabled: false\n") as gw:
        connect_and_leave(gw.port, "json-client")
        wait_for_line(gw.stderr_path, "json-client disconnected")
        assert gw.signal_and_wait(signal.SIGTERM) == 0
    entries = json_lines(gw.stderr_path)
    about_client = [e for e in entries if e.get("client_id") == "json-client"]
    assert [e["message"].split(" from ")[0] for e in about_client] == [
        "client json-client connected",
        "client json-client disconnected (reason 0x00)",
    ]
    assert [(e["level"], e["logger"]) for e in about_client] == [
        ("INFO", "broker_core.connect"),
        ("INFO", "broker_core.sessions"),
    ]
    assert all(e["time"].endswith("Z") for e in entries)
    assert entries[-1]["message"] == "edgebus stopped"


def test_a_log_file_rotated_at_max_size(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "edgebus.log"
    log.parent.mkdir()
    config = (
        "api:\n  enabled: false\n"
        f"logging:\n  format: json\n  file: {log}\n  max_size: 2KB\n  backups: 2\n"
    )
    with EdgebusProcess(tmp_path, config) as gw:
        for number in range(30):  # two lines of ~250 bytes each
            connect_and_leave(gw.port, f"rotating-{number}")
        wait_for_line(log, "rotating-29 disconnected")
        assert gw.signal_and_wait(signal.SIGTERM) == 0
    assert sorted(path.name for path in log.parent.iterdir()) == [
        "edgebus.log",
        "edgebus.log.1",
        "edgebus.log.2",
    ]
    for path in log.parent.iterdir():
        assert path.stat().st_size <= 2000
    assert json_lines(log.with_suffix(".log.2"), log.with_suffix(".log.1"), log)
    assert gw.stderr_path.read_text() == ""  # everything went to the file


def test_a_logging_change_on_sighup_waits_for_the_restart(tmp_path: Path) -> None:
    """The CLI installs the handler at the start: SIGHUP says so instead of pretending."""
    with EdgebusProcess(tmp_path, "api:\n  enabled: false\n") as gw:
        gw.config.write_text(gw.config.read_text() + "logging:\n  format: json\n")
        assert gw.process is not None
        gw.process.send_signal(signal.SIGHUP)
        wait_for_line(gw.stderr_path, "configuration reloaded")
        log = gw.stderr_path.read_text()
        assert "reload: the change to 'logging' takes effect at the next restart" in log
        assert not any(line.startswith("{") for line in log.splitlines())
        assert gw.signal_and_wait(signal.SIGTERM) == 0
