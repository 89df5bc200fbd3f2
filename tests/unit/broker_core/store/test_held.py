"""``HeldWrites``: a loop turn's store writes wait for durable participants, in order."""

from __future__ import annotations

from collections.abc import Callable

from broker_core.store.held import HeldWrites


class Participant:
    """A durable participant whose commits the test makes."""

    def __init__(self) -> None:
        self.pending = 1
        self.waiting: list[Callable[[bool], None]] = []

    def barrier(self, callback: Callable[[bool], None]) -> None:
        self.waiting.append(callback)

    def commit(self, ok: bool = True) -> None:
        waiting, self.waiting = self.waiting, []
        for callback in waiting:
            callback(ok)


class Writes:
    def __init__(self) -> None:
        self.submitted: list[list[object]] = []
        self.dropped = 0
        self.held = HeldWrites(self.submitted.append, self._drop)

    def _drop(self, count: int) -> None:
        self.dropped += count

    def turn(self, ops: list[object]) -> None:
        """The store's ``_flush``: what is not held is submitted at once."""
        if not self.held.flush(ops):
            self.submitted.append(ops)


def test_nothing_held_goes_at_once() -> None:
    writes = Writes()
    writes.turn(["a"])
    assert writes.submitted == [["a"]]


def test_a_held_turn_and_the_turns_after_it_wait_for_the_participant_in_order() -> None:
    writes = Writes()
    log = Participant()
    record = ("incoming", ("c", 1))
    answers: list[bool] = []
    writes.held.hold(record, [log]).barrier(answers.append)
    writes.turn(["queued", record])
    writes.turn(["later"])
    assert writes.submitted == []
    assert answers == []
    log.commit()
    assert writes.submitted == [["queued", record], ["later"]]
    assert answers == [True]
    writes.turn(["after"])
    assert writes.submitted[-1] == ["after"]


def test_a_failed_participant_leaves_the_record_out_and_the_rest_in() -> None:
    writes = Writes()
    log = Participant()
    record = ("incoming", ("c", 1))
    answers: list[bool] = []
    writes.held.hold(record, [log]).barrier(answers.append)
    writes.turn(["queued", record])
    log.commit(ok=False)
    assert writes.submitted == [["queued"]]
    assert writes.dropped == 1
    assert answers == [False]


def test_every_participant_is_waited_for() -> None:
    writes = Writes()
    log, queue = Participant(), Participant()
    record = ("incoming", ("c", 2))
    writes.held.hold(record, [log, queue])
    writes.turn([record])
    log.commit()
    assert writes.submitted == []
    queue.commit()
    assert writes.submitted == [[record]]


def test_participants_that_answered_within_the_turn_hold_nothing_back() -> None:
    writes = Writes()
    log = Participant()
    record = ("incoming", ("c", 3))
    writes.held.hold(record, [log])
    log.commit()
    writes.turn([record])
    assert writes.submitted == [[record]]


def test_a_later_turn_committed_first_still_waits_behind() -> None:
    writes = Writes()
    first, second = Participant(), Participant()
    one, two = ("incoming", ("c", 1)), ("incoming", ("c", 2))
    writes.held.hold(one, [first])
    writes.turn([one])
    writes.held.hold(two, [second])
    writes.turn([two])
    second.commit()
    assert writes.submitted == []
    first.commit()
    assert writes.submitted == [[one], [two]]


def test_release_all_hands_everything_over_in_order() -> None:
    writes = Writes()
    log = Participant()
    record = ("incoming", ("c", 1))
    writes.held.hold(record, [log])
    writes.turn([record])
    writes.turn(["later"])
    writes.held.release_all()
    assert writes.submitted == [[record], ["later"]]
