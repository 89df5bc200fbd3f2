"""``kill -9`` during a QoS 2 stream into the stream log (``fsync: always``): every message
the broker acknowledged with PUBREC is in the log after the restart.

The broker records a QoS 2 packet id as received (a persistent session's "awaiting
PUBREL") in its store, and the store commits faster than the log writes and syncs.
Before, the record went into the store's next commit at once: a kill between that commit
and the log's left the id received and the message missing from the log, so the
publisher's resend (DUP, same id) after the restart was taken for a duplicate, answered
with PUBREC and never logged (the probe found 2-3 per run of 6 kills; QoS 1 never). Now
the record waits for the log's commit.

The publisher keeps 40 QoS 2 messages in flight; each kill is made on a wire event (a
PUBREC read), with messages between the two commits; after each restart it resumes its
session and sends again what had no PUBREC (DUP) and the PUBRELs.
"""

from __future__ import annotations

import json
import random
import signal
from pathlib import Path

import pytest

from tests.helpers.brokers import BrokerHandle, free_port, start_edgebus
from tests.helpers.qos2_flows import NumberedPublisher
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.components.support import wait_for

WINDOW = 40
KILLS = 8


def _start(tmp_path: Path, api_port: int) -> BrokerHandle:
    config = (
        f"persistence: sqlite\napi:\n  bind: 127.0.0.1:{api_port}\n  keys: ['{KEY}']\n"
        "stream:\n  enabled: true\n  fsync: always\n  segment_bytes: 64KB\n"
        "mqtt:\n  receive_maximum: 64\n"
    )
    return start_edgebus(tmp_path, config)


@pytest.mark.timeout(180)
def test_sigkill_loses_no_qos2_message_acknowledged_into_the_log(tmp_path: Path) -> None:
    api_port = free_port()
    publisher = NumberedPublisher("k9q2-pub", "k9q2/s", WINDOW, accepted=(0, 0x10))
    gateway = _start(tmp_path, api_port)
    try:
        publisher.connect(gateway, first=True)
        for _ in range(KILLS):
            publisher.run(random.randint(50, 150))
            gateway.process.send_signal(signal.SIGKILL)
            gateway.process.wait(unit(10))
            gateway.stop()
            assert publisher.client is not None
            publisher.client.close()
            gateway = _start(tmp_path, api_port)
            publisher.connect(gateway, first=False)
        publisher.finish()
        assert publisher.client is not None
        publisher.client.disconnect()
        http = Http(f"http://127.0.0.1:{api_port}", bearer(KEY))
        reply = wait_for(lambda: http.get("/api/v1/stream/offsets"), lambda r: r.status == 200)
        end = reply.json()["end"]
        reply = http.get(f"/api/v1/stream/records?limit={end + 1}")
        logged = {int(json.loads(line)["payload_json"]) for line in reply.text.splitlines()}
    finally:
        gateway.stop()
    missing = sorted(publisher.acknowledged - logged)
    assert missing == [], f"acknowledged with PUBREC, not in the log: {missing}"
    assert len(publisher.acknowledged) >= KILLS * 50
