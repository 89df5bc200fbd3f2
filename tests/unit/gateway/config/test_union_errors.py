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


SOCKETS = """\
adapters:
  - type: zmq
    name: z
    zmq_to_mqtt:
      - socket: sub
        connect: [tcp://127.0.0.1:5999, 5]
        to_mqtt: t
      - socket: sub
        connect: {url: tcp://127.0.0.1:5999}
        to_mqtt: t
"""


def test_a_string_or_a_list_of_strings_reports_the_item_at_its_yaml_path(
    tmp_path: Path,
) -> None:
    """``connect: str | tuple[str, ...]``: pydantic names the members ``str`` and
    ``tuple[str, ...]``; the path showed ``connect['tuple[str, ...]'][1]`` after a line
    "connect: expected a string, got a list"."""
    code, lines = check(tmp_path, QUIET + SOCKETS)
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:8 adapters[0].zmq_to_mqtt[0].connect[1]: expected a string, got 5",
            "edgebus.yaml:11 adapters[0].zmq_to_mqtt[1].connect: expected a string or a"
            " list, got a mapping",
        ],
    )


HISTORY = """\
adapters:
  - type: dds
    name: d
    qos_profiles:
      - {name: a, history: 0}
      - {name: b, history: lots}
      - {name: c, history: [1]}
      - {name: d, history: 5}
      - {name: e, history: all}
    dds_to_mqtt:
      - {topic: t, type: M::T, to_mqtt: t, qos_profile: a}
"""


def test_an_integer_or_a_choice_is_one_line_naming_both(tmp_path: Path) -> None:
    """``history: int >= 1 | 'all'``: the path showed ``history.constrained-int`` and
    ``history["literal['all']"]``, one line each, and the integer quoted ('0')."""
    code, lines = check(tmp_path, QUIET + HISTORY)
    assert code == 2
    assert [line for line in lines if ".history:" in line] == [
        f"edgebus.yaml:{7 + i} adapters[0].qos_profiles[{i}].history: expected an integer"
        f" >= 1 or all, got {got}"
        for i, got in enumerate(["0", "'lots'", "a list"])
    ]


EVENTS = """\
adapters:
  - type: someip
    name: car
    consume:
      - service_id: 1
        instance_id: 1
        eventgroups: [1]
        events:
          - {id: 5, protocl: udp}
          - abc
          - {id: 99999}
        methods:
          - {id: 6, protocl: tcp}
    offer:
      - service_id: 2
        instance_id: 1
        events:
          - [1]
"""


def test_someip_consumed_and_offered_events_and_methods_report_the_yaml_path(
    tmp_path: Path,
) -> None:
    """consume[].events, consume[].methods and offer[].events items: the same union of
    an id or a mapping as offer[].methods (right since d8a48f4; kept so)."""
    code, lines = check(tmp_path, QUIET + EVENTS)
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:11 adapters[0].consume[0].events[0]: unknown key 'protocl';"
            " did you mean 'protocol'?",
            "edgebus.yaml:12 adapters[0].consume[0].events[1]: expected a mapping or an"
            " integer, got 'abc'",
            "edgebus.yaml:13 adapters[0].consume[0].events[2].id: expected at most 65535,"
            " got 99999",
            "edgebus.yaml:15 adapters[0].consume[0].methods[0]: unknown key 'protocl';"
            " did you mean 'protocol'?",
            "edgebus.yaml:20 adapters[0].offer[0].events[0]: expected a mapping or an"
            " integer, got a list",
        ],
    )
