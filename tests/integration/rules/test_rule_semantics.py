"""The values of rule expressions, through ``POST /api/v1/rules/test`` of a running
gateway (which runs a statement as the taps run it on a message): numeric text, integer
division, functions, as EMQX's rule language gives them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.check_command import QUIET, check
from tests.helpers.gateway import running_gateway
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.api.support import Http


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Http]:
    with running_gateway(tmp_path_factory.mktemp("semantics"), API_CONFIG) as gw:
        yield http_of(gw)


def run(http: Http, select: str, payload: Any = None, where: str = "") -> dict[str, Any]:
    """The /rules/test answer for ``SELECT <select> FROM "t/#" [WHERE ...]`` on a message
    to t/1 with ``payload``."""
    sql = f'SELECT {select} FROM "t/#"' + (f" WHERE {where}" if where else "")
    sample: dict[str, Any] = {"topic": "t/1"}
    if payload is not None:
        sample["payload"] = payload
    reply = http.post("/api/v1/rules/test", {"sql": sql, "sample": sample})
    assert reply.status == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


def output(http: Http, select: str, payload: Any = None) -> dict[str, Any]:
    answer = run(http, select, payload)
    assert answer["error"] is None, answer
    result: dict[str, Any] = answer["output"]
    return result


def test_only_plain_decimal_text_is_a_number(http: Http) -> None:
    """Python's float() takes ' 5 ', 'inf', 'nan', 'Infinity', '1_000': numeric text
    here is an optional sign, digits, an optional fraction and exponent."""
    assert output(
        http,
        "'5' = 5 AS a, '-1.5e1' = -15 AS b, '.5' = 0.5 AS c, '7' + 1 AS d,"
        " ' 5 ' = 5 AS e, '1_000' = 1000 AS f, 'Infinity' + 1 AS g, '0x10' = 16 AS h,"
        " 'nan' + 1 AS i, ' 7 ' + 1 AS j",
    ) == {
        "a": True, "b": True, "c": True, "d": 8,
        "e": False, "f": False, "g": "Infinity1", "h": False, "i": "nan1", "j": " 7 1",
    }  # fmt: skip
    for text in ("inf", "1_000", " 5 ", "NaN", "Infinity"):
        for select in ("int(payload.v) AS v", "payload.v * 2 AS v"):
            answer = run(http, select, {"v": text})
            assert answer["error"] == f"not a number: {text!r}", answer


def test_integers_that_divide_evenly_divide_exactly(http: Http) -> None:
    """Above 2**53 a float cannot hold every integer: 2**62 + 2 over 2 went through a
    float and came back as 2**61 (off by one)."""
    big = 2**62 + 2
    assert output(http, "payload.n / 2 AS half, payload.n / 4 AS quarter", {"n": big}) == {
        "half": big // 2,
        "quarter": big / 4,
    }
    assert output(http, "18446744073709551615 / 5 AS a, -9 / 3 AS b, 7 / 2 AS c") == {
        "a": 3689348814741910323,
        "b": -3,
        "c": 3.5,
    }


def test_format_date_applies_its_offset(http: Http) -> None:
    assert output(
        http,
        "format_date('second', '+08:00', '%H', 0) AS a, format_date('second', 3600, '%H', 0)"
        " AS b, format_date('millisecond', '-02:30', '%Y-%m-%d %H:%M', 0) AS c,"
        " format_date('second', 'Z', '%H:%M', 0) AS d, format_date('second', '+0530', '%H:%M',"
        " 0) AS e",
    ) == {"a": "08", "b": "01", "c": "1969-12-31 21:30", "d": "00:00", "e": "05:30"}
    answer = run(http, "format_date('second', 'Mars', '%H', 0) AS x")
    assert answer["error"] == "bad time offset 'Mars': 'Z', '+08:00', '-02:30', 'local' or seconds"


def test_mod_is_a_function_and_an_operator(http: Http) -> None:
    assert output(http, "mod(7, 2) AS a, 7 MOD 2 AS b, 7 mod mod(5, 3) AS c, mod(payload.n, 4)"
                  " AS d", {"n": 10}) == {"a": 1, "b": 1, "c": 1, "d": 2}  # fmt: skip


def test_check_accepts_the_mod_function(tmp_path: Path) -> None:
    rules = """\
rules:
  - name: parity
    sql: 'SELECT mod(payload.n, 2) AS parity FROM "s/#" WHERE mod(payload.n, 2) = 1'
    actions: [{type: log}]
"""
    assert check(tmp_path, QUIET + rules) == (0, ["edgebus.yaml: OK"])


def test_round_is_half_away_from_zero(http: Http) -> None:
    """EMQX's round is Erlang's: 2.5 gives 3 (Python's round gives 2)."""
    assert output(
        http,
        "round(2.5) AS a, round(-2.5) AS b, round(0.5) AS c, round(3.5) AS d,"
        " round(2.675, 2) AS e, round(1250, -2) AS f, round(payload.x) AS g",
        {"x": 4.5},
    ) == {"a": 3, "b": -3, "c": 1, "d": 4, "e": 2.68, "f": 1300, "g": 5}


def test_div_and_remainder_truncate_toward_zero(http: Http) -> None:
    """EMQX's DIV and MOD are Erlang's div and rem: truncated toward zero (Python's //
    and % floor: -7 // 2 is -4, -7 % 3 is 2); % and MOD are the same operator."""
    assert output(
        http,
        "-7 DIV 2 AS a, 7 DIV -2 AS b, 7 DIV 2 AS c, -7 % 3 AS d, 7 MOD -3 AS e,"
        " mod(-7, 3) AS f, -7.5 % 2 AS g, payload.n DIV 4 AS h",
        {"n": -9},
    ) == {"a": -3, "b": -3, "c": 3, "d": -1, "e": 1, "f": -1, "g": -1.5, "h": -2}
    for select, error in [
        ("7.5 DIV 2 AS x", "DIV takes integers, got 7.5 DIV 2"),
        ("payload.f DIV 2 AS x", "DIV takes integers, got 7.0 DIV 2"),
        ("7 DIV 0 AS x", "division by zero"),
        ("7 % 0 AS x", "division by zero"),
    ]:
        answer = run(http, select, {"f": 7.0})
        assert answer["error"] == error, (select, answer)


def test_booleans_are_not_numbers(http: Http) -> None:
    """As EMQX's compare: true is no 1 (true = 1 is false) and compares with text as
    'true' (true = 'true' is true); arithmetic on it fails."""
    payload = {"b": True, "one": 1, "text": "true"}
    assert output(
        http,
        "payload.b = 1 AS a, payload.b = 'true' AS b, payload.b != 1 AS c,"
        " payload.one = true AS d, payload.text = true AS e, false = 'false' AS f,"
        " payload.b = true AS g, int(payload.b) AS h, payload.b IN (1, 2) AS i",
        payload,
    ) == {"a": False, "b": True, "c": True, "d": False, "e": True, "f": True, "g": True,
          "h": 1, "i": False}  # fmt: skip
    for select in ("payload.b + 1 AS x", "true * 2 AS x", "-payload.b AS x", "abs(true) AS x"):
        assert run(http, select, payload)["error"] == "not a number: true", select
    assert run(http, "1 AS x", payload, where="payload.b = 'true'")["matched"] is True
    assert run(http, "1 AS x", payload, where="payload.b = 1")["matched"] is False


def test_find_gives_the_text_from_the_match_on(http: Http) -> None:
    """EMQX's find(str, sub[, 'leading' | 'trailing']): the rest of str from sub, or ''."""
    assert output(
        http,
        "find('a/b/c/b', 'b') AS a, find('a/b/c/b', 'b', 'trailing') AS b,"
        " find('abc', 'z') AS c, find(topic, '/') AS d",
    ) == {"a": "b/c/b", "b": "b", "c": "", "d": "/1"}


def test_a_topic_matches_a_filter_with_eq_tilde(http: Http) -> None:
    """EMQX's ``topic =~ 't/#'``: MQTT filter matching, wildcards and all."""
    assert output(
        http,
        "topic =~ 't/#' AS a, topic =~ 't/+' AS b, topic =~ 'u/#' AS c, topic =~ '#' AS d,"
        " topic =~ payload.f AS e, payload.none =~ 't/#' AS f",
        {"f": "+/1"},
    ) == {"a": True, "b": True, "c": False, "d": True, "e": True, "f": None}
    assert run(http, "1 AS x", where="topic =~ 't/+'")["matched"] is True
    assert run(http, "1 AS x", where="topic =~ 't/+/+'")["reason"] == "WHERE is not true"
    assert run(http, "topic =~ payload.f AS x", {"f": "a/#/b"})["error"] == (
        "bad topic filter 'a/#/b' after =~: '#' must be a whole level and the last one"
    )


def test_check_refuses_a_bad_literal_filter_after_eq_tilde(tmp_path: Path) -> None:
    rules = """\
rules:
  - name: tilde
    sql: 'SELECT topic FROM "s/#" WHERE topic =~ ''s/#/x'''
    actions: [{type: log}]
"""
    code, lines = check(tmp_path, QUIET + rules)
    assert code == 2
    assert lines == [
        "edgebus.yaml:5 rules[0].sql: bad topic filter 's/#/x' after =~: '#' must be a whole"
        " level and the last one at position 39 (line 1, column 40)"
    ]
