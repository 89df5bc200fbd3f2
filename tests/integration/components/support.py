"""Shared by the component tests: a gateway with an API key, waiting for states."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from tests.helpers.gateway import RunningGateway
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY, Http, bearer

__all__ = ["API", "http_of", "metric", "status_of", "wait_for"]

T = TypeVar("T")

API = f"""
api:
  keys: ["{KEY}"]
"""


def http_of(gw: RunningGateway) -> Http:
    address = gw.gateway.api_address
    assert address is not None
    return Http(f"http://{address[0]}:{address[1]}", bearer(KEY))


def wait_for(what: Callable[[], T], done: Callable[[T], bool], seconds: float = 10) -> T:
    """Polls ``what()`` until ``done`` says yes; fails with the last value after the
    (scaled) deadline."""
    deadline = time.monotonic() + unit(seconds)
    while True:
        value = what()
        if done(value):
            return value
        assert time.monotonic() < deadline, value
        time.sleep(0.02)


def status_of(gw: RunningGateway, kind: str, name: str) -> dict[str, Any]:
    status = gw.call(lambda: gw.gateway.components.status(kind, name))
    assert status is not None
    return status


def metric(text: str, family: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text ``text``."""
    for line in text.splitlines():
        match = re.fullmatch(rf"{family}\{{(.*)\}} (\S+)", line)
        if match is None:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        if all(found.get(key) == value for key, value in labels.items()):
            return float(match.group(2))
    raise AssertionError(f"no {family} {labels} in /metrics")
