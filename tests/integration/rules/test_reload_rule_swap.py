"""A reload that changes a rule (SIGHUP, here only its description) replaces it without
losing what the old rule had passed: its results still waiting in the action queue are
acted on by the old rule's actions before it goes (docs/rules.md, "Rules at run time").

Before, the replaced rule's queued results were skipped by the action worker (its hub
client was closed at once), so a republish rule swapped under load lost a few messages
per swap. The burst below keeps the action queue filled (the worker takes at most a
tenth of the loop), so every swap finds results waiting.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from tests.helpers.json_log import wait_logged
from tests.helpers.timeouts import unit
from tests.helpers.under_load import load_client
from tests.interop.mosquitto.tools import EdgebusProcess

COUNT = 2000
SWAPS = 8
RULE = """\
rules:
  - name: relay
    description: {description}
    sql: 'SELECT payload FROM "in/#"'
    actions:
      - {{type: republish, topic: "out/relay", qos: 1, payload: "{{payload}}"}}
{ballast}"""
#: Actions that slow the worker down, so that results wait in the queue at each swap.
BALLAST = '      - {type: republish, topic: "ballast/x", qos: 1, payload: "{payload}"}\n' * 10


def test_a_rule_changed_by_a_reload_under_load_loses_nothing(tmp_path: Path) -> None:
    log = tmp_path / "gw.log"
    base = f"api:\n  enabled: false\nlogging: {{format: json, file: {log}}}\n"
    with EdgebusProcess(tmp_path, base + RULE.format(description="a", ballast=BALLAST)) as gw:
        assert gw.process is not None
        received: set[int] = set()
        subscribed = threading.Event()
        sub = load_client(gw.port, "counter")
        sub.on_subscribe = lambda *_: subscribed.set()
        sub.on_message = lambda _c, _u, msg: received.add(int(msg.payload))
        sub.subscribe("out/relay", 1)
        sub.loop_start()
        pub = load_client(gw.port, "numbers")
        pub.loop_start()
        try:
            assert subscribed.wait(unit(10))
            infos = []
            text = gw.config.read_text()
            for n in range(COUNT):
                infos.append(pub.publish("in/x", str(n).encode(), qos=1))
                if n % (COUNT // SWAPS) == COUNT // SWAPS // 2:  # mid-burst: results queued
                    swap = n // (COUNT // SWAPS) + 1
                    gw.config.write_text(text.replace("description: a", f"description: s{swap}"))
                    gw.process.send_signal(signal.SIGHUP)
                    wait_logged(log, "rule: updated relay", swap, unit(20))
            for info in infos:
                info.wait_for_publish(unit(20))
            deadline = time.monotonic() + unit(30)
            while len(received) < COUNT and time.monotonic() < deadline:
                time.sleep(0.05)
            missing = sorted(set(range(COUNT)) - received)
            assert missing == [], f"{len(missing)} lost across {SWAPS} swaps: {missing[:20]}"
        finally:
            pub.loop_stop()
            sub.loop_stop()
            pub.disconnect()
            sub.disconnect()
        assert gw.signal_and_wait(signal.SIGTERM) == 0
