"""Availability states from service discovery entries (pure, times given)."""

from __future__ import annotations

from adapters.someip.availability import (
    EXPIRED,
    INCOMPATIBLE,
    OFFERED,
    STOPPED,
    UNKNOWN,
    Availability,
    Watched,
)


def test_offer_stop_expire() -> None:
    tracker = Availability([Watched(0x1234, 1, 1)])
    assert tracker.status(0x1234, 1).state == UNKNOWN
    assert tracker.offered(0x9999, 1, 1, 0, 3, "x", now=0.0) is None  # not watched
    offered = tracker.offered(0x1234, 1, 1, 0, 3, "127.0.0.2:30501", now=10.0)
    assert offered is not None
    assert (offered.state, offered.endpoint, offered.deadline) == (OFFERED, "127.0.0.2:30501", 13.0)
    # A renewed offer changes nothing but the deadline.
    assert tracker.offered(0x1234, 1, 1, 0, 3, "127.0.0.2:30501", now=12.0) is None
    assert tracker.next_deadline() == 15.0
    assert tracker.expire(14.9) == []
    (expired,) = tracker.expire(15.0)
    assert expired.state == EXPIRED
    assert tracker.next_deadline() is None
    assert tracker.unavailable() == [expired]
    # Offered again at another endpoint, then stopped (an offer with TTL 0).
    assert tracker.offered(0x1234, 1, 1, 0, 3, "127.0.0.2:30600", now=20.0) is not None
    stopped = tracker.offered(0x1234, 1, 1, 0, 0, None, now=21.0)
    assert stopped is not None and stopped.state == STOPPED
    assert tracker.stopped(0x1234, 1, now=22.0) is None  # already stopped
    assert tracker.expire(100.0) == []


def test_a_changed_endpoint_or_version_is_a_change() -> None:
    tracker = Availability([Watched(1, 1, 1)])
    tracker.offered(1, 1, 1, 0, 5, "a:1", now=0.0)
    assert tracker.offered(1, 1, 1, 0, 5, "a:2", now=1.0) is not None
    assert tracker.offered(1, 1, 1, 3, 5, "a:2", now=1.0) is not None  # any minor version


def test_an_offer_of_another_version_is_incompatible() -> None:
    tracker = Availability([Watched(1, 1, 1), Watched(2, 1, 1, minor_version=4)])
    seen = tracker.offered(1, 1, 2, 0, 5, "a:1", now=0.0)
    assert seen is not None
    assert (seen.state, seen.major_version, seen.deadline) == (INCOMPATIBLE, 2, 5.0)
    assert tracker.unavailable() == [seen, tracker.status(2, 1)]
    # The configured minor version only.
    assert tracker.offered(2, 1, 1, 3, 5, "b:1", now=0.0).state == INCOMPATIBLE  # type: ignore[union-attr]
    assert tracker.offered(2, 1, 1, 4, 5, "b:1", now=0.0).state == OFFERED  # type: ignore[union-attr]
    # The configured version replaces it; another version then changes nothing, nor
    # does a StopOffer of another version.
    assert tracker.offered(1, 1, 1, 0, 5, "a:2", now=1.0).state == OFFERED  # type: ignore[union-attr]
    assert tracker.offered(1, 1, 2, 0, 5, "a:1", now=2.0) is None
    assert tracker.stopped(1, 1, 2.0, major_version=2, minor_version=0) is None
    assert tracker.offered(1, 1, 2, 0, 0, "a:1", now=2.0) is None
    assert tracker.status(1, 1).state == OFFERED
    # An incompatible offer expires and stops like any other.
    tracker.stopped(1, 1, 3.0, major_version=1, minor_version=0)
    assert tracker.offered(1, 1, 2, 0, 5, "a:1", now=4.0) is not None
    (expired,) = [s for s in tracker.expire(9.0) if s.service_id == 1]
    assert (expired.state, expired.major_version) == (EXPIRED, 2)


def test_an_infinite_ttl_never_expires() -> None:
    tracker = Availability([Watched(1, 1, 1)])
    tracker.offered(1, 1, 1, 0, 0xFFFFFF, None, now=0.0)
    assert tracker.next_deadline() is None
    assert tracker.expire(1e12) == []
