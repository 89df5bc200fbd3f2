"""The ``stream:`` section: its extensions and their errors."""

from __future__ import annotations

import textwrap

import pytest

from gateway.config import ConfigError, parse_config


def _parse(text: str):  # type: ignore[no-untyped-def]
    return parse_config(textwrap.dedent(text), "edgebus.yaml", env={})


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        _parse(text)
    return caught.value.problems


def test_the_stream_section() -> None:
    stream = _parse(
        """\
        stream:
          enabled: true
          topics: ["sensors/#", "robots/+/odom"]
          origins: [mqtt, loopback, dds]
          retention: 2h
          max_bytes: 512MB
          segment_bytes: 16MB
          fsync: interval
          fsync_interval: 200ms
          queue_size: 5000
        """
    ).stream
    assert stream.enabled and stream.topics == ("sensors/#", "robots/+/odom")
    assert stream.origins == ("mqtt", "loopback", "dds")
    assert (stream.retention, stream.max_bytes, stream.segment_bytes) == (7200.0, 512e6, 16e6)
    assert (stream.fsync, stream.fsync_interval, stream.queue_size) == ("interval", 0.2, 5000)
    assert _parse("").stream.origins is None  # every origin
    assert _parse("").stream.fsync == "always"


def test_an_unknown_origin_is_named() -> None:
    (problem,) = _problems("stream:\n  origins: [mqtt, mqqt]\n")
    assert problem.startswith("edgebus.yaml:2 stream.origins[1]: expected an origin protocol (")
    assert problem.endswith("got 'mqqt'")


def test_the_log_holds_at_least_one_segment() -> None:
    (problem,) = _problems("stream:\n  max_bytes: 1MB\n  segment_bytes: 4MB\n")
    assert problem == (
        "edgebus.yaml:2 stream.max_bytes: max_bytes (1MB) must be at least segment_bytes (4MB)"
    )
    (problem,) = _problems("stream:\n  enabled: true\n  segment_bytes: 2GB\n")
    assert problem == (
        "edgebus.yaml:3 stream.segment_bytes: max_bytes (1GiB) must be at least"
        " segment_bytes (2GB)"
    )


def test_a_bad_fsync_policy() -> None:
    (problem,) = _problems("stream:\n  fsync: sometimes\n")
    assert problem == (
        "edgebus.yaml:2 stream.fsync: expected one of always, interval, never, got 'sometimes'"
    )
