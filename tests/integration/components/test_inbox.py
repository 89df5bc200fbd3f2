"""A component fed from its own thread at full speed through a host inbox: nothing is lost
within the inbox's bounds, and every item beyond them is counted as dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.components import ADAPTER
from tests.helpers.components import registered  # noqa: F401
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.integration.components.support import API, http_of, metric, status_of, wait_for

COUNT = 200_000


def _config(name: str, **options: Any) -> str:
    entry = {"type": "test-threadfed", "name": name, "count": COUNT, **options}
    return API + "adapters:\n  - {" + ", ".join(f"{k}: {v}" for k, v in entry.items()) + "}\n"


def _finished(gw: RunningGateway, name: str, expected: int) -> dict[str, Any]:
    return wait_for(
        lambda: status_of(gw, ADAPTER, name),
        lambda s: (
            s["component_stats"].get("produced") == 1
            and s["component_stats"]["received"] >= expected
            and s["stats"]["inbox_depth"] == 0
        ),
        seconds=60,
    )


@pytest.mark.usefixtures("registered")
def test_a_blocking_inbox_loses_nothing_at_full_speed(tmp_path: Path) -> None:
    """A bound of 100 items and a producer 2000 times faster than that: the producer
    waits for room, the consumer gets every item, in order."""
    with running_gateway(tmp_path, _config("fast", inbox_size=100, overflow="block")) as gw:
        status = _finished(gw, "fast", COUNT)
        assert status["component_stats"] == {"received": COUNT, "out_of_order": 0, "produced": 1}
        assert status["stats"]["inbox_accepted"] == COUNT
        assert status["stats"]["inbox_dropped"] == 0


@pytest.mark.usefixtures("registered")
def test_within_its_bound_a_dropping_inbox_loses_nothing(tmp_path: Path) -> None:
    """The whole stream fits: the consumer starts only once the producer is done."""
    config = _config("roomy", inbox_size=COUNT, overflow="drop_new", consume_after_producer="true")
    with running_gateway(tmp_path, config) as gw:
        status = _finished(gw, "roomy", COUNT)
        assert status["component_stats"]["received"] == COUNT
        assert status["component_stats"]["out_of_order"] == 0
        assert status["stats"]["inbox_dropped"] == 0


@pytest.mark.parametrize("overflow", ["drop_new", "drop_oldest"])
@pytest.mark.usefixtures("registered")
def test_beyond_its_bound_every_drop_is_counted(tmp_path: Path, overflow: str) -> None:
    """1000 places, the consumer asleep until the producer is done: exactly 1000 arrive
    (the first ones with drop_new, the last ones with drop_oldest) and the rest are
    counted, in the API and in /metrics."""
    config = _config("tight", inbox_size=1000, overflow=overflow, consume_after_producer="true")
    with running_gateway(tmp_path, config) as gw:
        status = _finished(gw, "tight", 1000)
        assert status["component_stats"]["received"] == 1000
        assert status["stats"]["inbox_dropped"] == COUNT - 1000
        assert status["stats"]["inbox_accepted"] == (1000 if overflow == "drop_new" else COUNT)
        last = gw.call(lambda: gw.gateway.components.instance(ADAPTER, "tight").last)
        assert last == (999 if overflow == "drop_new" else COUNT - 1)
        metrics = http_of(gw).get("/metrics").text
        dropped = metric(
            metrics, "edgebus_component_messages_dropped_total", name="tight", queue="inbox"
        )
        assert dropped == COUNT - 1000
