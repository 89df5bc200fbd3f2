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
