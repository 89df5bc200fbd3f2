"""What a running `edgebus run` with `make run`'s defaults (MQTT, WebSocket, HTTP API)
has loaded, read from the process's memory map (issue 17, docs/performance.md "Start-up
memory"): not the configuration schema (pydantic validates in a child process and the
gateway holds light views of its result), not YAML, not the IDNA codec's Unicode tables
(the listeners resolve an ASCII host as bytes), not websockets until the WebSocket
listener's first connection. The configuration still works as configured: WebSocket
and TCP clients exchange messages, and a SIGHUP reload compares the views with the
models it loads without reporting unchanged sections as changed, and the API's
``/config`` shows the views as it shows the models."""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.request
from pathlib import Path

from gateway.api.routes.admin import masked_config
from gateway.config import load_config
from tests.helpers.timeouts import unit
from tests.integration.listeners.support import ListenerClient
from tests.interop.mosquitto.tools import LOOPBACK, EdgebusProcess, free_port

# Extension modules mapped into the process once their package is imported.
SCHEMA = "pydantic_core/_pydantic_core"
YAML = "yaml/_yaml"
WEBSOCKETS = "websockets/speedups"
# The Unicode tables of the IDNA codec, which resolving a str host would load.
UNICODE_TABLES = "lib-dynload/unicodedata"
# OpenSSL's digests (hashlib, hmac), which the API's first request loads, and the random
# module, which a component's first failure loads.
DIGESTS = "lib-dynload/_hashlib"
RANDOM = "lib-dynload/_random"


def _mapped(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def _wait_until_mapped(pid: int, library: str) -> None:
    deadline = time.monotonic() + unit(15)
    while library not in _mapped(pid):
        assert time.monotonic() < deadline, f"{library} not loaded"
        time.sleep(0.05)


def _wait_for_log(edgebus: EdgebusProcess, text: str) -> str:
    deadline = time.monotonic() + unit(15)
    while text not in (log := edgebus.stderr_path.read_text(errors="replace")):
        assert time.monotonic() < deadline, f"no {text!r} in:\n{edgebus.log_tail()}"
        time.sleep(0.05)
    return log


def test_the_defaults_load_no_schema_no_yaml_and_websockets_on_first_use(
    tmp_path: Path,
) -> None:
    edgebus = EdgebusProcess(tmp_path)
    ws_port = free_port()
    edgebus.config.write_text(
        "listeners:\n"
        f"  - {{type: tcp, bind: '{LOOPBACK}:{edgebus.port}'}}\n"
        f"  - {{type: ws, bind: '{LOOPBACK}:{ws_port}'}}\n"
        f"data_dir: {tmp_path / 'edgebus-data'}\n"
        f"api:\n  bind: {LOOPBACK}:0\n"
    )
    with edgebus:
        assert edgebus.process is not None
        pid = edgebus.process.pid
        loaded = _mapped(pid)
        assert SCHEMA not in loaded
        assert YAML not in loaded
        assert WEBSOCKETS not in loaded
        assert UNICODE_TABLES not in loaded
        assert DIGESTS not in loaded
        assert RANDOM not in loaded

        ws = ListenerClient(LOOPBACK, ws_port, 4, "over-ws", transport="websockets")
        tcp = ListenerClient(LOOPBACK, edgebus.port, 4, "over-tcp")
        try:
            ws.connect()
            tcp.connect()
            assert ws.subscribe("mem/t", 1) == [1]
            tcp.publish("mem/t", b"to the websocket", qos=1)
            assert ws.expect_message().payload == b"to the websocket"
        finally:
            ws.close()
            tcp.close()
        _wait_until_mapped(pid, WEBSOCKETS)

        listening = _wait_for_log(edgebus, "HTTP API listening")
        port = re.search(r"HTTP API listening on http://[^:]+:(\d+)/", listening)
        assert port is not None
        key = (tmp_path / "edgebus-data" / "api-key").read_text().strip()
        request = urllib.request.Request(
            f"http://{LOOPBACK}:{port[1]}/api/v1/config", headers={"Authorization": f"Bearer {key}"}
        )
        with urllib.request.urlopen(request, timeout=unit(15)) as response:
            shown = json.loads(response.read())
        assert shown == masked_config(load_config(edgebus.config))
        assert DIGESTS in _mapped(pid)  # loaded by the API and its first request

        edgebus.process.send_signal(signal.SIGHUP)
        log = _wait_for_log(edgebus, "configuration reloaded")
        assert "takes effect at the next restart" not in log
        assert edgebus.signal_and_wait(signal.SIGTERM) == 0
