"""What sessions report about application messages: delivered, acknowledged, dropped.

These are the broker events (``broker_core.observe``) that happen inside the protocol
layer. A session or session state holds one ``MessageObserver`` (the broker's
``Observers``) and tests its flag before it builds anything: ``message_delivered``,
``message_acked`` and ``message_dropped`` are truthy only while someone observes that
kind of event, so when nobody does, a delivery costs one attribute test; then it calls
``report_delivered``, ``report_acked`` or ``report_dropped``. ``UNOBSERVED`` (nothing watched) is
the default of a session built on its own, as in unit tests.

``client`` is the ``Session`` the message went to (``client.origin`` names it); a drop
names the client id and user name of the session it was for, or None when it was for
no session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from broker_core.context import Context

__all__ = ["UNOBSERVED", "MessageObserver"]


class MessageObserver(Protocol):
    message_delivered: Any  # truthy while someone observes MessageDelivered
    message_acked: Any  # ... MessageAcked
    message_dropped: Any  # ... MessageDropped

    def report_delivered(
        self, client: Any, context: Context, qos: int, retain: bool, now: float
    ) -> None: ...

    def report_acked(
        self, client: Any, context: Context, qos: int, packet_id: int, now: float
    ) -> None: ...

    def report_dropped(
        self,
        context: Context,
        reason: str,
        client_id: str | None,
        username: str | None,
        now: float | None,
    ) -> None: ...


class _Unobserved:
    """Nobody watches: every flag is false and nothing is ever called."""

    __slots__ = ()

    message_delivered = message_acked = message_dropped = ()

    def report_delivered(
        self, client: Any, context: Context, qos: int, retain: bool, now: float
    ) -> None:
        return None

    def report_acked(
        self, client: Any, context: Context, qos: int, packet_id: int, now: float
    ) -> None:
        return None

    def report_dropped(
        self,
        context: Context,
        reason: str,
        client_id: str | None,
        username: str | None,
        now: float | None,
    ) -> None:
        return None


UNOBSERVED: MessageObserver = _Unobserved()
