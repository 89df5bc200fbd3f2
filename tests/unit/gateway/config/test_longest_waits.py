"""``edgebus check`` on a first wait longer than the longest one (a restart or reconnect
backoff over its maximum, a login throttle's delay over its max_delay): it was taken,
and the wait never grew past the first. Now it is refused at the key written, with the
other checks between the keys of the same item still reported."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET, check

CONFIG = """\
auth:
  login_throttle: {delay: 2m}
bridges:
  - name: b
    server: "127.0.0.1:1883"
    reconnect_backoff: 10s
    reconnect_backoff_max: 5s
    forwards: [{local: "a/#"}]
  - name: c
    restart_backoff: 2m
    forwards: [{local: "a/#"}]
adapters:
  - type: loopback
    name: l
    restart_backoff_max: 500ms
    mappings: [{source: a/b, target: c/d}]
"""


def test_a_first_wait_longer_than_the_longest_is_refused_at_the_key(tmp_path: Path) -> None:
    code, lines = check(tmp_path, QUIET + CONFIG)
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:4 auth.login_throttle.delay: max_delay (1m) must be at least delay (2m)",
            "edgebus.yaml:9 bridges[0].reconnect_backoff_max: reconnect_backoff_max (5s)"
            " must be at least reconnect_backoff (10s)",
            "edgebus.yaml:11 bridges[1]: missing required key 'server'",
            "edgebus.yaml:12 bridges[1].restart_backoff: restart_backoff_max (1m) must be"
            " at least restart_backoff (2m)",
            "edgebus.yaml:17 adapters[0].restart_backoff_max: restart_backoff_max (500ms)"
            " must be at least restart_backoff (1s)",
        ],
    )


def test_waits_within_the_longest_are_taken(tmp_path: Path) -> None:
    text = QUIET + "bridges:\n  - name: b\n    server: 127.0.0.1:1883\n    forwards: [{local: a}]\n"
    text += "    restart_backoff: 1m\n    restart_backoff_max: 1m\n"
    code, lines = check(tmp_path, text)
    assert (code, lines[-1]) == (0, "edgebus.yaml: OK")
