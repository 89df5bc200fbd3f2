"""someipy's daemon, ``someipyd``, with the workarounds for its known bugs: the one place.

Run as ``python -m adapters.someip.daemon --config someipyd.json``; it takes the
arguments of ``someipyd``. The SOME/IP adapter starts its own daemon this way; run it
the same way when the adapter connects to a daemon you start (``daemon.socket_path``).

Bugs of someipy 2.1.2's daemon worked around here (see docs/adapters/someip.md), each
applied only while the bug is present, so a fixed someipy makes them no-ops; drop them
when the minimum someipy version has the fixes:

1. ``someipy.service.Method`` is an unhashable dataclass (it defines ``__eq__`` but no
   ``__hash__``); the daemon hashes the services it offers, methods included, when a
   remote client subscribes, and crashes. Fix: hash ``(id, protocol)``, the fields its
   ``__eq__`` compares.
2. The daemon's expiry task logs ``Subscription.eventgroup_id``, which does not exist;
   the task dies with the first expired subscription and found services then never
   expire. Fix: a read-only ``eventgroup_id`` property, ``self.eventgroup.id``.
3. The daemon forwards method responses of message type RESPONSE (0x80) only; a response
   of type ERROR (0x81), how a SOME/IP server reports an error code, is dropped and the
   caller times out. Fix: hand an ERROR response to the daemon's RESPONSE path (the
   return code is kept; the client library reports it).
4. The daemon takes a discovery group (``sd_address``) for multicast only when it
   starts with "224"; any other group of 224.0.0.0/4 (239.x.y.z, the organisation-local
   scope, say) gets a broadcast socket bound without address reuse, so the adapter's
   own discovery socket cannot join beside it and the adapter never starts. Fix: the
   daemon's broadcast socket factory hands a multicast group to its multicast one.
5. The daemon keeps each offer it hears as a "found service" until that offer's TTL
   runs out, one entry per endpoint, and a method call goes to the first entry that
   matches: when a service comes back at another endpoint (a restarted ECU on a new
   port), calls go to the old, dead endpoint and time out until the old offer's TTL
   has run out. Fix: an offer replaces the found entries of the same service instance
   and major version (the newest offer is where the service is); with a daemon that
   keeps one entry per instance it removes nothing.

Started with ``EDGEBUS_SOMEIPYD_PARENT=<pid>`` (as the adapter does), the daemon exits
when that parent dies (Linux ``PR_SET_PDEATHSIG``), so a gateway killed with
``kill -9`` leaves no daemon behind.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import signal
import sys
from typing import Any

__all__ = ["PARENT_ENV", "apply_workarounds", "main"]

_PR_SET_PDEATHSIG = 1
#: The pid of the process that started the daemon, when it wants the daemon to end with it.
PARENT_ENV = "EDGEBUS_SOMEIPYD_PARENT"


def apply_workarounds() -> list[str]:
    """Patches someipy's daemon classes where the bugs are present; the names of those
    applied."""
    from someipy import someipyd
    from someipy._internal._daemon.subscription import Subscription
    from someipy._internal.message_types import MessageType
    from someipy.service import Method

    applied: list[str] = []
    if Method.__hash__ is None:

        def method_hash(self: Any) -> int:
            return hash((self.id, self.protocol))

        Method.__hash__ = method_hash
        applied.append("Method.__hash__")
    if not hasattr(Subscription, "eventgroup_id"):
        Subscription.eventgroup_id = property(lambda self: self.eventgroup.id)
        applied.append("Subscription.eventgroup_id")
    daemon_class: Any = someipyd.SomeipDaemon
    original = daemon_class._someip_message_callback
    if not getattr(original, "_edgebus_error_responses", False):

        def someip_message_callback(
            self: Any, message: Any, src_addr: Any, dst_addr: Any, protocol: Any
        ) -> None:
            if message.header.message_type == MessageType.ERROR.value:
                message.header.message_type = MessageType.RESPONSE.value
            original(self, message, src_addr, dst_addr, protocol)

        someip_message_callback._edgebus_error_responses = True  # type: ignore[attr-defined]
        daemon_class._someip_message_callback = someip_message_callback
        applied.append("ERROR responses")
    broadcast = someipyd.create_rcv_broadcast_socket
    if not getattr(broadcast, "_edgebus_multicast_groups", False):

        def receive_socket(address: str, port: int, interface: str) -> Any:
            if ipaddress.IPv4Address(address).is_multicast:
                return someipyd.create_rcv_multicast_socket(address, port, interface)
            return broadcast(address, port, interface)

        receive_socket._edgebus_multicast_groups = True  # type: ignore[attr-defined]
        someipyd.create_rcv_broadcast_socket = receive_socket
        applied.append("multicast groups beyond 224")
    handle_offer = daemon_class._handle_offered_service
    if not getattr(handle_offer, "_edgebus_newest_offer", False):

        def handle_offered_service(self: Any, offered: Any) -> None:
            self._found_services = [
                found
                for found in self._found_services
                if found == offered
                or (found.service_id, found.instance_id, found.major_version)
                != (offered.service_id, offered.instance_id, offered.major_version)
            ]
            handle_offer(self, offered)

        handle_offered_service._edgebus_newest_offer = True  # type: ignore[attr-defined]
        daemon_class._handle_offered_service = handle_offered_service
        applied.append("the newest offer replaces the older endpoints")
    return applied


def _die_with_parent() -> None:
    """SIGTERM when the parent (``$EDGEBUS_SOMEIPYD_PARENT``) dies; exits at once when
    it died before this ran."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):
        sys.exit(0)


def main() -> None:
    _die_with_parent()
    apply_workarounds()
    from someipy import someipyd

    someipyd.main()


if __name__ == "__main__":
    main()
