"""Raw MQTT 5 QoS 2 flows for the tests that kill the gateway in the middle of them: a
persistent session's client, a publisher of numbered messages that resumes its flows
after each restart, and a subscriber drained as an exactly-once receiver."""

from __future__ import annotations

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

__all__ = ["SESSION", "NumberedPublisher", "connect_persistent", "drain_exactly_once"]

#: A session that outlives its connection (and the gateway's restarts) by an hour.
SESSION = {"session_expiry_interval": 3600}


def connect_persistent(broker: BrokerHandle, client_id: str, clean: bool) -> RawClient:
    """An MQTT 5 client of ``client_id``'s persistent session (a new one when ``clean``)."""
    client = RawClient(broker.host, broker.port, protocol_level=5)
    client.do_connect(client_id, proto_ver=5, clean_session=clean, properties=SESSION)
    return client


class NumberedPublisher:
    """Numbered QoS 2 messages on ``topic``, ``window`` in flight, across restarts of its
    session: after each it sends again what had no PUBREC (DUP) and the PUBRELs
    [MQTT-4.4.0-1]. ``acknowledged``: the numbers answered with a PUBREC of a reason
    code in ``accepted``."""

    def __init__(
        self, client_id: str, topic: str, window: int, accepted: tuple[int, ...] = (0,)
    ) -> None:
        self.client_id = client_id
        self.topic = topic
        self.window = window
        self.accepted = accepted
        self.seq = 0
        self.unreceived: dict[int, int] = {}  # packet id -> seq: sent, no PUBREC yet
        self.released: dict[int, int] = {}  # packet id -> seq: PUBREC read, PUBREL sent
        self.acknowledged: set[int] = set()
        self.client: RawClient | None = None

    def connect(self, broker: BrokerHandle, first: bool) -> None:
        client = self.client = connect_persistent(broker, self.client_id, first)
        for mid, seq in self.unreceived.items():
            client.send(mb.gen_publish(self.topic, str(seq), qos=2, dup=True, mid=mid, proto_ver=5))
        for mid in self.released:
            client.send(mb.gen_pubrel(mid, proto_ver=5))

    def run(self, pubrecs: int) -> None:
        """Publishes until ``pubrecs`` PUBRECs were read (then returns at once)."""
        read = 0
        while read < pubrecs:
            while len(self.unreceived) + len(self.released) < self.window:
                self.seq += 1
                mid = self.seq % 60000 + 1
                self.unreceived[mid] = self.seq
                self._send(mb.gen_publish(self.topic, str(self.seq), qos=2, mid=mid, proto_ver=5))
            read += self._answer()

    def finish(self) -> None:
        """Waits until nothing is in flight."""
        while self.unreceived or self.released:
            self._answer()

    def _send(self, data: bytes) -> None:
        assert self.client is not None
        self.client.send(data)

    def _answer(self) -> int:
        """Reads one packet; 1 for a PUBREC of a message in flight (PUBREL sent)."""
        assert self.client is not None
        packet = self.client.recv_packet(unit(10))
        mid = packet.packet_id or 0
        if packet.type == mb.PacketType.PUBREC and mid in self.unreceived:
            assert (packet.reason_code or 0) in self.accepted, packet
            seq = self.released[mid] = self.unreceived.pop(mid)
            self.acknowledged.add(seq)
            self._send(mb.gen_pubrel(mid, proto_ver=5))
            return 1
        if packet.type == mb.PacketType.PUBCOMP:
            self.released.pop(mid, None)
        return 0


def drain_exactly_once(sub: RawClient, last: str) -> list[str]:
    """Every message delivered until ``last``, as an exactly-once receiver: a PUBLISH of
    a packet id held between PUBREC and PUBREL is a resend, not delivered again."""
    delivered: list[str] = []
    awaiting: set[int] = set()
    while last not in delivered:
        packet = sub.wait_for(
            lambda p: p.type in (mb.PacketType.PUBLISH, mb.PacketType.PUBREL),
            unit(20),
            f"PUBLISH (delivered {len(delivered)}, the last {delivered[-3:]})",
        )
        mid = packet.packet_id or 0
        if packet.type == mb.PacketType.PUBREL:
            awaiting.discard(mid)
            sub.send(mb.gen_pubcomp(mid, proto_ver=5))
            continue
        if mid not in awaiting:
            awaiting.add(mid)
            delivered.append(packet.payload.decode())
        sub.send(mb.gen_pubrec(mid, proto_ver=5))
    return delivered
