"""The ``someip`` adapter's configuration: defaults, shorthands, and errors that name the
key (through the gateway's loader: file, line, YAML path)."""

from __future__ import annotations

import pytest

from adapters.someip.config import ConsumedEvent, SomeipAdapterConfig
from broker_core.errors import ConfigError
from gateway.config import parse_config


def adapter(body: str) -> SomeipAdapterConfig:
    text = "adapters:\n  - type: someip\n    name: car\n" + "".join(
        f"    {line}\n" for line in body.strip("\n").splitlines()
    )
    (config,) = parse_config(text, "edgebus.yaml").adapters
    assert isinstance(config, SomeipAdapterConfig)
    return config


def problems(body: str) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        adapter(body)
    return list(raised.value.problems)


def test_defaults_and_shorthands() -> None:
    config = adapter(
        """
consume:
  - service_id: 0x1234
    instance_id: 1
    eventgroups: [1]
    events: [0x8001, {id: 0x8002, layout: uint16, qos: 1}]
    methods: [1]
"""
    )
    assert config.daemon.socket_path is None
    assert (config.daemon.interface, config.daemon.sd_port) == ("127.0.0.1", 30490)
    assert config.responses == "someip/responses/car"
    (service,) = config.consume
    assert service.event_list() == [
        ConsumedEvent(id=0x8001),
        ConsumedEvent(id=0x8002, layout="uint16", qos=1),
    ]
    assert service.to_mqtt == "someip/{service:04x}/{instance:04x}/event/{event:04x}"
    assert [m.id for m in service.method_list()] == [1]
    assert service.minor_version is None  # any


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "layouts:\n  Speed: {type: struct, fields: [{name: v, type: float33}]}",
            "adapters[0].layouts.Speed.fields[0].type: unknown type 'float33'",
        ),
        (
            "consume:\n  - {service_id: 1, instance_id: 1, eventgroups: [1],"
            " events: [{id: 2, layout: Missing}]}",
            "adapters[0].consume[0].events[0].layout: unknown type 'Missing'",
        ),
        (
            "consume:\n  - {service_id: 1, instance_id: 1, eventgroups: [1, 2], events: [5]}",
            "consume[0].events[0]: name its eventgroup (the service lists 2)",
        ),
        (
            "consume:\n  - {service_id: 1, instance_id: 1, eventgroups: [1, 2],"
            " events: [{id: 5, eventgroup: 1}]}",
            "consume[0].eventgroups: eventgroup 2 has no events listed",
        ),
        (
            "consume:\n  - {service_id: 1, instance_id: 1, eventgroups: [1],"
            " events: [{id: 5, eventgroup: 3}]}",
            "consume[0].events[0].eventgroup: 3 is not in the service's eventgroups",
        ),
        (
            "consume:\n  - {service_id: 1, instance_id: 1, eventgroups: [1], events: [5, 5]}",
            "consume[0]: event 0x0005 is listed twice",
        ),
        (
            "consume:\n  - {service_id: 1, instance_id: 1}\n  - {service_id: 1, instance_id: 1}",
            "consume[1]: service 0x0001 instance 0x0001 is listed twice",
        ),
        (
            "consume:\n  - {service_id: 1, instance_id: 1, eventgroups: [1], events: [5],"
            " to_mqtt: 'car/{payload.speed}'}",
            "consume[0].events[0].to_mqtt: {payload.speed} needs a layout",
        ),
        (
            "consume:\n  - {service_id: 1, instance_id: 1, eventgroups: [1], events: [5],"
            " to_mqtt: 'car/{vin}'}",
            "consume[0].events[0].to_mqtt: unknown field {vin}",
        ),
        (
            "offer:\n  - {service_id: 1, instance_id: 1, eventgroups: [1], events: [5],"
            " from_mqtt: 'car/{payload.x}'}",
            "offer[0].events[0].from_mqtt: unknown field {payload.x} here; known: service,",
        ),
        (
            "offer:\n  - {service_id: 1, instance_id: 1, ttl: 2s, cyclic_offer_delay: 2s}",
            "offer[0].cyclic_offer_delay: must be shorter than ttl",
        ),
    ],
)
def test_errors_name_the_key(body: str, message: str) -> None:
    (problem,) = problems(body)
    assert problem.startswith("edgebus.yaml:")
    assert message in problem


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        ("daemon: {interface: eth0}", "adapters[0].daemon.interface", "expected an IPv4 address"),
        ("daemon: {sd_address: 10.0.0.1}", "adapters[0].daemon.sd_address", "multicast"),
        ("consume:\n  - {service_id: 0x10000, instance_id: 1}", "service_id", "65534"),
        ("consume:\n  - {service_id: 1, instance_id: 1, timeout: 30s}", "timeout", "10s"),
        ("consume:\n  - {service_id: 1, instance_id: 1, to_mqtt: 'a/+'}", "to_mqtt", "'+'"),
        ("consume:\n  - {service_id: 1, instance_id: 1, qos: 3}", "qos", "0, 1 or 2"),
    ],
)
def test_field_errors(body: str, where: str, message: str) -> None:
    (problem,) = problems(body)
    assert where in problem
    assert message in problem


def test_a_dumped_config_loads_back_equal() -> None:
    from gateway.config import dump_config

    text = """
adapters:
  - type: someip
    name: car
    daemon: {socket_path: /run/someipyd.sock, sd_port: 30491}
    layouts:
      Speed: {type: struct, fields: [{name: kmh, type: float32}]}
    consume:
      - service_id: 0x1234
        instance_id: 1
        timeout: 500ms
        eventgroups: [1]
        events: [0x8001, {id: 0x8002, layout: Speed}]
        methods: [{id: 1, request_layout: uint8}]
    offer:
      - {service_id: 0x2000, instance_id: 1, eventgroups: [2], events: [0x8001], methods: [3]}
"""
    config = parse_config(text, "edgebus.yaml")
    assert parse_config(dump_config(config), "dump.yaml") == config
