"""A component restarted on request (``POST /components/adapter/NAME/restart``) or by a
reload that changed its configuration loses nothing the broker accepted for it: its
subscriptions are handed over from the old run to the new one (docs/adapters.md,
"Restarts hand the subscriptions over"), so what was queued for the old run and what
arrives while the runs swap reach the new run.

Before, the old run's subscriptions were closed with what they held, and what was
published between that and the new run's subscribe matched nothing: a loopback adapter
restarted under a steady QoS 1 stream lost a few messages at every restart, counted
nowhere. And a reload that restarted a component did not count in its ``restarts``.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from pathlib import Path

import paho.mqtt.client as mqtt
import yaml

from tests.helpers.timeouts import unit
from tests.helpers.under_load import api, component, load_client, wait_running_again
from tests.integration.api.support import KEY
from tests.interop.mosquitto.tools import LOOPBACK, EdgebusProcess, free_port

COUNT = 8000
PUBLISHERS = 4
RESTARTS = 20  # half on request, half by a reload


def _config(api_port: int, queue_size: int) -> str:
    return yaml.safe_dump(
        {
            "api": {"bind": f"{LOOPBACK}:{api_port}", "keys": [KEY]},
            # the counting subscriber must not be where messages are dropped
            "mqtt": {"max_queued_messages": 100_000},
            "adapters": [
                {
                    "type": "loopback",
                    "name": "lb",
                    "queue_size": queue_size,
                    "mappings": [{"source": "in/{rest#}", "target": "out/{rest}", "qos": 1}],
                }
            ],
        }
    )


def test_restarts_on_request_and_by_reload_lose_nothing_accepted(tmp_path: Path) -> None:
    api_port = free_port()
    with EdgebusProcess(tmp_path, _config(api_port, 10_000)) as gw:
        config = gw.config.read_text()
        received: set[int] = set()
        subscribed = threading.Event()
        sub = load_client(gw.port, "counter")
        sub.on_subscribe = lambda *_: subscribed.set()
        sub.on_message = lambda _c, _u, msg: received.add(int(msg.payload))
        sub.subscribe("out/#", 1)
        sub.loop_start()
        pubs = [load_client(gw.port, f"numbers-{p}") for p in range(PUBLISHERS)]
        for pub in pubs:
            pub.loop_start()
        infos: list[mqtt.MQTTMessageInfo] = []
        stop = threading.Event()

        def publish(p: int) -> None:  # a steady stream, so that every restart meets messages
            pub = pubs[p]
            for n in range(p, COUNT, PUBLISHERS):
                if stop.is_set():
                    return
                infos.append(pub.publish("in/x", str(n).encode(), qos=1))
                if n % 40 < PUBLISHERS:
                    time.sleep(0.002)

        publishers = [
            threading.Thread(target=publish, args=(p,), daemon=True) for p in range(PUBLISHERS)
        ]
        try:
            assert subscribed.wait(unit(10))
            before = component(api_port, "lb")
            for publisher in publishers:
                publisher.start()
            for restart in range(RESTARTS):
                deadline = time.monotonic() + unit(30)
                while len(infos) < (restart + 1) * COUNT // (RESTARTS + 1):  # spread out
                    assert time.monotonic() < deadline, len(infos)
                    time.sleep(0.005)
                since = component(api_port, "lb")["since"]
                if restart % 2:
                    api(api_port, "POST", "/components/adapter/lb/restart")
                else:  # a reload that changes the adapter: its queue size, its mapping's QoS
                    size, qos = (9_000, 2) if restart % 4 == 0 else (10_000, 1)
                    gw.config.write_text(
                        config.replace("queue_size: 10000", f"queue_size: {size}").replace(
                            "qos: 1", f"qos: {qos}"
                        )
                    )
                    reloaded = api(api_port, "POST", "/reload")["reloaded"]
                    assert reloaded == ["adapter: restarted lb"]
                wait_running_again(api_port, "lb", since)
            for publisher in publishers:
                publisher.join(unit(60))
                assert not publisher.is_alive()
            for info in infos:
                info.wait_for_publish(unit(20))  # acknowledged: the broker accepted it
            deadline = time.monotonic() + unit(30)
            while len(received) < COUNT and time.monotonic() < deadline:
                time.sleep(0.05)
            missing = sorted(set(range(COUNT)) - received)
            assert missing == [], f"{len(missing)} lost across {RESTARTS} restarts: {missing[:20]}"
            after = component(api_port, "lb")
            assert after["stats"]["dropped"] == 0
            # A reload that restarts a component is a restart on request: counted.
            assert after["restarts"] - before["restarts"] == RESTARTS
        finally:
            stop.set()
            for client in (*pubs, sub):
                client.loop_stop()
                client.disconnect()


def test_a_reload_that_restarts_a_component_counts_a_restart(tmp_path: Path) -> None:
    api_port = free_port()
    with EdgebusProcess(tmp_path, _config(api_port, 10_000)) as gw:
        config = gw.config.read_text()
        before = component(api_port, "lb")
        assert before["restarts"] == 0
        gw.config.write_text(config.replace("queue_size: 10000", "queue_size: 9000"))
        assert api(api_port, "POST", "/reload")["reloaded"] == ["adapter: restarted lb"]
        after = wait_running_again(api_port, "lb", before["since"])
        assert after["restarts"] == 1
        metrics = (
            urllib.request.urlopen(
                urllib.request.Request(
                    f"http://{LOOPBACK}:{api_port}/metrics",
                    headers={"Authorization": f"Bearer {KEY}"},
                ),
                timeout=unit(10),
            )
            .read()
            .decode()
        )
        assert (
            'edgebus_component_restarts_total{kind="adapter",name="lb",type="loopback"} 1.0'
            in metrics
        )
        assert api(api_port, "POST", "/reload")["reloaded"] == []  # unchanged: no restart
        assert component(api_port, "lb")["restarts"] == 1
