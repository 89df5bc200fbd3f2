"""A resumed session gives its new owner nothing the ACL denies that owner.

A client that connects with clean start 0 takes over the session stored under its
client id, whoever created it: the MQTT specifications tie a session to a client id,
not to a user. Before the session is attached, every subscription it holds is checked
again as a SUBSCRIBE of the new owner (its username, client id and address), and every
message queued or in flight to it as a read of its topic (a SUBSCRIBE of the topic
name). What the owner may not have is removed: denied subscriptions leave the router,
the session and the store; denied messages are dropped and counted
(``Counters.dropped_not_authorized``). Shared subscriptions are judged by their inner
filter, as on SUBSCRIBE.

Checking on every resume, not only when the username changed, also covers ACL rules by
address (``ipaddress``) and an ACL reloaded while the client was away.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from broker_core.acl import SUBSCRIBE, Acl
from broker_core.context import Origin
from broker_core.mqtt.session_state import Delivery, SessionState

if TYPE_CHECKING:
    from broker_core.observe import Observers
    from broker_core.router import Router
    from broker_core.store.base import Store

__all__ = ["restrict_to_owner"]


def restrict_to_owner(
    state: SessionState,
    owner: Origin,
    acl: Acl,
    router: Router,
    store: Store,
    observers: Observers | None = None,
) -> tuple[int, int]:
    """Removes what ``owner`` may not read; returns (subscriptions, messages) removed.

    Each dropped message is a ``MessageDropped`` (``not_authorized``) for ``observers``.
    """
    denied: list[Delivery] = []
    removed = 0
    for topic_filter in state.subscriptions:  # a copy
        if acl.allows(owner, SUBSCRIBE, topic_filter):
            continue
        router.unsubscribe(state, topic_filter)
        state.remove_subscription(topic_filter)
        if state.journal is not None:
            store.subscription_deleted(state, topic_filter)
        removed += 1
    dropped = 0
    kept: deque[Delivery] = deque()
    for delivery in state.queue or ():
        if acl.allows(owner, SUBSCRIBE, delivery.context.topic):
            kept.append(delivery)
        else:
            size = delivery.size
            state.queued_bytes -= size
            state.counters.queued_bytes -= size
            state.discard(delivery)
            denied.append(delivery)
            dropped += 1
    if dropped:
        state.queue = kept
    for packet_id, delivery in list(state.outgoing.items()):
        # A QoS 2 message already released only has its PUBREL left: no content to leak.
        if not delivery.released and not acl.allows(owner, SUBSCRIBE, delivery.context.topic):
            state.complete(packet_id)
            denied.append(delivery)
            dropped += 1
    state.counters.dropped_not_authorized += dropped
    if observers is not None and observers.message_dropped:
        for delivery in denied:
            observers.report_dropped(
                delivery.context, "not_authorized", state.client_id, owner.username, None
            )
    return removed, dropped
