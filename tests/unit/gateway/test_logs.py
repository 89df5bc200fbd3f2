"""``JsonFormatter``: one JSON object per record, on one line, whatever the message."""

from __future__ import annotations

import json
import logging
import sys

from gateway.config import LoggingConfig
from gateway.logs import JsonFormatter, log_handler


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    name, level = "broker_core.broker", logging.WARNING
    made = logging.LogRecord(name, level, __file__, 1, message, args, None)
    made.created = 1_800_000_000.25
    made.__dict__.update(extra)
    return made


def test_the_fields_of_a_line() -> None:
    line = JsonFormatter().format(record("client %s refused", "c1", client_id="c1"))
    assert json.loads(line) == {
        "time": "2027-01-15T08:00:00.250Z",
        "level": "WARNING",
        "logger": "broker_core.broker",
        "message": "client c1 refused",
        "client_id": "c1",
    }


def test_no_client_id_when_the_record_has_none() -> None:
    assert "client_id" not in json.loads(JsonFormatter().format(record("started")))


def test_newlines_and_non_ascii_stay_on_one_ascii_line() -> None:
    line = JsonFormatter().format(record("two\nlines for cl\u00efent \udcff", client_id="\u00e9"))
    assert "\n" not in line
    assert line.isascii()
    assert json.loads(line)["message"] == "two\nlines for cl\u00efent \udcff"


def test_an_exception_is_one_field() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        failed = record("failed")
        failed.exc_info = sys.exc_info()
    entry = json.loads(JsonFormatter().format(failed))
    assert entry["exception"].startswith("Traceback (most recent call last):")
    assert entry["exception"].endswith("ValueError: boom")


def test_the_handler_the_config_asks_for() -> None:
    assert isinstance(log_handler(LoggingConfig(format="json")).formatter, JsonFormatter)
    plain = log_handler(LoggingConfig())
    assert type(plain) is logging.StreamHandler
    assert not isinstance(plain.formatter, JsonFormatter)
