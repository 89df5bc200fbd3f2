"""The sqlite rule action in a running gateway when a row cannot be written as it is: an
integer beyond SQLite's 64-bit range is stored, and a row that cannot be written at all
loses only itself, not the other rows (of any rule or table) written in the same batch,
and counts ``failed`` on its own action."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest

from tests.helpers.gateway import RunningGateway
from tests.helpers.small_fs import fill, small_filesystem
from tests.helpers.timeouts import unit
from tests.integration.broker.support import PahoClient, wait_until
from tests.integration.rules.support import gateway_with_clients

UINT64_MAX = 2**64 - 1
INT64_MAX = 2**63 - 1
BELOW_INT64 = -(2**63) - 1


def _rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    """What ``sql`` reads from the gateway's database now (nothing before the table exists)."""
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        try:
            return db.execute(sql).fetchall()
        except sqlite3.OperationalError:  # not created yet
            return []


def _actions(gw: RunningGateway) -> dict[str, tuple[int, int]]:
    """Each rule's sqlite action as (succeeded, failed)."""

    def read() -> dict[str, tuple[int, int]]:
        return {
            status["name"]: (status["actions"][0]["succeeded"], status["actions"][0]["failed"])
            for status in gw.gateway.rules.statuses()
        }

    return gw.call(read)


def _burst(client: PahoClient, topic: str, payloads: list[bytes]) -> None:
    """Publishes ``payloads`` back to back (one batch for the gateway's writer, as far as
    the network lets it), then waits until each was acknowledged."""
    infos = [client.client.publish(topic, payload, qos=1) for payload in payloads]
    for info in infos:
        assert info.rc == mqtt.MQTT_ERR_SUCCESS
        info.wait_for_publish(unit(10))
        assert info.is_published()


def test_an_integer_beyond_64_bits_is_stored_and_its_batch_kept(tmp_path: Path) -> None:
    config = """
rules:
  - name: store
    sql: SELECT payload.n AS n, payload.tag AS tag FROM "t/#"
    actions: [{type: sqlite, table: rows}]
  - name: other
    sql: SELECT topic FROM "t/#"
    actions: [{type: sqlite, table: other_rows}]
  - name: wide
    sql: SELECT payload.n AS n FROM "wide/#"
    actions: [{type: sqlite, table: wide}]
  - name: ids
    sql: SELECT payload.id AS id FROM "ids/#"
    actions: [{type: sqlite, table: ids}]
"""
    database = tmp_path / "data" / "rules.db"
    database.parent.mkdir(parents=True)
    with sqlite3.connect(database) as db:  # a table made beforehand, its id without a type
        db.execute("CREATE TABLE ids (id, _at INTEGER)")
    with gateway_with_clients(tmp_path, config) as (gw, clients):
        device = clients.connect(4, "dds-bridge")
        device.publish("t/a", json.dumps({"n": 1, "tag": "first"}), qos=1)
        wait_until(lambda: _rows(database, "SELECT n FROM rows") == [(1,)], what="the first row")
        values = [(2, "before"), (UINT64_MAX, "uint64 max"), (INT64_MAX, "int64 max"),
                  (BELOW_INT64, "below int64"), (3, "after")]  # fmt: skip
        _burst(device, "t/a", [json.dumps({"n": n, "tag": tag}).encode() for n, tag in values])
        wait_until(
            lambda: (
                _actions(gw) == {"store": (6, 0), "other": (6, 0), "wide": (0, 0), "ids": (0, 0)}
            ),
            what="every row counted as written",
        )
        # n is an INTEGER column (its first value was 1): SQLite's affinity turns the text
        # of an integer beyond 64 bits into its nearest REAL; the rows around it are there.
        assert _rows(database, "SELECT n, typeof(n), tag FROM rows ORDER BY _rowid") == [
            (1, "integer", "first"),
            (2, "integer", "before"),
            (float(UINT64_MAX), "real", "uint64 max"),
            (INT64_MAX, "integer", "int64 max"),
            (float(BELOW_INT64), "real", "below int64"),
            (3, "integer", "after"),
        ]
        assert _rows(database, "SELECT count(*) FROM other_rows") == [(6,)]

        # A column such a value creates is TEXT: every digit is kept.
        device.publish("wide/a", json.dumps({"n": UINT64_MAX}), qos=1)
        device.publish("wide/a", json.dumps({"n": 7}), qos=1)
        wait_until(lambda: _actions(gw)["wide"] == (2, 0), what="the wide rows counted")
        assert _rows(database, "SELECT n, typeof(n) FROM wide ORDER BY _rowid") == [
            (str(UINT64_MAX), "text"),
            ("7", "text"),
        ]
        assert _rows(database, "SELECT type FROM pragma_table_info('wide') WHERE name = 'n'") == [
            ("TEXT",)
        ]

        # A column without a type keeps integers as integers and the digits of the rest.
        device.publish("ids/a", json.dumps({"id": 5}), qos=1)
        device.publish("ids/a", json.dumps({"id": UINT64_MAX}), qos=1)
        wait_until(lambda: _actions(gw)["ids"] == (2, 0), what="the ids rows counted")
        assert _rows(database, "SELECT id, typeof(id) FROM ids ORDER BY rowid") == [
            (5, "integer"),
            (str(UINT64_MAX), "text"),
        ]


def test_a_row_that_cannot_be_written_loses_only_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = """
rules:
  - name: strs
    sql: SELECT payload.k AS k, payload.s AS s FROM "u/#"
    actions: [{type: sqlite, table: strs}]
  - name: copy
    sql: SELECT payload.k AS k FROM "u/#"
    actions: [{type: sqlite, table: copies}]
"""
    caplog.set_level(logging.WARNING, logger="gateway.rules")
    database = tmp_path / "data" / "rules.db"
    with gateway_with_clients(tmp_path, config) as (gw, clients):
        device = clients.connect(5, "dev-1")
        device.publish("u/a", json.dumps({"k": 1, "s": "ok"}), qos=1)
        wait_until(lambda: _actions(gw) == {"strs": (1, 0), "copy": (1, 0)}, what="the first rows")
        # k=3 holds a lone surrogate (valid JSON, "\ud800"), which no SQLite text can hold.
        _burst(
            device,
            "u/a",
            [b'{"k": 2, "s": "a"}', b'{"k": 3, "s": "\\ud800"}', b'{"k": 4, "s": "b"}'],
        )
        wait_until(
            lambda: _actions(gw) == {"strs": (3, 1), "copy": (4, 0)},
            what="each row counted on its own action",
        )
        assert _rows(database, "SELECT k, s FROM strs ORDER BY _rowid") == [
            (1, "ok"),
            (2, "a"),
            (4, "b"),
        ]
        assert _rows(database, "SELECT k FROM copies ORDER BY _rowid") == [(1,), (2,), (3,), (4,)]

        # One warning, naming the rule, the action, the table and the reason.
        warnings = [r.getMessage() for r in caplog.records if r.name == "gateway.rules.actions"]
        assert len(warnings) == 1
        assert warnings[0].startswith("rule strs: action sqlite failed (1 so far): table strs: ")
        assert "surrogates not allowed" in warnings[0]
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_full_disk_fails_the_rows_it_reaches_and_the_writer_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    small = tmp_path / "small"
    caplog.set_level(logging.WARNING, logger="gateway.rules")
    with small_filesystem(small, 1 << 20):
        database = small / "rules.db"
        config = f"""
rules:
  - name: big
    sql: SELECT payload.k AS k, payload.s AS s FROM "f/#"
    actions: [{{type: sqlite, table: big, database: "{database}"}}]
  - name: copy
    sql: SELECT payload.k AS k FROM "f/#"
    actions: [{{type: sqlite, table: copies, database: "{database}"}}]
"""
        with gateway_with_clients(tmp_path, config) as (gw, clients):
            device = clients.connect(4, "dev-1")
            device.publish("f/a", json.dumps({"k": 0, "s": "x"}), qos=1)
            wait_until(lambda: _actions(gw) == {"big": (1, 0), "copy": (1, 0)}, what="a row")
            filler = fill(small)
            text = "y" * 20_000  # more pages than the log file already holds
            _burst(device, "f/a", [json.dumps({"k": k, "s": text}).encode() for k in (1, 2, 3)])
            wait_until(
                lambda: _actions(gw) == {"big": (1, 3), "copy": (1, 3)},
                what="the rows counted as failed",
            )
            warnings = [r.getMessage() for r in caplog.records if r.name == "gateway.rules.actions"]
            assert sorted(warnings) == [
                "rule big: action sqlite failed (1 so far): table big: "
                "OperationalError: database or disk is full",
                "rule copy: action sqlite failed (1 so far): table copies: "
                "OperationalError: database or disk is full",
            ]

            filler.unlink()
            device.publish("f/a", json.dumps({"k": 4, "s": "z"}), qos=1)
            wait_until(lambda: _actions(gw) == {"big": (2, 3), "copy": (2, 3)}, what="recovery")
            assert _rows(database, "SELECT k FROM big ORDER BY _rowid") == [(0,), (4,)]
            assert _rows(database, "SELECT k FROM copies ORDER BY _rowid") == [(0,), (4,)]
