"""The observer registry: one tuple per kind, undo, and observers that raise."""

from __future__ import annotations

import pytest

from broker_core.broker import Broker
from broker_core.context import Context, Origin
from broker_core.observe import (
    EVENT_KINDS,
    ClientConnected,
    MessageDropped,
    MessagePublish,
    Observers,
)


def connected(client_id: str = "c") -> ClientConnected:
    return ClientConnected(client_id, "u", "127.0.0.1:1", 5, 60, True, 0, False, "tcp", 1.0)


def test_every_kind_starts_unobserved() -> None:
    observers = Observers()
    assert [observers.observed(kind) for kind in EVENT_KINDS] == [False] * len(EVENT_KINDS)
    assert observers.message_delivered == observers.client_connected == ()
    assert len({kind.NAME for kind in EVENT_KINDS}) == len(EVENT_KINDS) == 13


def test_observe_emit_and_undo() -> None:
    observers = Observers()
    seen: list[object] = []
    undo = observers.observe((ClientConnected, MessagePublish), seen.append)
    assert observers.client_connected == observers.message_publish == (seen.append,)
    event = connected()
    observers.emit(event)
    observers.emit(MessageDropped("queue_full", "c", None, Context("t", b"x"), 2.0))  # unwatched
    assert seen == [event]
    undo()
    assert observers.client_connected == observers.message_publish == ()
    observers.emit(connected())
    assert seen == [event]


def test_an_observer_that_raises_is_counted_and_the_others_still_run() -> None:
    observers = Observers()
    seen: list[object] = []

    def boom(event: object) -> None:
        raise ValueError("bug")

    observers.observe(ClientConnected, boom)
    observers.observe(ClientConnected, seen.append)
    observers.emit(connected())
    assert (observers.errors, len(seen)) == (1, 1)


def test_message_events_read_the_envelope() -> None:
    context = Context("a/b", b"hi", 1, True, origin=Origin("mqtt", "pub", "1.2.3.4:5", "al"))
    event = MessagePublish(context, 3.0)
    assert (event.topic, event.payload, event.qos, event.retain) == ("a/b", b"hi", 1, True)
    assert (event.from_client_id, event.from_username, event.peer) == ("pub", "al", "1.2.3.4:5")
    assert event.message_id == context.id
    assert event.publish_received_at == pytest.approx(context.received_at / 1e9)


def test_only_broker_events_can_be_observed() -> None:
    with pytest.raises(ValueError, match="not a broker event"):
        Observers().observe(Context, print)  # type: ignore[arg-type]


def test_message_hooks_get_every_routed_context_before_the_publish_observers() -> None:
    broker = Broker()
    observers = broker.observers
    seen: list[object] = []
    hooked: list[Context] = []
    other: list[Context] = []  # equal to `hooked` while both are empty: undo by identity

    def boom(context: Context) -> None:
        raise ValueError("bug")

    observers.observe(MessagePublish, lambda event: seen.append(("event", event.message)))
    undo = observers.hook_messages(hooked.append)
    observers.hook_messages(boom)
    undo_other = observers.hook_messages(other.append)
    observers.hook_messages(lambda context: seen.append(("hook", context)))
    first = Context("a/b", b"1", origin=Origin("mqtt", "pub"))
    second = Context("$SYS/x", b"2", 1, True, origin=Origin("sys", "edgebus"))
    assert broker.publish(first) == 0  # nobody subscribed: hooked all the same
    broker.publish(second)
    assert hooked == other == [first, second]
    assert seen == [("hook", first), ("event", first), ("hook", second), ("event", second)]
    assert observers.errors == 2  # the hook that raised, once per message; the rest ran
    undo_other()
    assert other.append not in observers.message_hooks
    assert hooked.append in observers.message_hooks
    undo()
    broker.publish(Context("a/c", b"3"))
    assert hooked == [first, second]
    assert len(observers.message_hooks) == 2
