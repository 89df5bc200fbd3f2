"""Rules evaluate every message their FROM matches, at full speed: only actions are shed.

A raw-socket publisher writes 20 000 QoS 0 PUBLISH packets in large chunks, as fast as
the socket takes them, into a gateway whose action queue holds 100 results; a PINGREQ
after them is answered once the broker has routed them all (one connection is read in
order). By then each rule has evaluated every message (``matched``, ``passed``): the
evaluation happens while the message is routed. The actions run later, within their
share of the loop; the results the full queue dropped are counted, so that every
passed result is either acted on or counted as dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import mqtt_builder as mb
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.broker.support import wait_until
from tests.integration.rules.support import gateway_with_clients

COUNT = 20_000
CHUNK = 1_000

CONFIG = """
rules:
  - name: even
    sql: >-
      SELECT payload.n AS n, topic FROM "fast/+" WHERE payload.n % 2 = 0
    actions: [{type: republish, topic: "even/{n}"}]
  - name: all
    sql: 'SELECT payload.n AS n FROM "fast/#"'
    actions: [{type: republish, topic: "copy/all"}]
"""


def _frames(start: int, count: int) -> bytes:
    return b"".join(
        mb.gen_publish(f"fast/{n % 7}", json.dumps({"n": n}).encode(), qos=0, proto_ver=4)
        for n in range(start, start + count)
    )


def test_every_message_is_evaluated_and_action_drops_are_counted(tmp_path: Path) -> None:
    with gateway_with_clients(tmp_path, CONFIG) as (gw, clients):
        engine = gw.gateway.rules

        def shrink() -> None:
            engine.queue_size = 100  # the action queue, so that a burst overflows it

        gw.call(shrink)
        watcher = clients.subscriber(4, "copy/all")
        host, port = gw.address()
        with RawClient(host, port) as publisher:
            publisher.do_connect("fast-publisher")
            for start in range(0, COUNT, CHUNK):
                publisher.send(_frames(start, CHUNK))
            publisher.ping(timeout=unit(30))  # answered once the broker routed them all
            statuses = {s["name"]: s for s in gw.call(engine.statuses)}
            publisher.disconnect()

        even, every = statuses["even"], statuses["all"]
        assert (every["matched"], every["passed"], every["failed"]) == (COUNT, COUNT, 0)
        assert (even["matched"], even["passed"], even["failed"]) == (COUNT, COUNT // 2, 0)

        def settled() -> dict[str, Any] | None:
            if engine.stats()["queue_depth"]:
                return None
            return {s["name"]: s for s in engine.statuses()}

        done = wait_until(lambda: gw.call(settled), what="the action queue drained")
        dropped = 0
        for name in ("even", "all"):
            status = done[name]
            (action,) = status["actions"]
            acted = action["succeeded"] + action["failed"]
            assert acted + status["dropped"] == status["passed"]
            dropped += status["dropped"]
        assert gw.call(engine.stats)["dropped"] == dropped
        assert watcher.expect_message().topic == "copy/all"  # the actions that ran did run
