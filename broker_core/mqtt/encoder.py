"""Encoding MQTT control packets: ``encode(packet, protocol_level) -> bytes``.

The inverse of ``codec.Decoder``. Fields a protocol level does not carry (MQTT 5
reason codes and properties on 3.1.1) are left out. Misuse of this API (a QoS 1
PUBLISH without a packet id, a string with U+0000) raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker_core.mqtt import wire
from broker_core.mqtt.packets import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
)
from broker_core.mqtt.properties import EMPTY, Properties
from broker_core.mqtt.reason_codes import v3_connack_code

__all__ = ["encode", "fixed_header"]


def fixed_header(b0: int, remaining_length: int) -> bytes:
    if remaining_length < 128:
        return bytes((b0, remaining_length))
    return bytes((b0,)) + wire.encode_varint(remaining_length)


def _frame(b0: int, body: bytes) -> bytes:
    return fixed_header(b0, len(body)) + body


def _props(props: Properties) -> bytes:
    return b"\x00" if props is EMPTY else props.encoded()


def _connect(p: Connect, level: int) -> bytes:
    name = "MQIsdp" if level == 3 else "MQTT"
    flags = 0
    if p.clean_start:
        flags |= 0x02
    payload = [wire.encode_utf8(p.client_id)]
    if p.will is not None:
        flags |= 0x04 | (p.will.qos << 3) | (0x20 if p.will.retain else 0)
        if level == 5:
            payload.append(_props(p.will.properties))
        payload.append(wire.encode_utf8(p.will.topic))
        payload.append(wire.encode_binary(p.will.payload))
    if p.username is not None:
        flags |= 0x80
        payload.append(wire.encode_utf8(p.username))
    if p.password is not None:
        flags |= 0x40
        payload.append(wire.encode_binary(p.password))
    head = wire.encode_utf8(name) + bytes((level, flags)) + p.keep_alive.to_bytes(2, "big")
    if level == 5:
        head += _props(p.properties)
    return _frame(0x10, head + b"".join(payload))


def _connack(p: Connack, level: int) -> bytes:
    if level == 5:
        return _frame(0x20, bytes((int(p.session_present), p.reason_code)) + _props(p.properties))
    code = p.reason_code if p.reason_code <= 5 else int(v3_connack_code(p.reason_code))
    # MQTT 3.1 (level 3) has no session present flag: the byte is reserved, 0.
    return bytes((0x20, 2, int(p.session_present and level == 4), code))


def encode_publish(p: Publish, level: int) -> bytes:
    b0 = 0x30 | (p.qos << 1) | (0x08 if p.dup else 0) | (0x01 if p.retain else 0)
    body = wire.encode_utf8(p.topic)
    if p.qos:
        if not p.packet_id:
            raise ValueError("a QoS 1 or 2 PUBLISH needs a packet id")
        body += p.packet_id.to_bytes(2, "big")
    if level == 5:
        body += _props(p.properties)
    return _frame(b0, body + p.payload)


def _ack(b0: int) -> Callable[[Any, int], bytes]:
    def encode(p: Puback | Pubrec | Pubrel | Pubcomp, level: int) -> bytes:
        pid = p.packet_id.to_bytes(2, "big")
        if level < 5 or (p.reason_code == 0 and p.properties is EMPTY):
            return bytes((b0, 2)) + pid
        if p.properties is EMPTY:
            return bytes((b0, 3)) + pid + bytes((p.reason_code,))
        return _frame(b0, pid + bytes((p.reason_code,)) + p.properties.encoded())

    return encode


def _subscribe(p: Subscribe, level: int) -> bytes:
    body = [p.packet_id.to_bytes(2, "big")]
    if level == 5:
        body.append(_props(p.properties))
    for sub in p.subscriptions:
        o = sub.options
        opts = o.qos
        if level == 5:
            opts |= (4 if o.no_local else 0) | (8 if o.retain_as_published else 0)
            opts |= o.retain_handling << 4
        body.append(wire.encode_utf8(sub.topic_filter) + bytes((opts,)))
    return _frame(0x82, b"".join(body))


def _suback(p: Suback, level: int) -> bytes:
    body = p.packet_id.to_bytes(2, "big")
    if level == 5:
        body += _props(p.properties)
    return _frame(0x90, body + bytes(p.reason_codes))


def _unsubscribe(p: Unsubscribe, level: int) -> bytes:
    body = [p.packet_id.to_bytes(2, "big")]
    if level == 5:
        body.append(_props(p.properties))
    body.extend(wire.encode_utf8(f) for f in p.topic_filters)
    return _frame(0xA2, b"".join(body))


def _unsuback(p: Unsuback, level: int) -> bytes:
    pid = p.packet_id.to_bytes(2, "big")
    if level < 5:
        return b"\xb0\x02" + pid
    return _frame(0xB0, pid + _props(p.properties) + bytes(p.reason_codes))


def _pingreq(p: Pingreq, level: int) -> bytes:
    return b"\xc0\x00"


def _pingresp(p: Pingresp, level: int) -> bytes:
    return b"\xd0\x00"


def _reasoned(b0: int) -> Callable[[Any, int], bytes]:
    def encode(p: Disconnect | Auth, level: int) -> bytes:
        if level < 5:
            if b0 == 0xF0:
                raise ValueError("AUTH exists only in MQTT 5")
            return bytes((b0, 0))
        if p.reason_code == 0 and p.properties is EMPTY:
            return bytes((b0, 0))
        if p.properties is EMPTY:
            return bytes((b0, 1, p.reason_code))
        return _frame(b0, bytes((p.reason_code,)) + p.properties.encoded())

    return encode


_ENCODERS: dict[type, Callable[[Any, int], bytes]] = {
    Connect: _connect,
    Connack: _connack,
    Publish: encode_publish,
    Puback: _ack(0x40),
    Pubrec: _ack(0x50),
    Pubrel: _ack(0x62),
    Pubcomp: _ack(0x70),
    Subscribe: _subscribe,
    Suback: _suback,
    Unsubscribe: _unsubscribe,
    Unsuback: _unsuback,
    Pingreq: _pingreq,
    Pingresp: _pingresp,
    Disconnect: _reasoned(0xE0),
    Auth: _reasoned(0xF0),
}


def encode(packet: Packet, protocol_level: int = 4) -> bytes:
    """The wire bytes of ``packet`` at ``protocol_level`` (3, 4 or 5)."""
    return _ENCODERS[type(packet)](packet, protocol_level)
