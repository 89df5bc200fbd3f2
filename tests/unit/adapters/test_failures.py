"""``adapters.failures.Unexpected`` and the pumps' guard it serves, without sockets:
an exception nobody foresaw is counted, logged at a bounded rate, and the next message
goes on."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from adapters.failures import Unexpected
from adapters.sockets.mapping import Inbound, Outbound
from adapters.zmq import codec
from adapters.zmq.config import ZmqInbound, ZmqOutbound
from broker_core.context import Context, Origin
from gateway.mapping import MappingError

LOGGER = "test.adapters.failures"
ORIGIN = Origin("zmq", "floor")


def test_the_first_of_each_place_and_type_with_its_traceback_then_now_and_then(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    unexpected = Unexpected(logging.getLogger(LOGGER))
    for i in range(1, 1001):
        try:
            raise ValueError(f"bad {i}")
        except ValueError as exc:
            unexpected(exc, "zmq %s: %s failed; dropped", "floor", "in")
    try:
        raise KeyError("k")
    except KeyError as exc:
        unexpected(exc, "zmq %s: %s failed; dropped", "floor", "in")
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "zmq floor: in failed; dropped (ValueError: bad 1)",
        "zmq floor: in failed; dropped (ValueError: bad 10; 10 such errors so far)",
        "zmq floor: in failed; dropped (ValueError: bad 100; 100 such errors so far)",
        "zmq floor: in failed; dropped (ValueError: bad 1000; 1000 such errors so far)",
        "zmq floor: in failed; dropped (KeyError: 'k')",  # another type: the first again
    ]
    assert [r.exc_info is not None for r in errors] == [True, False, False, False, True]
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(debug) == 1000 - 4


def test_a_message_that_fails_unexpectedly_is_counted_and_the_next_one_published() -> None:
    config = ZmqInbound.model_validate(
        {"socket": "pull", "bind": "ipc:///x", "to_mqtt": "in/{zmq.topic}"}
    )
    mapping = Inbound(config, "in")
    published: list[str] = []

    def publish(context: Context) -> bool:
        if context.topic == "in/boom":
            raise OverflowError("int too big to convert")  # as the broker raised
        published.append(context.topic)
        return True

    hub = SimpleNamespace(publish=publish, origin=ORIGIN, refusal="")  # a HubClient's face
    for topic in (b"boom", b"ok"):
        mapping.take([topic, b"x"], codec.decode, hub)  # type: ignore[arg-type]
    assert published == ["in/ok"]
    counters = mapping.counters
    assert (counters.received, counters.published, counters.failed) == (2, 1, 1)


def test_a_native_topic_that_is_no_unicode_text_does_not_fit() -> None:
    config = ZmqOutbound.model_validate(
        {"socket": "push", "bind": "ipc:///x", "from_mqtt": "p/#", "topic": "t/{payload.id}"}
    )
    mapping = Outbound(config, "out")
    surrogate = json.dumps({"id": "\ud800"}).encode()
    with pytest.raises(MappingError, match="the topic is not UTF-8 text"):
        mapping.native(Context("p/a", surrogate))
    assert mapping.native(Context("p/a", b'{"id": "ok"}')) == (b"t/ok", b'{"id": "ok"}')
