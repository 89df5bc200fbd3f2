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


class Batched(Participant):
    """A participant whose barriers of one batch complete together (``batch``)."""

    def __init__(self) -> None:
        super().__init__()
        self.batch = 0

    def commit(self, ok: bool = True) -> None:
        self.batch += 1
        super().commit(ok)


def test_callbacks_on_one_batch_of_one_participant_share_a_barrier_in_order() -> None:
    store, queue = Participant(), Batched()
    acks = Acknowledgements(store)
    acks.add(queue)
    order: list[tuple[str, bool]] = []
    queue.pending = 1
    for name in ("a1", "a2", "a3"):
        acks.after("a", lambda ok, name=name: order.append((name, ok)))
    acks.after("b", lambda ok: order.append(("b1", ok)))
    assert len(queue.barriers) == 2  # one per owner
    assert (acks.held("a"), acks.held("b")) == (3, 1)
    queue.commit()
    queue.pending = 1
    acks.after("a", lambda ok: order.append(("a4", ok)))  # the next batch: a barrier of its own
    store.pending = 1
    acks.after("a", lambda ok: order.append(("a5", ok)))  # the store too: not joined
    assert len(queue.barriers) == 2
    queue.commit(ok=False)
    store.commit()
    assert order == [
        ("a1", True),
        ("a2", True),
        ("a3", True),
        ("b1", True),
        ("a4", False),
        ("a5", False),
    ]
    assert acks.held("a") == 0
