"""adapters.dds.matching: remote endpoints that differ from ours in key-ness."""

from __future__ import annotations

import uuid

import pytest

from adapters.dds import matching
from adapters.dds.matching import KeyWatch, keyed_of, partitions_meet


def guid(n: int, kind: int) -> uuid.UUID:
    return uuid.UUID(bytes=bytes([1, 16]) + n.to_bytes(10, "big") + bytes([0, 0, 1, kind]))


def test_entity_kinds_say_whether_the_type_has_a_key() -> None:
    assert [keyed_of(guid(1, kind)) for kind in (0x02, 0x03, 0x04, 0x07)] == [
        True, False, False, True]
    assert keyed_of(guid(1, 0xC2)) is None  # a builtin writer
    assert keyed_of(b"short") is None


def test_a_remote_endpoint_found_after_ours_and_gone() -> None:
    watch = KeyWatch()
    assert watch.local("dds_to_mqtt[0]", "speed", "reader", "vehicle::Speed", True) == []
    writer = guid(1, 0x03)
    [found] = watch.remote(writer, "speed", "writer", "vehicle::Speed")
    assert found.reason() == ("dds_to_mqtt[0] 'speed': remote writer of vehicle::Speed is "
                              "keyless, vehicle::Speed is keyed (never matched)")
    assert watch.remote(writer, "speed", "writer", "vehicle::Speed") == []  # announced again
    assert watch.remote(guid(2, 0x02), "speed", "writer", "vehicle::Speed") == []  # keyed
    assert watch.remote(guid(3, 0x04), "speed", "reader", "x::Y") == []  # a reader: not ours
    assert watch.remote(guid(4, 0x03), "other", "writer", "x::Y") == []  # another topic
    assert watch.mismatches == [found]
    assert watch.gone(writer) is True
    assert watch.mismatches == []
    assert watch.gone(writer) is False


def test_a_remote_endpoint_found_before_ours() -> None:
    watch = KeyWatch()
    assert watch.remote(guid(1, 0x07), "cmd", "reader", "other::Keyed") == []
    [found] = watch.local("mqtt_to_dds[2]", "cmd", "writer", "m::Plain", False)
    assert found.log_message().startswith(
        "mqtt_to_dds[2] topic 'cmd': a remote reader's type other::Keyed is keyed, our "
        "writer's type m::Plain is keyless; DDS never matches")
    assert watch.local("x", "cmd", "writer", "m::Plain", None) == []  # unknown: not checked


def test_remote_endpoints_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(matching, "MAX_REMOTE", 2)
    watch = KeyWatch()
    watch.local("dds_to_mqtt[0]", "t", "reader", "T", True)
    for n in range(3):
        watch.remote(guid(n, 0x03), "t", "writer", "T")
    assert len(watch.mismatches) == 2  # the oldest forgotten


def test_partitions() -> None:
    assert partitions_meet((), ())
    assert partitions_meet((), ("",))
    assert not partitions_meet((), ("site1",))
    assert partitions_meet(("site*",), ("site1",))
    assert partitions_meet(("site1", "x"), ("site?",))
    assert not partitions_meet(("site*",), ("s*",))  # two patterns
    assert not partitions_meet(("a",), ("b",))


def test_a_remote_endpoint_in_no_partition_of_ours_is_left_out() -> None:
    watch = KeyWatch(("site1",))
    watch.local("dds_to_mqtt[0]", "t", "reader", "T", True)
    assert watch.remote(guid(1, 0x03), "t", "writer", "T") == []  # default partition
    assert watch.remote(guid(2, 0x03), "t", "writer", "T", ("site2",)) == []
    assert len(watch.remote(guid(3, 0x03), "t", "writer", "T", ("site*",))) == 1
