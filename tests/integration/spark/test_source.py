"""The ``edgebus`` PySpark source in a local Spark session, against a running gateway.

MQTT clients and the loopback adapter publish; the stream log records; Spark reads it
(streaming and batch) into Parquet and memory sinks; every message arrives once, with
its fields. One Spark session serves the module (it takes 10-20 s to start).
"""

from __future__ import annotations

import base64
import datetime
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.components import SINK
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.integration.api.support import KEY
from tests.integration.broker.support import Clients, publish_props
from tests.integration.components.support import status_of, wait_for
from tests.integration.spark.support import committed_rows, spark_session
from tests.integration.stream.support import LOOPBACK, STREAM, http_of, offsets_of, records_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[3]

CONFIG = STREAM + LOOPBACK


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from spark_session()


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[RunningGateway]:
    with running_gateway(tmp_path, CONFIG) as gw:
        wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
        yield gw


def _options(gw: RunningGateway, **more: Any) -> dict[str, str]:
    return {"gateway": http_of(gw).base, "apiKey": KEY, **{k: str(v) for k, v in more.items()}}


def _publish_mix(gw: RunningGateway) -> int:
    """MQTT QoS 0/1 (with MQTT 5 properties, binary payloads) and loopback republications;
    returns how many records the log gets."""
    clients = Clients(gw)
    try:
        pub = clients.connect(5, "spark-pub")
        props = publish_props(ContentType="application/json", UserProperty=[("unit", "C")])
        for n in range(60):
            payload = f'{{"value": {n}}}'.encode()
            pub.publish(f"sensors/{n % 3}/t", payload, qos=1, properties=props if n % 2 else None)
        for n in range(20):
            pub.publish("bin/x", bytes([n, 0xFF, 0]), qos=0, retain=n == 19)
        for n in range(10):
            pub.publish(f"raw/room{n}", f'{{"n": {n}}}'.encode(), qos=1)
    finally:
        clients.close_all()
    total = 60 + 20 + 10 + 10
    wait_for(lambda: offsets_of(http_of(gw))["end"], lambda end: end == total)
    return total


def _from_api(record: dict[str, Any]) -> dict[str, Any]:
    """A JSON line of the API in the form Parquet gives it back."""
    ts = datetime.datetime.fromisoformat(record["ts"].replace("Z", "+00:00"))
    return {
        **record,
        "ts": ts,
        "payload": base64.b64decode(record["payload"]),
        "properties": sorted(record["properties"].items()),
        "meta": sorted(record["meta"].items()),
    }


def test_mqtt_and_an_adapter_into_parquet_every_message_once(
    spark: Any, gateway: RunningGateway, tmp_path: Path
) -> None:
    total = _publish_mix(gateway)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = (
        spark.readStream.format("edgebus")
        .options(**_options(gateway, maxRowsPerBatch=30, partitionRows=20))
        .load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert [p["numInputRows"] for p in query.recentProgress] == [30, 30, 30, 10]
    rows = sorted(committed_rows(out), key=lambda row: row["offset"])
    assert [row["offset"] for row in rows] == list(range(total))  # each once
    expected = [_from_api(record) for record in records_of(http_of(gateway))]
    for row, want in zip(rows, expected, strict=True):
        row = {**row, "properties": sorted(row["properties"]), "meta": sorted(row["meta"])}
        assert row == want
    protocols = {row["protocol"]: row for row in rows}
    assert set(protocols) == {"mqtt", "loopback"}
    adapted = protocols["loopback"]
    assert (adapted["source"], adapted["topic"]) == ("units", "rooms/room9")
    assert adapted["meta"] == [("loopback.source", "raw/room9")]
    first = rows[1]  # sensors/1/t, with properties
    assert (first["content_type"], first["payload_json"]) == ("application/json", '{"value": 1}')
    assert first["properties"] == [("unit", "C")]
    assert rows[79]["retain"] is True and rows[79]["payload_json"] is None


def test_a_running_query_reads_what_arrives(spark: Any, gateway: RunningGateway) -> None:
    clients = Clients(gateway)
    query = None
    try:
        pub = clients.connect(5, "live-pub")
        query = (
            spark.readStream.format("edgebus")
            .options(**_options(gateway, topic="live/#"))
            .load()
            .writeStream.format("memory")
            .queryName("live")
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        for round_ in range(3):
            for n in range(10):
                pub.publish(f"live/{round_}", str(n).encode(), qos=1)
                pub.publish("elsewhere", b"x", qos=0)  # filtered out by the gateway
            query.processAllAvailable()
            count = spark.sql("SELECT count(*) AS n FROM live").collect()[0]["n"]
            assert count == 10 * (round_ + 1)
        offsets = [row["offset"] for row in spark.sql("SELECT offset FROM live").collect()]
        assert sorted(offsets) == list(range(0, 60, 2))
    finally:
        if query is not None:
            query.stop()
        clients.close_all()


def test_batch_reads_of_a_range(spark: Any, gateway: RunningGateway) -> None:
    _publish_mix(gateway)

    def reader(**options: Any) -> Any:  # a DataFrameReader keeps its options: one per read
        return spark.read.format("edgebus").options(**_options(gateway, **options))

    rows = reader(startOffset=10, endOffset=40, partitionRows=7).load().collect()
    assert sorted(row["offset"] for row in rows) == list(range(10, 40))
    sensors = reader(topic="sensors/2/+").load().select("topic").collect()
    assert {row["topic"] for row in sensors} == {"sensors/2/t"}
    assert len(sensors) == 20
    assert reader().load().count() == 100


def test_records_deleted_by_retention_fail_the_read_unless_allowed(
    spark: Any, tmp_path: Path
) -> None:
    config = STREAM + "  segment_bytes: 4096\n  max_bytes: 8192\n"
    with running_gateway(tmp_path, config) as gw:
        wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
        clients = Clients(gw)
        try:
            pub = clients.connect(5, "retention-pub")
            for n in range(300):
                pub.publish("ret/t", str(n).rjust(50).encode(), qos=1)
        finally:
            clients.close_all()
        start = offsets_of(http_of(gw))["start"]
        assert start > 0
        options = _options(gw, startOffset=0)
        with pytest.raises(Exception, match="deleted by the gateway's retention"):
            spark.read.format("edgebus").options(**options).load().collect()
        rows = (
            spark.read.format("edgebus").options(**options, failOnDataLoss="false").load().collect()
        )
        assert sorted(row["offset"] for row in rows) == list(range(start, 300))


def test_wrong_credentials_stop_the_query_with_a_clear_error(
    spark: Any, gateway: RunningGateway
) -> None:
    options = {**_options(gateway), "apiKey": "not-the-key-0123456789"}
    with pytest.raises(Exception, match=r"refused the credentials \(401\)"):
        spark.read.format("edgebus").options(**options).load().collect()
    query = (
        spark.readStream.format("edgebus")
        .options(**options)
        .load()
        .writeStream.format("memory")
        .queryName("refused")
        .start()
    )
    with pytest.raises(Exception, match="refused the credentials"):
        query.awaitTermination(60)


def _example(section: str) -> str:
    """The first Python block of ``section`` in docs/spark.md, as printed."""
    text = (ROOT / "docs" / "spark.md").read_text()
    body = text.split(f"## {section}\n", 1)[1]
    match = re.search(r"```python\n(.*?)```", body, re.S)
    assert match is not None
    return match.group(1)


def test_the_windowed_aggregation_example_runs_as_printed(
    spark: Any, gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    clients = Clients(gateway)
    try:
        pub = clients.connect(5, "example-pub")
        for n in range(30):
            pub.publish("sensors/1/t", f'{{"value": {20 + n * 0.1:.1f}}}'.encode(), qos=1)
            pub.publish("sensors/2/t", f'{{"value": {21 + n * 0.1:.1f}}}'.encode(), qos=1)
        pub.publish("other/t", b'{"value": 99}', qos=1)
    finally:
        clients.close_all()
    monkeypatch.setenv("EDGEBUS_GATEWAY", http_of(gateway).base)
    monkeypatch.setenv("EDGEBUS_API_KEY", KEY)
    exec(compile(_example("A windowed aggregation"), "docs/spark.md", "exec"), {})
    rows = spark.sql(
        "SELECT topic, sum(messages) AS n, sum(mean * messages) AS total"
        " FROM per_topic GROUP BY topic ORDER BY topic"
    ).collect()
    assert [(row["topic"], row["n"]) for row in rows] == [("sensors/1/t", 30), ("sensors/2/t", 30)]
    assert [round(row["total"] / row["n"], 2) for row in rows] == [21.45, 22.45]
    shown = capsys.readouterr().out
    assert "|sensors/1/t|" in shown and "messages" in shown
    assert os.environ["EDGEBUS_GATEWAY"].startswith("http://127.0.0.1:")
