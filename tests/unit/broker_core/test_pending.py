from __future__ import annotations

from broker_core.listeners.pending import PendingSockets


def test_the_oldest_socket_without_input_makes_room() -> None:
    pending: PendingSockets[str] = PendingSockets()
    has_input = {"b"}.__contains__
    assert pending.add("tcp", "a", 3, has_input) is None
    assert pending.add("tcp", "b", 3, has_input) is None
    assert pending.add("tcp", "c", 3, has_input) is None
    assert pending.add("other", "x", 3, has_input) is None  # bounds are per listener
    assert pending.add("tcp", "d", 3, has_input) == "a"
    assert pending.add("tcp", "e", 3, has_input) == "c"  # b has its CONNECT waiting
    assert len(pending) == 4
    assert pending.remove("tcp", "b")
    assert not pending.remove("tcp", "b")
    assert not pending.remove("tcp", "a")


def test_when_every_socket_has_input_the_oldest_goes() -> None:
    pending: PendingSockets[int] = PendingSockets()
    for n in range(3):
        pending.add("tcp", n, 3, lambda s: True)
    assert pending.add("tcp", 3, 3, lambda s: True) == 0
