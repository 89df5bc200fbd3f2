"""A resumed session keeps only what its new owner may read (issue 8.1)."""

from __future__ import annotations

from broker_core.acl import AclRule, RuleAcl
from broker_core.context import Context, Origin
from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.packets import SubscriptionOptions
from broker_core.mqtt.session_state import Counters, Delivery, SessionState
from broker_core.resume import restrict_to_owner
from broker_core.router import Entry, Router
from broker_core.store.base import MemoryStore

ACL = RuleAcl([AclRule(allow=False, topics=("secret/#",), username="mallory")])


def session_of_admin() -> tuple[SessionState, Router]:
    state = SessionState("console", ServerLimits(), Counters())
    router = Router()
    for topic_filter in ("secret/#", "$share/g/secret/x", "public/#", "#"):
        entry = Entry(state, topic_filter, SubscriptionOptions(1))
        router.add(entry)
        state.add_subscription(entry)
    for topic in ("secret/a", "public/a", "secret/b"):
        state.enqueue(Delivery(Context(topic, b"x", 1), 1, False, ()))
    for topic in ("secret/c", "public/c"):
        state.track(Delivery(Context(topic, b"x", 1), 1, False, ()))
    released = Delivery(Context("secret/d", b"x", 2), 2, False, ())
    state.track(released)
    state.release(released)
    return state, router


def test_what_the_new_owner_may_not_read_is_removed() -> None:
    state, router = session_of_admin()
    mallory = Origin("mqtt", "console", "10.0.0.9:5000", "mallory")
    removed, dropped = restrict_to_owner(state, mallory, ACL, router, MemoryStore())
    assert sorted(state.subscriptions) == ["public/#"]
    assert removed == 3  # "#" overlaps the denied secret/#
    assert [t for t, _ in router.match("secret/a").subscribers] == []
    assert [d.context.topic for d in state.queue or ()] == ["public/a"]
    assert state.queued_bytes == len("public/a") + 1  # its topic and payload
    assert sorted(d.context.topic for d in state.outgoing.values()) == ["public/c", "secret/d"]
    # In flight: what is left (one refused one completed), and all sessions' count.
    assert state.inflight_bytes == len("public/c") + 1 + len("secret/d") + 1
    assert state.counters.inflight_bytes == state.inflight_bytes
    assert state.counters.queued_bytes == state.queued_bytes
    assert dropped == 3
    assert state.counters.dropped_not_authorized == 3


def test_an_owner_allowed_everything_keeps_everything() -> None:
    state, router = session_of_admin()
    admin = Origin("mqtt", "console", "10.0.0.1:5000", "admin")
    assert restrict_to_owner(state, admin, ACL, router, MemoryStore()) == (0, 0)
    assert len(state.subscriptions) == 4
    assert len(state.queue or ()) == 3
