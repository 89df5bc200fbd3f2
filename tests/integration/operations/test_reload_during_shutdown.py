"""A SIGHUP that arrives while ``edgebus run`` shuts down (after SIGTERM) is ignored with
one INFO line, ``reload ignored: the gateway is stopping``, and the process still ends
with status 0. Before, such a reload ran during the shutdown: with a bridge added to the
file it failed with ``ERROR gateway.serve: reload failed`` and a traceback
(``RuntimeError: the gateway is stopping``); and one arriving as the event loop closed
ended the process by SIGHUP's default action.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from tests.helpers.timeouts import unit
from tests.interop.mosquitto.tools import LOOPBACK, EdgebusProcess, free_port


def test_sighups_during_the_shutdown_are_ignored_with_one_info_line(tmp_path: Path) -> None:
    with EdgebusProcess(tmp_path, "api: {enabled: false}\nlogging: {level: info}\n") as gw:
        assert gw.process is not None
        # a bridge the reload would start, toward a port nothing listens on
        gw.config.write_text(
            gw.config.read_text()
            + "bridges:\n"
            + f"  - {{name: late, server: '{LOOPBACK}:{free_port()}',"
            + " forwards: [{local: 'a/x', remote: 'b/x', qos: 1}]}\n"
        )
        gw.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + unit(20)
        sent = 0
        while gw.process.poll() is None:
            assert time.monotonic() < deadline, f"still running:\n{gw.log_tail()}"
            try:
                gw.process.send_signal(signal.SIGHUP)
                sent += 1
            except ProcessLookupError:
                break
            time.sleep(0.002)
        try:
            status = gw.process.wait(unit(10))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running:\n{gw.log_tail()}") from None
        log = gw.stderr_path.read_text()
        assert sent > 0
        assert status == 0, log[-3000:]
        assert "reload failed" not in log
        assert "Traceback" not in log
        ignored = [line for line in log.splitlines() if "reload ignored" in line]
        assert ignored, log[-3000:]
        # "<date> <time> INFO    gateway.serve: reload ignored: ...", the level padded
        expected = "INFO gateway.serve: reload ignored: the gateway is stopping"
        assert all(" ".join(line.split()[2:]) == expected for line in ignored)
