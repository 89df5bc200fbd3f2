"""A session state's record of its subscriptions: one held alone, several by filter."""

from __future__ import annotations

import pytest

from broker_core.context import Context
from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.packets import SubscriptionOptions
from broker_core.mqtt.properties import Properties
from broker_core.mqtt.session_state import Counters, SessionState, Subscription, message_size
from broker_core.router import Entry, Router


def new_state() -> SessionState:
    return SessionState("c", ServerLimits(), Counters())


def test_subscriptions_go_from_none_to_one_to_many_and_back() -> None:
    state = new_state()
    assert (dict(state.subscriptions), state.subscription_count) == ({}, 0)
    a = Subscription("a/#", SubscriptionOptions(1))
    state.add_subscription(a)
    assert dict(state.subscriptions) == {"a/#": a}
    assert state.subscription("a/#") is a and state.subscription("b") is None
    a2 = Subscription("a/#", SubscriptionOptions(2), 7)  # the same filter: replaced
    state.add_subscription(a2)
    assert (dict(state.subscriptions), state.subscription_count) == ({"a/#": a2}, 1)
    b, c = Subscription("b", SubscriptionOptions()), Subscription("c", SubscriptionOptions())
    state.add_subscription(b)
    state.add_subscription(c)
    assert dict(state.subscriptions) == {"a/#": a2, "b": b, "c": c}
    assert state.subscription_count == 3 and state.subscription("b") is b
    assert state.remove_subscription("x") is None
    assert state.remove_subscription("a/#") is a2
    assert state.remove_subscription("c") is c
    assert (dict(state.subscriptions), state.subscription("b")) == ({"b": b}, b)
    assert state.remove_subscription("b") is b
    assert state.remove_subscription("b") is None
    assert (dict(state.subscriptions), state.subscription_count) == ({}, 0)


def test_the_subscriptions_read_are_a_read_only_copy() -> None:
    state = new_state()
    for topic_filter in ("a", "b"):
        state.add_subscription(Subscription(topic_filter, SubscriptionOptions()))
    seen = state.subscriptions
    with pytest.raises(TypeError):
        seen["c"] = Subscription("c", SubscriptionOptions())  # type: ignore[index]
    for topic_filter in seen:  # removing while reading the copy is safe
        state.remove_subscription(topic_filter)
    assert state.subscription_count == 0


def test_the_router_entry_is_the_session_record() -> None:
    state, router = new_state(), Router()
    entry = Entry(state, "t/+", SubscriptionOptions(2, no_local=True), 5)
    assert router.add(entry) is False
    state.add_subscription(entry)
    [(subscriber, entries)] = router.match("t/1").subscribers
    assert subscriber is state and entries == (entry,)
    assert state.subscription("t/+") is entry
    assert (entry.subscription_id, entry.subscription_ids, entry.qos, entry.no_local) == (
        5,
        (5,),
        2,
        True,
    )
    assert Entry(state, "t", SubscriptionOptions()).subscription_id is None


def test_message_size_counts_topic_payload_and_properties_without_caching_them() -> None:
    # A held message counts its property block but does not keep that encoding (it would
    # hold its properties twice until it is sent); one already encoded is measured as is.
    props = Properties(user_properties=(("k", "v" * 20),))
    context = Context("a/b", b"xyz", 1, properties=props)
    block = 1 + 1 + (2 + 1) + (2 + 20)  # block length, property id, name, value
    assert message_size(context) == len("a/b") + 3 + block
    assert props._encoded is None
    props.encoded()
    assert message_size(context) == len("a/b") + 3 + block
    assert message_size(Context("a/b", b"xyz", 1)) == 6
