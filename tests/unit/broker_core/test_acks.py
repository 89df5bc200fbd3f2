"""Acknowledgements wait for every durable participant and keep each owner's order."""

from __future__ import annotations

from collections.abc import Callable

from broker_core.acks import Acknowledgements


class Participant:
    """A store whose barriers complete when the test says so."""

    def __init__(self) -> None:
        self.pending = 0
        self.barriers: list[Callable[[bool], None]] = []

    def barrier(self, callback: Callable[[bool], None]) -> None:
        self.barriers.append(callback)

    def commit(self, ok: bool = True) -> None:
        self.pending = 0
        barriers, self.barriers = self.barriers, []
        for callback in barriers:
            callback(ok)


def test_nothing_pending_calls_back_at_once() -> None:
    store = Participant()
    acks = Acknowledgements(store)
    got: list[bool] = []
    assert acks.idle()
    acks.after("session", got.append)
    assert got == [True]
    assert acks.held("session") == 0


def test_waits_for_the_store_and_every_participant_with_pending_writes() -> None:
    store, tap, idle_tap = Participant(), Participant(), Participant()
    acks = Acknowledgements(store)
    acks.add(tap)
    acks.add(idle_tap)
    store.pending = tap.pending = 1
    assert not acks.idle()
    got: list[bool] = []
    acks.after("session", got.append)
    assert idle_tap.barriers == []  # nothing pending there: not waited for
    store.commit()
    assert got == []
    tap.commit()
    assert got == [True]


def test_one_owner_is_called_back_in_order_when_barriers_complete_out_of_order() -> None:
    store, slow, fast = Participant(), Participant(), Participant()
    acks = Acknowledgements(store)
    acks.add(slow)
    acks.add(fast)
    order: list[str] = []
    slow.pending = 1
    acks.after("a", lambda ok: order.append("a1"))  # waits for slow
    slow.pending = 0
    fast.pending = 1
    acks.after("a", lambda ok: order.append("a2"))  # waits for fast only
    acks.after("b", lambda ok: order.append("b1"))  # another owner, also on fast
    fast.commit()
    assert order == ["b1"]  # a2 is ready but waits behind a1
    assert acks.held("a") == 2
    slow.commit()
    assert order == ["b1", "a1", "a2"]
    assert acks.held("a") == 0


def test_a_later_callback_with_nothing_pending_still_waits_for_earlier_ones() -> None:
    store = Participant()
    acks = Acknowledgements(store)
    order: list[str] = []
    store.pending = 1
    acks.after("a", lambda ok: order.append("first"))
    store.pending = 0
    acks.after("a", lambda ok: order.append("second"))
    assert order == []
    store.commit()
    assert order == ["first", "second"]


def test_a_failed_write_is_reported_and_removed_participants_are_not_waited_for() -> None:
    store, tap = Participant(), Participant()
    acks = Acknowledgements(store)
    acks.add(tap)
    acks.add(tap)  # two taps sharing one store
    tap.pending = 1
    got: list[bool] = []
    acks.after("a", got.append)
    assert len(tap.barriers) == 1
    tap.commit(ok=False)
    assert got == [False]
    acks.remove(tap)
    assert list(acks.participants) == [tap]
    acks.remove(tap)
    assert not acks.participants
    tap.pending = 1
    assert acks.idle()
