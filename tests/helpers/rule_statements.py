"""One message and a table of rule statements run on it, with the expected output
(None: the WHERE clause rejects it): shared by the tests of the rule compiler and of the
generated functions (``gateway.rules.codegen``)."""

from __future__ import annotations

import json
from typing import Any

from broker_core.context import Context, Origin
from broker_core.mqtt.properties import Properties

__all__ = ["MESSAGE", "PAYLOAD", "TABLE"]

PAYLOAD = {
    "temp": 31.5,
    "hum": 40,
    "name": "Probe-7",
    "list": [10, 20, 30],
    "nested": {"a": {"b": "deep"}},
    "num_text": "12",
    "flag": True,
    "nothing": None,
}

MESSAGE = Context(
    "sensors/kitchen/temp",
    json.dumps(PAYLOAD).encode(),
    1,
    False,
    properties=Properties(content_type="application/json", user_properties=(("site", "n1"),)),
    origin=Origin("mqtt", "dev-1", "10.0.0.5:5000", "alice"),
    meta={"dds.type": "Temp"},
    id=42,
    received_at=1_700_000_000_123_000_000,
)

TABLE: list[tuple[str, dict[str, Any] | None]] = [
    # fields of the message
    (
        'SELECT topic, qos, retain, clientid, username FROM "sensors/#"',
        {
            "topic": "sensors/kitchen/temp",
            "qos": 1,
            "retain": False,
            "clientid": "dev-1",
            "username": "alice",
        },
    ),
    (
        'SELECT id, timestamp, origin, peerhost FROM "#"',
        {"id": 42, "timestamp": 1_700_000_000_123, "origin": "mqtt", "peerhost": "10.0.0.5"},
    ),
    (
        "SELECT meta.dds.type AS t, properties.content_type AS ct,"
        ' properties.user_properties.site AS site FROM "#"',
        {"t": "Temp", "ct": "application/json", "site": "n1"},
    ),
    # JSON payload paths
    (
        'SELECT payload.temp AS t, payload.list[1] AS second, payload.nested.a.b AS d FROM "#"',
        {"t": 31.5, "second": 20, "d": "deep"},
    ),
    ('SELECT payload.temp FROM "#"', {"payload": {"temp": 31.5}}),
    ('SELECT payload.missing AS m, payload.list[9] AS far FROM "#"', {"m": None, "far": None}),
    # comparisons, logic
    ('SELECT 1 AS x FROM "#" WHERE payload.temp > 30 AND payload.hum <= 40', {"x": 1}),
    ('SELECT 1 AS x FROM "#" WHERE payload.temp > 40 AND payload.hum <= 40', None),
    ('SELECT 1 AS x FROM "#" WHERE payload.temp > 40 OR payload.hum = 40', {"x": 1}),
    ('SELECT 1 AS x FROM "#" WHERE NOT payload.temp < 30', {"x": 1}),
    ('SELECT 1 AS x FROM "#" WHERE payload.hum != 40', None),
    ('SELECT 1 AS x FROM "#" WHERE payload.hum <> 41', {"x": 1}),
    ('SELECT 1 AS x FROM "#" WHERE payload.num_text = 12', {"x": 1}),
    ('SELECT 1 AS x FROM "#" WHERE payload.num_text > 9', {"x": 1}),
    ('SELECT 1 AS x FROM "#" WHERE payload.missing > 9', None),
    ('SELECT 1 AS x FROM "#" WHERE payload.missing IS NULL AND payload.temp IS NOT NULL', {"x": 1}),
    ('SELECT 1 AS x FROM "#" WHERE payload.flag', {"x": 1}),
    ('SELECT 1 AS x FROM "#" WHERE payload.flag = true AND payload.nothing IS NULL', {"x": 1}),
    # IN, LIKE
    ('SELECT 1 AS x FROM "#" WHERE qos IN (1, 2)', {"x": 1}),
    ('SELECT 1 AS x FROM "#" WHERE qos NOT IN (1, 2)', None),
    ("SELECT 1 AS x FROM \"#\" WHERE clientid IN ('a', 'dev-1')", {"x": 1}),
    ('SELECT 1 AS x FROM "#" WHERE payload.hum IN payload.list', None),
    ("SELECT 1 AS x FROM \"#\" WHERE topic LIKE 'sensors/%/temp'", {"x": 1}),
    ("SELECT 1 AS x FROM \"#\" WHERE topic LIKE 'sensors/_/temp'", None),
    ("SELECT 1 AS x FROM \"#\" WHERE payload.name NOT LIKE 'Probe-_'", None),
    # arithmetic and precedence
    (
        "SELECT 1 + 2 * 3 AS a, (1 + 2) * 3 AS b, 7 / 2 AS c, 8 / 2 AS d, 7 div 2 AS e,"
        ' 7 % 3 AS f, 7 mod 3 AS g, -payload.hum AS h FROM "#"',
        {"a": 7, "b": 9, "c": 3.5, "d": 4, "e": 3, "f": 1, "g": 1, "h": -40},
    ),
    ('SELECT payload.temp * 2 + 1 AS t2 FROM "#"', {"t2": 64.0}),
    (
        "SELECT 'a' + 'b' AS s, 'n=' || payload.hum AS c, payload.num_text + 1 AS n FROM \"#\"",
        {"s": "ab", "c": "n=40", "n": 13},
    ),
    # CASE
    (
        "SELECT CASE WHEN payload.temp > 40 THEN 'hot' WHEN payload.temp > 30 THEN 'warm'"
        " ELSE 'cold' END AS level FROM \"#\"",
        {"level": "warm"},
    ),
    ("SELECT CASE qos WHEN 0 THEN 'q0' WHEN 1 THEN 'q1' END AS q FROM \"#\"", {"q": "q1"}),
    ('SELECT CASE WHEN false THEN 1 END AS none FROM "#"', {"none": None}),
    # functions: strings, math, JSON, time, topics, types
    (
        "SELECT upper(payload.name) AS u, lower(payload.name) AS l, strlen(clientid) AS n,"
        " concat(clientid, '@', username) AS c, substr(topic, 0, 7) AS s,"
        " replace(topic, '/', '.') AS r, split(topic, '/') AS parts,"
        " trim('  x ') AS t FROM \"#\"",
        {
            "u": "PROBE-7",
            "l": "probe-7",
            "n": 5,
            "c": "dev-1@alice",
            "s": "sensors",
            "r": "sensors.kitchen.temp",
            "parts": ["sensors", "kitchen", "temp"],
            "t": "x",
        },
    ),
    (
        "SELECT regex_match(payload.name, '^P[a-z]+-\\d$') AS m,"
        " regex_replace(payload.name, '\\d', 'N') AS r FROM \"#\"",
        {"m": True, "r": "Probe-N"},
    ),
    (
        "SELECT abs(-3) AS a, round(payload.temp) AS r, round(2.345, 2) AS r2, ceil(1.2) AS c,"
        " floor(1.8) AS f, sqrt(16) AS s, power(2, 10) AS p, max(1, 5, 3) AS mx,"
        ' min(4, 2) AS mn FROM "#"',
        {"a": 3, "r": 32, "r2": 2.35, "c": 2, "f": 1, "s": 4.0, "p": 1024.0, "mx": 5, "mn": 2},
    ),
    (
        "SELECT json_encode(payload.nested) AS j, json_decode('{\"k\": [1]}') AS d,"
        " map_get('a.b', payload.nested) AS g, nth(2, payload.list) AS n FROM \"#\"",
        {"j": '{"a":{"b":"deep"}}', "d": {"k": [1]}, "g": "deep", "n": 20},
    ),
    (
        "SELECT unix_ts_to_rfc3339(timestamp, 'millisecond') AS t,"
        " rfc3339_to_unix_ts('2023-11-14T22:13:20Z') AS u FROM \"#\"",
        {"t": "2023-11-14T22:13:20.123Z", "u": 1_700_000_000},
    ),
    (
        "SELECT topic_level(topic, 2) AS room, topic_level(topic, -1) AS last,"
        " topic_levels(topic) AS n, topic_matches(topic, 'sensors/+/temp') AS m FROM \"#\"",
        {"room": "kitchen", "last": "temp", "n": 3, "m": True},
    ),
    (
        "SELECT int('7') AS i, float(payload.hum) AS f, bool('true') AS b, str(12) AS s,"
        " coalesce(payload.missing, 'dflt') AS c, is_num(payload.temp) AS n,"
        ' is_null(payload.missing) AS z FROM "#"',
        {"i": 7, "f": 40.0, "b": True, "s": "12", "c": "dflt", "n": True, "z": True},
    ),
    (
        "SELECT base64_encode('hi') AS e, base64_decode('aGk=') AS d, md5('a') AS h FROM \"#\"",
        {"e": "aGk=", "d": "hi", "h": "0cc175b9c0f1b6a831c399e269772661"},
    ),
    # SELECT *, aliases, an expression named by its text, quoted names
    (
        'SELECT upper(clientid), `payload`.hum AS `h` FROM "#"',
        {"upper(clientid)": "DEV-1", "h": 40},
    ),
]
