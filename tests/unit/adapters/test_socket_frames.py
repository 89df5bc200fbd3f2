"""The ``prefix`` frame layout shared by the ZeroMQ and NNG codecs."""

from __future__ import annotations

import pytest

from adapters.sockets.frames import join_prefixed, prefix_order, split_prefixed
from gateway.mapping import MappingError


@pytest.mark.parametrize(
    ("frame", "delimiter", "prefixes", "expected"),
    [
        # NanoMQ's NNG bridge: remote_topic + "/" + payload, the topic subscribed.
        (b"remote/nng/hello", b"/", ["remote/nng"], (b"remote/nng", b"hello")),
        (b"remote/nng/a/b", b"/", ["remote/nng"], (b"remote/nng", b"a/b")),
        # Without a known topic the first delimiter ends it.
        (b"sensors:21.5", b":", [""], (b"sensors", b"21.5")),
        (b"a/b:c:d", b":", [], (b"a/b", b"c:d")),
        # A prefix shorter than the topic: the search starts after it.
        (b"sensors/t:1", b":", ["sensors/"], (b"sensors/t", b"1")),
        # The longest matching prefix wins.
        (b"ab/cd/x", b"/", ["ab", "ab/cd"], (b"ab/cd", b"x")),
        # NanoMQ's sub_pre: no delimiter, the topic is the prefix itself.
        (b"pre-fix{json}", b"", ["pre-fix"], (b"pre-fix", b"{json}")),
        (b"t:", b":", [], (b"t", b"")),
        (b"t::x", b"::", [], (b"t", b"x")),
    ],
)
def test_split(
    frame: bytes, delimiter: bytes, prefixes: list[str], expected: tuple[bytes, bytes]
) -> None:
    assert split_prefixed(frame, delimiter, prefix_order(prefixes)) == expected


@pytest.mark.parametrize(
    ("frame", "delimiter", "prefixes"),
    [
        (b"no-delimiter", b":", []),
        (b":empty-topic", b":", []),
        (b"other", b"", ["pre"]),  # no prefix matched, no delimiter: empty topic
    ],
)
def test_frames_without_a_topic_are_refused(
    frame: bytes, delimiter: bytes, prefixes: list[str]
) -> None:
    with pytest.raises(MappingError):
        split_prefixed(frame, delimiter, prefix_order(prefixes))


def test_join_is_the_inverse_of_split() -> None:
    frame = join_prefixed(b"remote/nng", b"/", b"payload/with/slashes")
    assert frame == b"remote/nng/payload/with/slashes"
    assert split_prefixed(frame, b"/", prefix_order(["remote/nng"])) == (
        b"remote/nng",
        b"payload/with/slashes",
    )


def test_prefix_order_is_longest_first_without_duplicates() -> None:
    assert prefix_order(["a", "abc", "ab", "a"]) == (b"abc", b"ab", b"a")
