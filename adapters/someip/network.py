"""The sockets the SOME/IP adapter opens itself (no someipy): free endpoint ports, and
its own membership in the service discovery multicast group."""

from __future__ import annotations

import socket

from adapters.someip.config import DaemonConfig
from broker_core.errors import AdapterConnectionError

__all__ = ["discovery_socket", "free_port"]


def free_port(host: str, tcp: bool) -> int:
    """A UDP port (and the same TCP port when ``tcp``) free on ``host`` a moment ago."""
    for _ in range(20):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind((host, 0))
            port = int(udp.getsockname()[1])
            if not tcp:
                return port
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as stream:
                try:
                    stream.bind((host, port))
                except OSError:
                    continue
                return port
    raise AdapterConnectionError(f"no free port on {host}")


def discovery_socket(config: DaemonConfig) -> socket.socket:
    """A UDP socket in the discovery multicast group on ``config.interface``, beside the
    daemon's: both reuse the address, so both get every datagram."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((config.sd_address, config.sd_port))
        membership = socket.inet_aton(config.sd_address) + socket.inet_aton(config.interface)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
    except OSError as exc:
        sock.close()
        raise AdapterConnectionError(
            f"cannot join service discovery {config.sd_address}:{config.sd_port} on"
            f" {config.interface}: {exc}"
        ) from exc
    return sock
