"""The compiled stream encoder writes the very bytes of the Python one, in the same
parts, for every layout its shortcuts handle; ``EDGEBUS_PURE_PYTHON=1`` picks the
Python one, and an install with a C compiler has the compiled one built in place."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from broker_core.context import Context, Origin
from broker_core.mqtt.properties import EMPTY, Properties
from spark_sink import records
from tests.helpers.timeouts import unit
from tests.unit.spark_sink.conftest import NOT_BUILT

REPO_ROOT = Path(__file__).resolve().parents[3]


def _origins(layout: str, count: int) -> list[Origin]:
    """``one``, ``runs``, ``interleaved``, ``copies`` (equal, not the same object),
    ``many-runs`` (more runs than the Python encoder follows one by one)."""
    clients = [Origin("mqtt", f"client-{n}") for n in range(3)] + [Origin("dds", "dómain")]
    if layout == "one":
        return [clients[0]] * count
    if layout == "runs":
        cut = max(count - 20, 0)
        return ([clients[0]] * 10 + [clients[3]] * 7 + [clients[0]] * 3 + [clients[2]] * cut)[
            :count
        ]
    if layout == "interleaved":
        return [clients[n % 4] for n in range(count)]
    if layout == "copies":
        return [Origin("mqtt", "client-0") for _ in range(count)]
    return [clients[(n // 2) % 4] for n in range(count)]


def _batch(layout: str, sizes: str, count: int, extras: bool) -> list[Context]:
    origins = _origins(layout, count)

    def payload(n: int) -> bytes:
        return {"equal": b"%04d" % n, "varied": b"p" * (n % 5), "empty": b""}[sizes]

    def topic(n: int) -> str:
        return {"equal": f"t/{n % 10}", "varied": f"t/{n}/é\udcff", "empty": ""}[sizes]

    contexts = []
    for n in range(count):
        properties = EMPTY
        meta: dict[str, object] = {}
        if extras and n % 5 == 1:
            properties = Properties(content_type="application/json", correlation_data=b"\x01")
        if extras and n % 7 == 2:
            meta = {"dds.count": n, "unicode": "é"}
        if extras and n % 11 == 3:
            properties = Properties()  # equal to EMPTY, not the same object
        context = Context(topic(n), payload(n), n % 3, n % 4 == 0, properties, origins[n])
        if meta:
            context = Context(
                context.topic, context.payload, context.qos, context.retain, properties,
                origins[n], meta,
            )  # fmt: skip
        contexts.append(context)
    return contexts


def _compiled() -> Callable[..., records.Encoded]:
    if records.compiled_encode_columns is None:
        pytest.skip(NOT_BUILT)
    return records.compiled_encode_columns


@pytest.mark.parametrize("count", [0, 1, 2, 3, 120, 700])
@pytest.mark.parametrize("layout", ["one", "runs", "interleaved", "copies", "many-runs"])
@pytest.mark.parametrize("sizes", ["equal", "varied", "empty"])
@pytest.mark.parametrize("extras", [False, True], ids=["plain", "properties-meta"])
def test_both_encoders_write_the_same_bytes(
    count: int, layout: str, sizes: str, extras: bool
) -> None:
    compiled = _compiled()
    contexts = _batch(layout, sizes, count, extras)
    for _ in range(2):  # the second time from the Python encoder's caches
        expected = records.python_encode_columns(contexts)
        got = compiled(contexts)
        assert got.parts == expected.parts
        assert (got.count, got.ts_max, got.size) == (expected.count, expected.ts_max, expected.size)
        assert records.frame(9, got) == records.frame(9, expected)
    if count:
        decoded = records.decode_batch(records.frame(0, got) + b"".join(got.parts))
        assert [decoded.string("topic", r) for r in range(count)] == [c.topic for c in contexts]


def test_both_encoders_take_the_callers_topics_and_payloads() -> None:
    """The log's hook hands its own topic and payload lists (and the topics joined)."""
    compiled = _compiled()
    contexts = _batch("runs", "varied", 64, True)
    topics = [c.topic for c in contexts]
    payloads = [c.payload for c in contexts]
    for joined in (None, "".join(topics)):
        expected = records.python_encode_columns(contexts, topics, joined, payloads)
        assert compiled(contexts, topics, joined, payloads).parts == expected.parts


class _Derived(Context):
    """Not a ``Context`` exactly: the compiled encoder reads its fields by name."""

    __slots__ = ()


def test_the_compiled_encoder_reads_slots_and_names_alike() -> None:
    compiled = _compiled()
    from spark_sink import _records

    assert _records.reads_slots()  # a Context's fields from its slots
    contexts = _batch("runs", "varied", 60, True)
    mixed = [
        _Derived(c.topic, c.payload, c.qos, c.retain, c.properties, c.origin, c.meta, c.id, 7)
        if n % 3 == 0
        else c
        for n, c in enumerate(contexts)
    ]
    assert compiled(mixed).parts == records.python_encode_columns(mixed).parts


def test_both_encoders_refuse_the_same_bad_values() -> None:
    """A QoS no byte holds: an error from each, nothing half written."""
    compiled = _compiled()
    contexts = [Context("t", b"x", 300, False, origin=Origin("mqtt", "c"))]
    with pytest.raises(ValueError):
        records.python_encode_columns(contexts)
    with pytest.raises(OverflowError):  # a ValueError too
        compiled(contexts)


def _encoder_in_a_new_process(value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "EDGEBUS_PURE_PYTHON"}
    if value is not None:
        env["EDGEBUS_PURE_PYTHON"] = value
    done = subprocess.run(
        [sys.executable, "-c", "from spark_sink import records as r; "
         "print(r.encode_columns is r.python_encode_columns, r.PURE_PYTHON)"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=unit(60), check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_the_environment_forces_the_python_encoder() -> None:
    assert _encoder_in_a_new_process("1") == "True True"
    assert _encoder_in_a_new_process("0") == _encoder_in_a_new_process(None)
    built = records.compiled_encode_columns is not None
    assert _encoder_in_a_new_process(None) == f"{not built} False"


def test_an_install_with_a_compiler_builds_the_encoder_where_it_is_imported() -> None:
    """``make test`` installs gcc and the package in editable mode: the extension is
    built next to records.py, from which it is imported (not a copy elsewhere)."""
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine: the optional extension is not built")
    from spark_sink import _records

    assert Path(_records.__file__).parent == Path(records.__file__).parent
    assert records.compiled_encode_columns is _records.encode_columns
