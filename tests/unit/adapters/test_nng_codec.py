"""The ``nng`` adapter's frame layouts: NanoMQ's NNG bridge format and raw."""

from __future__ import annotations

import pytest

from adapters.nanomsg.codec import decode, encode
from adapters.sockets.frames import prefix_order
from gateway.mapping import MappingError


def test_nanomq_bridge_format_both_ways() -> None:
    # bridges.nng.pub: remote_topic + nng_delimiter ("/" by default) + payload
    body = encode(b"remote/nng", b'{"t": 21.5}', "prefix", b"/")
    assert body == b'remote/nng/{"t": 21.5}'
    assert decode(body, "prefix", b"/", prefix_order(["remote/nng"])) == (
        b"remote/nng",
        b'{"t": 21.5}',
    )


def test_raw_is_the_body() -> None:
    assert encode(b"ignored", b"\x00\x01", "raw", b"/") == b"\x00\x01"
    assert decode(b"\x00\x01", "raw", b"/", ()) == (None, b"\x00\x01")


def test_a_body_without_delimiter_is_refused() -> None:
    with pytest.raises(MappingError):
        decode(b"nodelimiter", "prefix", b":", ())
