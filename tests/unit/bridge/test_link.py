"""The link's fast path: runs of plain PUBACKs read straight from the bytes, everything
else (and anything split across reads) through the decoder, in order. A refused
certificate named by OpenSSL's verification message."""

from __future__ import annotations

import asyncio
import ssl

from bridge.link import ANSWERED_IN_TLS, Link, certificate_refused
from broker_core.mqtt.packets import Connack, Packet, Puback, Publish, Suback
from gateway.config.models.bridges import BridgeConfig
from tests.helpers import mqtt_builder as mb


class _Transport(asyncio.Transport):
    closed = False
    reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _feed(level: int, *chunks: bytes) -> tuple[list[list[int]], list[Packet]]:
    runs, packets, _ = _link(level, *chunks)
    return runs, packets


def _link(
    level: int, *chunks: bytes, started: bool = True
) -> tuple[list[list[int]], list[Packet], Link]:
    runs: list[list[int]] = []
    packets: list[Packet] = []
    links: list[Link] = []

    async def main() -> None:
        link = Link(level, packets.append, None)
        link.on_pubacks = runs.append
        link.connection_made(_Transport())
        if started:
            link.start()
        links.append(link)
        for chunk in chunks:
            link.data_received(chunk)

    asyncio.run(main())
    return runs, packets, links[0]


def test_a_read_of_puback_runs_is_one_batch_of_packet_identifiers() -> None:
    data = b"".join(mb.gen_puback(mid) for mid in (1, 2, 65000, 300))
    runs, packets = _feed(4, data)
    assert (runs, packets) == ([[1, 2, 65000, 300]], [])


def test_other_packets_after_the_run_go_through_the_decoder_in_order() -> None:
    data = mb.gen_puback(4) + mb.gen_puback(5) + mb.gen_suback(65001, 1) + mb.gen_puback(6)
    runs, packets = _feed(4, data)
    assert runs == [[4, 5]]
    assert [type(p) for p in packets] == [Suback, Puback]
    assert packets[1] == Puback(6)


def test_a_puback_split_across_reads_is_decoded_whole() -> None:
    data = mb.gen_puback(6) + mb.gen_puback(7)
    runs, packets = _feed(4, data[:3], data[3:])
    assert runs == []
    assert packets == [Puback(6), Puback(7)]


def test_mqtt5_pubacks_with_a_reason_code_take_the_decoder() -> None:
    data = mb.gen_puback(8, proto_ver=5) + mb.gen_puback(9, 0x10, proto_ver=5)
    runs, packets = _feed(5, data)
    assert runs == [[8]]
    assert packets == [Puback(9, 0x10)]


def test_packet_identifier_zero_is_left_to_the_decoder() -> None:
    runs, packets, link = _link(4, mb.gen_puback(3) + b"\x40\x02\x00\x00")
    assert runs == [[3]]  # the malformed one is the decoder's to refuse: the link closes
    assert packets == []
    assert link.reason is not None and link.reason.startswith("malformed packet from the remote")


def test_what_comes_with_the_connack_waits_for_start() -> None:
    """A session's queued messages, in the CONNACK's segment: held (and reading paused)
    until the bridge has attached and starts the link, then delivered in order."""
    data = (
        mb.gen_connack(True)
        + mb.gen_publish("cmd/x", b"q1", qos=1, mid=1)
        + mb.gen_publish("cmd/x", b"q2", qos=1, mid=2)
    )
    runs, packets, link = _link(4, data, started=False)
    assert link.connack.done() and link.connack.result() == Connack(True, 0)
    assert (runs, packets) == ([], [])
    transport = link.transport
    assert isinstance(transport, _Transport) and not transport.reading
    link.start()
    assert [(type(p), p.payload) for p in packets if isinstance(p, Publish)] == [
        (Publish, b"q1"),
        (Publish, b"q2"),
    ]
    assert len(packets) == 2
    assert transport.reading


def test_a_packet_before_the_connack_is_a_protocol_violation() -> None:
    _, packets, link = _link(4, mb.gen_publish("cmd/x", b"early", qos=0), started=False)
    assert packets == []
    assert link.reason == "protocol violation: the remote sent PUBLISH before CONNACK"
    transport = link.transport
    assert isinstance(transport, _Transport) and transport.closed
    assert not link.connack.done()


def test_a_tls_alert_instead_of_a_connack_is_named() -> None:
    alert = b"\x15\x03\x03\x00\x02\x02\x28"  # TLS alert record: fatal, handshake failure
    _, packets, link = _link(4, alert, started=False)
    assert packets == []
    assert link.reason == ANSWERED_IN_TLS


def test_a_lost_link_always_has_a_reason() -> None:
    """An exception with no text (an ``AssertionError()``) still names something."""
    _, _, link = _link(4, mb.gen_connack(False), started=False)
    link.connection_lost(AssertionError())
    assert link.lost.result() == "connection lost: AssertionError"
    _, _, link = _link(4, started=False)
    link.connection_lost(ConnectionResetError(104, "Connection reset by peer"))
    assert link.lost.result() == "closed before CONNACK: Connection reset by peer"


def _refused(code: int, message: str) -> ssl.SSLCertVerificationError:
    exc = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] ...")
    exc.reason = "CERTIFICATE_VERIFY_FAILED"
    exc.verify_code = code
    exc.verify_message = message
    return exc


def test_a_refused_certificate_is_named_by_openssl_with_what_to_check() -> None:
    config = BridgeConfig.model_validate(
        {
            "name": "b",
            "server": "127.0.0.1:1",
            "tls": {"server_name": "cloud.example"},
            "forwards": [{"local": "up/#"}],
        }
    )
    mismatch = _refused(62, "Hostname mismatch, certificate is not valid for 'cloud.example'.")
    assert certificate_refused(mismatch, config) == (
        "certificate verify failed: Hostname mismatch, certificate is not valid for"
        " 'cloud.example' (OpenSSL verify code 62); the name verified is tls.server_name"
    )
    names = ["DNS:other.example", "IP:10.0.0.1"]
    assert certificate_refused(mismatch, config, names) == (
        "certificate verify failed: Hostname mismatch, certificate is not valid for"
        " 'cloud.example' (OpenSSL verify code 62); the certificate is for"
        " DNS:other.example, IP:10.0.0.1; the name verified is tls.server_name"
    )
    assert certificate_refused(_refused(9, "certificate is not yet valid"), config) == (
        "certificate verify failed: certificate is not yet valid (OpenSSL verify code 9);"
        " check the certificate's dates and this machine's clock"
    )
    assert certificate_refused(_refused(18, "self-signed certificate"), config) == (
        "certificate verify failed: self-signed certificate (OpenSSL verify code 18);"
        " its issuer is not among the CAs trusted: the system's CAs"
    )
    assert certificate_refused(_refused(23, "certificate revoked"), config) == (
        "certificate verify failed: certificate revoked (OpenSSL verify code 23)"
    )
