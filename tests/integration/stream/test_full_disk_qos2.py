"""A QoS 2 message the stream log failed to write is not recorded as received
(docs/spark.md, "a failed write leaves the publisher without PUBACK/PUBREC").

A real gateway (SQLite store on the normal disk), the stream log on a 1 MiB tmpfs that
is then filled. A persistent MQTT 5 publisher sends a QoS 2 message larger than a page
(it needs new blocks): the write fails, the publisher is disconnected (0x80) with no
PUBREC. Its resend (DUP, same packet id) must be offered to the log again and refused
again while the disk is full; before, the first attempt left the packet id recorded as
received, so the resend got PUBREC 0x00 (and PUBCOMP) without the message ever reaching
the log: acknowledged and lost. Once there is room, the resend is acknowledged and the
message is in the log.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.small_fs import fill, small_filesystem
from tests.integration.api.support import KEY
from tests.integration.components.support import http_of

SESSION = {"session_expiry_interval": 3600}
PAYLOAD = "X-" + "x" * 6000


def _config(path: Path) -> str:
    return f"""
api: {{keys: ['{KEY}']}}
persistence: sqlite
stream: {{enabled: true, topics: ["sx/#"], path: "{path}", segment_bytes: 64KiB}}
"""


def _publisher(gw: RunningGateway, first: bool) -> RawClient:
    client = RawClient("127.0.0.1", gw.port, protocol_level=5)
    client.do_connect("sx-pub", proto_ver=5, clean_session=first, properties=SESSION)
    return client


def _answer(client: RawClient) -> mb.Packet:
    return client.wait_for(
        lambda p: p.type in (mb.PacketType.PUBREC, mb.PacketType.DISCONNECT),
        what="PUBREC or DISCONNECT",
    )


def _logged(gw: RunningGateway) -> list[str]:
    reply = http_of(gw).get("/api/v1/stream/records?start=0&limit=1000")
    assert reply.status == 200, reply.text
    rows = [json.loads(line) for line in reply.text.splitlines()]
    return [base64.b64decode(row["payload"]).decode() for row in rows]


def test_a_qos2_message_the_log_could_not_write_is_offered_again(tmp_path: Path) -> None:
    with (
        small_filesystem(tmp_path / "mnt", 1 << 20) as mount,
        running_gateway(tmp_path, _config(mount / "stream")) as gw,
    ):
        warmup = _publisher(gw, first=True)
        assert warmup.publish("sx/a", "warmup", qos=1, mid=9) is not None
        warmup.disconnect()
        filler = fill(mount)

        for attempt in range(3):
            pub = _publisher(gw, first=False)
            dup = attempt > 0
            pub.send(mb.gen_publish("sx/a", PAYLOAD, qos=2, dup=dup, mid=1, proto_ver=5))
            answer = _answer(pub)
            assert (answer.type, answer.reason_code) == (mb.PacketType.DISCONNECT, 0x80), (
                f"attempt {attempt + 1} on a full disk: {answer!r}"
            )
            pub.close()

        filler.unlink()
        pub = _publisher(gw, first=False)
        pub.send(mb.gen_publish("sx/a", PAYLOAD, qos=2, dup=True, mid=1, proto_ver=5))
        pubrec = _answer(pub)
        assert pubrec.type == mb.PacketType.PUBREC
        assert (pubrec.reason_code or 0) in (0, 0x10)  # 0x10: no subscriber, logged
        pub.send(mb.gen_pubrel(1, proto_ver=5))
        pub.wait_for(lambda p: p.type == mb.PacketType.PUBCOMP, what="PUBCOMP")
        pub.disconnect()
        assert _logged(gw).count(PAYLOAD) == 1
