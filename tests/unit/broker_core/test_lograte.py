from __future__ import annotations

import logging

import pytest

from broker_core.lograte import RateLimitedLog


def test_lines_beyond_the_rate_are_left_out_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.lograte")
    caplog.set_level(logging.INFO, logger="test.lograte")
    limited = RateLimitedLog(logger, rate=1.0, burst=3.0)
    for n in range(10):
        limited.info(100.0, "refused %d", n)
    limited.info(102.0, "refused %d", 10)  # two seconds later: room again
    assert [r.getMessage() for r in caplog.records] == [
        "refused 0",
        "refused 1",
        "refused 2",
        "refused 10 (7 similar lines left out)",
    ]


def test_warnings_share_the_rate_and_keep_their_level(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.lograte.warn")
    caplog.set_level(logging.WARNING, logger="test.lograte.warn")
    limited = RateLimitedLog(logger, rate=1.0, burst=1.0)
    limited.info(100.0, "below the level")  # not logged, takes no token
    limited.warning(100.0, "bad %s", "a")
    limited.warning(100.0, "bad %s", "b")
    limited.warning(101.0, "bad %s", "c")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "bad a"),
        (logging.WARNING, "bad c (1 similar lines left out)"),
    ]
