"""Events a webhook still holds when the gateway stops (queued, or being posted to an
endpoint that does not answer) are counted as dropped, with one log line saying how
many: ``edgebus run`` stopped by SIGTERM."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

from tests.helpers.json_log import wait_logged
from tests.integration.broker.support import PahoClient
from tests.interop.mosquitto.tools import EdgebusProcess


def test_events_left_at_shutdown_are_logged_and_counted(tmp_path: Path) -> None:
    with socket.socket() as hole:  # accepts connections (the backlog) and never answers
        hole.bind(("127.0.0.1", 0))
        hole.listen(16)
        port = hole.getsockname()[1]
        log = tmp_path / "gw.log"
        config = f"""\
api: {{enabled: false}}
logging: {{format: json, file: {log}}}
webhooks:
  - name: hole
    url: "http://127.0.0.1:{port}/events"
    events: [message.publish]
    timeout: 60s
    retries: 0
    pool_size: 1
"""
        with EdgebusProcess(tmp_path, config) as gw:
            client = PahoClient("127.0.0.1", gw.port, 5, "pub")
            try:
                client.connect()
                for i in range(10):
                    client.publish(f"t/{i}", b"x", qos=1)  # PUBACK: the event is queued
            finally:
                client.close()
            assert gw.signal_and_wait(signal.SIGTERM) == 0
        [entry] = wait_logged(log, "not posted at shutdown")
        assert (entry["level"], entry["message"]) == (
            "WARNING",
            "webhook hole: 10 event(s) not posted at shutdown, counted as dropped"
            " (10 dropped in all)",
        )
