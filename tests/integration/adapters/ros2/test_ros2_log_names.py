"""The ros2 adapter runs the DDS adapter's bridge (adapters/dds/bridge.py); its log
lines name the ros2 adapter and its own mapping keys (docs/adapters/ros2.md):
``ros2 <name>: reading 'rt/...' (...) for ros_to_mqtt[0]``, not ``dds <name>: ...
for dds_to_mqtt[0]``. A real gateway, its log caught at INFO.

The warning about a remote endpoint with incompatible QoS names the ros2 adapter and
the mapping (``ros2 <name>: ros_to_mqtt[0]: topic 'rt/...': a remote writer's QoS ...``).
Before, it said ``dds <name>: topic 'rt/...'`` and named no mapping."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.helpers.dds import NETWORK_YAML, DdsPeer, domain_id, unique
from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import wait_until

CONFIG = """
adapters:
  - type: ros2
    name: logs
    domain_id: {domain}
{network}    ros_to_mqtt:
      - from_ros: /{topic}
        type: std_msgs/msg/String
        to_mqtt: ros/{{ros.topic}}
"""


def test_the_start_line_names_ros2_and_ros_to_mqtt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique("logged")
    config = CONFIG.format(domain=domain_id(), network=NETWORK_YAML, topic=topic)
    caplog.set_level(logging.INFO, logger="adapters")
    with running_gateway(tmp_path, config) as gw:
        wait_until(
            lambda: gw.call(lambda: gw.gateway.adapters.status("logs"))["state"] == "running",
            unit(15),
            "the ros2 adapter runs",
        )
        wait_until(
            lambda: any(f"'rt/{topic}'" in r.getMessage() for r in caplog.records),
            unit(15),
            "the reader's INFO line",
        )
    [line] = [r.getMessage() for r in caplog.records if f"'rt/{topic}'" in r.getMessage()]
    assert line.startswith(f"ros2 logs: reading 'rt/{topic}' ("), line
    assert line.endswith(" for ros_to_mqtt[0]"), line
    assert not [r for r in caplog.records if r.getMessage().startswith("dds logs:")]


def test_an_incompatible_qos_warning_names_ros2_and_the_mapping(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic, domain = unique("best_effort"), domain_id()
    config = CONFIG.format(domain=domain, network=NETWORK_YAML, topic=topic)
    caplog.set_level(logging.INFO, logger="adapters")
    with running_gateway(tmp_path, config) as gw, \
            DdsPeer(domain, "tests.helpers.ros2_peer") as peer:
        wait_until(
            lambda: gw.call(lambda: gw.gateway.adapters.status("logs"))["state"] == "running",
            unit(15),
            "the ros2 adapter runs",
        )
        # a best-effort publisher for the adapter's reliable reader (the default profile)
        peer.call("publisher", id="be", topic=f"/{topic}", type="std_msgs/msg/String",
                  profile_name="sensor_data")
        wait_until(
            lambda: any("QoS is incompatible" in r.getMessage() for r in caplog.records),
            unit(15),
            "the incompatible QoS warning",
        )
    [line] = [r.getMessage() for r in caplog.records if "QoS is incompatible" in r.getMessage()]
    assert line == (f"ros2 logs: ros_to_mqtt[0]: topic 'rt/{topic}': a remote writer's QoS is"
                    " incompatible with our reader's (reliability); it is not matched"), line


def test_a_shared_domain_warning_names_ros2(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two ros2 adapters on one domain, each with network keys: the second is told the
    first one's apply, as ``ros2 <name>`` (it said ``dds <name>``)."""
    domain = domain_id()
    first = CONFIG.format(domain=domain, network=NETWORK_YAML, topic=unique("first"))
    second = CONFIG.format(domain=domain, network=NETWORK_YAML, topic=unique("second"))
    config = first + second.replace("adapters:\n", "").replace("name: logs", "name: other")
    caplog.set_level(logging.INFO, logger="adapters")
    with running_gateway(tmp_path, config) as gw:
        for name in ("logs", "other"):
            wait_until(
                lambda name=name: gw.call(  # type: ignore[misc]
                    lambda: gw.gateway.adapters.status(name)
                )["state"] == "running",
                unit(15),
                f"the ros2 adapter {name} runs",
            )
    lines = [r.getMessage() for r in caplog.records if "is in use by another" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(("ros2 logs: domain", "ros2 other: domain")), lines
