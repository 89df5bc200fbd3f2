"""``Unexpected``: what every adapter's pump does with an exception nobody foresaw.

A pump handles the failures it foresees with a counter of its own (a message that does
not fit its mapping: ``malformed_*``, ``failed``). Anything else raised while one
message is handled (a bug of ours, a library's surprise) must not end the pump: the
adapter would restart and lose what it holds in flight. The pump catches it, counts it
in its own counter, calls its ``Unexpected`` and goes on with the next message.
``Unexpected`` logs at ERROR with the traceback the first time for each place (the log
message) and exception type, then again at the 10th, 100th and every 1000th (with the
count, without the traceback), and at DEBUG otherwise, so that a stream of such messages
cannot flood the log. A ``try`` costs nothing in CPython 3.11 while nothing raises: the
guard is free on the hot path.
"""

from __future__ import annotations

import logging

__all__ = ["Unexpected"]

_KINDS_KEPT = 1000  # bounded: places times exception types seen


class Unexpected:
    """Logs the unforeseen exceptions of one adapter's pumps at a bounded rate."""

    __slots__ = ("_counts", "_logger")

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._counts: dict[tuple[str, type[BaseException]], int] = {}

    def __call__(self, exc: BaseException, message: str, *args: object) -> None:
        """Logs ``exc``, caught while a message was handled; ``message % args`` says
        where (the adapter, the mapping) and ends with what became of the message."""
        key = (message, type(exc))
        counts = self._counts
        count = counts.get(key, 0) + 1
        if count == 1 and len(counts) >= _KINDS_KEPT:
            counts.clear()
        counts[key] = count
        logger = self._logger
        if count == 1:
            logger.error(message + " (%s: %s)", *args, type(exc).__name__, exc, exc_info=exc)
        elif count in (10, 100) or count % 1000 == 0:
            logger.error(
                message + " (%s: %s; %d such errors so far)", *args, type(exc).__name__, exc,
                count,
            )  # fmt: skip
        elif logger.isEnabledFor(logging.DEBUG):
            logger.debug(message + " (%s: %s)", *args, type(exc).__name__, exc)
