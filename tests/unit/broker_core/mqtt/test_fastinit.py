from __future__ import annotations

import dataclasses

import pytest

from broker_core.context import Context, Origin, new_context
from broker_core.mqtt.fastinit import frozen_factory
from broker_core.mqtt.packets import Publish, new_publish
from broker_core.mqtt.properties import EMPTY


def test_factory_builds_ordinary_frozen_instances() -> None:
    origin = Origin("mqtt", "c")
    fast = new_context("a/b", b"x", 1, True, EMPTY, origin, {}, 7, 9)
    slow = Context("a/b", b"x", 1, True, EMPTY, origin, {}, 7, 9)
    assert type(fast) is Context
    assert fast == slow
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.topic = "c"  # type: ignore[misc]
    assert dataclasses.replace(fast, topic="c").topic == "c"
    assert new_publish("t", b"p", 0, False, False, None, EMPTY, None) == Publish("t", b"p")


def test_only_frozen_slotted_dataclasses() -> None:
    @dataclasses.dataclass(slots=True)
    class Mutable:
        a: int

    with pytest.raises(TypeError):
        frozen_factory(Mutable)
