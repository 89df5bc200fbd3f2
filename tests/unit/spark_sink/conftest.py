"""The stream log's record tests run against both encoders (``spark_sink.records``):
the Python one and the compiled one (``spark_sink/_records.pyx``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from spark_sink import records, segments

NOT_BUILT = (
    "the compiled encoder spark_sink/_records.pyx is not built in this install "
    "(an optional extension: no C compiler or Python headers when it was installed)"
)


@pytest.fixture(params=["python", "compiled"])
def encoder(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., records.Encoded]:
    """The encoder the log uses during the test: each of the two in turn."""
    encode = {
        "python": records.python_encode_columns,
        "compiled": records.compiled_encode_columns,
    }[request.param]
    if encode is None:
        pytest.skip(NOT_BUILT)
    monkeypatch.setattr(records, "encode_columns", encode)
    monkeypatch.setattr(segments, "encode_columns", encode)
    return encode
