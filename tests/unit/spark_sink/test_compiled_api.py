"""A compiled stream encoder built from an older source (a checkout updated without
``make``) is not used: its arguments differ, and the stream would fail on its first
append. The Python encoder takes its place, with a warning to rebuild."""

from __future__ import annotations

import sys
import types

import pytest

import spark_sink
from spark_sink import records


def test_a_compiled_encoder_of_another_api_is_not_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stale = types.ModuleType("spark_sink._records")
    stale.encode_columns = lambda contexts: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "spark_sink._records", stale)
    monkeypatch.setattr(spark_sink, "_records", stale, raising=False)
    with caplog.at_level("WARNING", logger="spark_sink.records"):
        assert records._compiled() is None
    assert "older source" in caplog.text


def test_the_built_encoder_has_this_source_api() -> None:
    if records.compiled_encode_columns is None:
        pytest.skip("the compiled encoder is not built here (no C compiler)")
    from spark_sink import _records

    assert _records.API == records._COMPILED_API
