"""``edgebus check`` on a value that fits no member of a union that is not discriminated
(a SOME/IP method: an id or a mapping). pydantic names the member in each error's
location (``function-wrap[_checks_despite_problems()]``, ``constrained-int``) and reports
every member's complaint: the path showed those names, and a mapping with an unknown key
got a second line, "expected an integer, got a mapping". Now the path is the YAML path,
a mapping gets the mapping member's problems only (with the nearest valid key), and a
value no member takes gets one line naming what each expects."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET, check

CONFIG = """\
adapters:
  - type: someip
    name: car
    offer:
      - service_id: 0x2000
        instance_id: 1
        methods:
          - {id: 5, timeout: 2s}
          - {id: 6, protocl: udp}
          - abc
          - -1
          - 7
"""


def test_a_union_of_a_mapping_and_an_integer_reports_the_yaml_path_once(
    tmp_path: Path,
) -> None:
    code, lines = check(tmp_path, QUIET + CONFIG)
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:10 adapters[0].offer[0].methods[0]: unknown key 'timeout'",
            "edgebus.yaml:11 adapters[0].offer[0].methods[1]: unknown key 'protocl';"
            " did you mean 'protocol'?",
            "edgebus.yaml:12 adapters[0].offer[0].methods[2]: expected a mapping or an"
            " integer, got 'abc'",
            "edgebus.yaml:13 adapters[0].offer[0].methods[3]: expected at least 0, got -1",
        ],
    )
