"""``DelayedPublisher``'s bounds: pending ``$delayed/`` messages in count and in bytes
(each message's topic, payload and properties), refusals counted, bytes given back when
a message is published."""

from __future__ import annotations

import asyncio

from broker_core.context import Context
from broker_core.delayed import DelayedPublisher
from broker_core.mqtt.properties import Properties
from broker_core.store.base import MemoryStore

NOW = 1_800_000_000.0


def test_pending_bytes_are_counted_and_bounded() -> None:
    props = Properties(user_properties=(("k", "v" * 20),))
    message = Context("d/x", b"p" * 100, 1, properties=props)
    size = len("d/x") + 100 + len(props.encoded())

    async def main() -> None:
        published: list[Context] = []
        refused: list[Context] = []
        delayed = DelayedPublisher(
            published.append, MemoryStore(), 0, on_refused=refused.append, max_bytes=2 * size
        )
        assert delayed.schedule(message, 3600, NOW) is True
        assert delayed.schedule(message, 0, NOW) is True
        assert (len(delayed), delayed.bytes) == (2, 2 * size)
        assert delayed.over_limit(message) == "max_delayed_bytes"
        assert delayed.schedule(message, 3600, NOW) is False
        assert (delayed.refused, refused) == (1, [message])
        for _ in range(3):
            await asyncio.sleep(0)  # the one due now goes out
        assert (published, len(delayed), delayed.bytes) == ([message], 1, size)
        assert delayed.schedule(message, 3600, NOW) is True
        delayed.cancel_all()
        assert (len(delayed), delayed.bytes) == (0, 0)

    asyncio.run(main())


def test_the_count_bound_comes_first() -> None:
    async def main() -> None:
        delayed = DelayedPublisher(lambda c: None, MemoryStore(), 1, max_bytes=10**6)
        message = Context("d/x", b"p", 1)
        assert delayed.schedule(message, 60, NOW) is True
        assert delayed.over_limit(message) == "max_delayed_messages"
        delayed.cancel_all()

    asyncio.run(main())
