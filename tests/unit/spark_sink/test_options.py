"""The Spark source's options and the job's arguments, checked before Spark starts."""

from __future__ import annotations

import argparse

import pytest

from spark_sink.job import parse_args, parse_trigger, progress_line
from spark_sink.options import OptionError, SourceOptions


def test_options_with_their_defaults() -> None:
    options = SourceOptions.parse({"gateway": "http://127.0.0.1:8081"})
    assert options == SourceOptions(gateway="http://127.0.0.1:8081")
    assert (options.topic, options.starting, options.partition_rows) == ("#", "earliest", 100_000)
    assert options.fail_on_data_loss is True


def test_option_names_are_case_insensitive() -> None:
    options = SourceOptions.parse(
        {
            "GATEWAY": "http://gw:8081",
            "apikey": "k" * 20,
            "startingOffsets": "42",
            "MaxRowsPerBatch": "1000",
            "failOnDataLoss": "false",
            "topic": "sensors/#",
            "startOffset": "5",
            "endOffset": "10",
        }
    )
    assert options.api_key == "k" * 20
    assert (options.starting, options.max_rows_per_batch) == (42, 1000)
    assert (options.start_offset, options.end_offset) == (5, 10)
    assert options.fail_on_data_loss is False and options.topic == "sensors/#"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "option gateway: required"),
        ({"gateway": "g", "maxRowsPerBatch": "ten"}, "maxRowsPerBatch: expected an integer"),
        ({"gateway": "g", "maxRowsPerBatch": "0"}, "maxRowsPerBatch: expected at least 1"),
        ({"gateway": "g", "startingOffsets": "soon"}, "startingOffsets: expected an integer"),
        ({"gateway": "g", "failOnDataLoss": "maybe"}, "failOnDataLoss: expected true or false"),
    ],
)
def test_bad_options_are_named(given: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        SourceOptions.parse(given)


def test_triggers() -> None:
    assert parse_trigger("availableNow") == {"availableNow": True}
    assert parse_trigger("5s") == {"processingTime": "5000 milliseconds"}
    assert parse_trigger("500ms") == {"processingTime": "500 milliseconds"}
    assert parse_trigger("1m") == {"processingTime": "60000 milliseconds"}
    with pytest.raises(argparse.ArgumentTypeError, match="expected a period"):
        parse_trigger("often")


def test_job_arguments() -> None:
    args = parse_args(["--gateway", "http://gw:8081", "--out", "o", "--checkpoint", "c"])
    assert args.trigger == {"processingTime": "5000 milliseconds"}
    assert args.master is None and args.topic == "#"
    with pytest.raises(SystemExit):
        parse_args(["--out", "o", "--checkpoint", "c"])  # --gateway is required


def test_one_progress_line_per_batch() -> None:
    progress = {
        "batchId": 3,
        "numInputRows": 1200,
        "processedRowsPerSecond": 2400.4,
        "batchDuration": 500,
        "sources": [{"startOffset": '{"offset":4800}', "endOffset": {"offset": 6000}}],
    }
    assert (
        progress_line(progress) == "batch 3: 1200 rows, offsets 4800 -> 6000, 2400 rows/s, 500 ms"
    )
    first = {"batchId": 0, "numInputRows": 5, "durationMs": {"triggerExecution": 9}}
    assert progress_line(first) == "batch 0: 5 rows, offsets - -> -, 0 rows/s, 9 ms"
