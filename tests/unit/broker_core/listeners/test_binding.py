"""The listeners resolve their host without the IDNA codec where it is not needed: an
ASCII name or address goes to ``getaddrinfo`` as bytes (a running gateway then never
loads the codec's modules and Unicode tables, docs/performance.md "Start-up memory")."""

from __future__ import annotations

import socket

from broker_core.listeners.binding import host_to_resolve


def test_any_address_is_none_and_an_ascii_host_is_bytes() -> None:
    assert host_to_resolve("") is None
    assert host_to_resolve("127.0.0.1") == b"127.0.0.1"
    assert host_to_resolve("::1") == b"::1"
    assert host_to_resolve("localhost") == b"localhost"


def test_an_internationalised_name_is_left_to_the_codec() -> None:
    assert host_to_resolve("bücher.example") == "bücher.example"


def test_getaddrinfo_resolves_the_bytes_as_it_did_the_text() -> None:
    flags = {"type": socket.SOCK_STREAM, "flags": socket.AI_PASSIVE}
    for host in ("127.0.0.1", "localhost"):
        assert socket.getaddrinfo(host_to_resolve(host), 0, **flags) == socket.getaddrinfo(
            host, 0, **flags
        )
