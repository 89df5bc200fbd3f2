"""The DDS adapter's pure side: configuration, routes, templates, type supports."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

import idl_codegen
from adapters.dds.codec import CONTENT_CDR, InRoute, OutRoute, TypeRegistry, TypeSupport
from adapters.dds.config import DdsAdapterConfig, DdsNetworkConfig, DdsQos
from broker_core.context import Context, Origin
from broker_core.errors import ConfigError
from gateway.config import parse_config
from gateway.mapping import MappingError

VEHICLE = Path(__file__).resolve().parents[2] / "integration/adapters/dds/vehicle.idl"
ORIGIN = Origin("dds", "car")


@cache
def types() -> TypeRegistry:
    return TypeRegistry(idl_codegen.load(VEHICLE).types)


def speed(vin: str = "WVW1", seq: int = 3, kph: float = 88.5) -> bytes:
    support = types().support("vehicle::Speed")
    return support.cdr_of(json.dumps({"vin": vin, "seq": seq, "kph": kph}).encode())


def route(template: str, name: str = "vehicle::Speed", **kw: object) -> OutRoute:
    support = types().support(name)
    meta = {"dds.topic": "speed", "dds.type": support.name}
    return OutRoute(template, support, meta, ORIGIN, **kw)  # type: ignore[arg-type]


def test_a_sample_becomes_a_context_with_type_and_timestamp() -> None:
    context = route("vehicle/{vin}/{dds.topic}").context(speed(), 1700000000000000000)
    assert context.topic == "vehicle/WVW1/speed"
    assert json.loads(context.payload) == {"vin": "WVW1", "seq": 3, "kph": 88.5}
    assert context.properties.content_type == "application/json"
    assert context.properties.payload_format_indicator == 1
    assert context.properties.user_properties == (
        ("dds.type", "vehicle::Speed"), ("dds.source_timestamp", "1700000000000000000"))
    assert (context.qos, context.retain, context.origin) == (1, False, ORIGIN)
    assert context.meta["dds.topic"] == "speed"


def test_templates_read_key_and_member_fields_on_both_paths() -> None:
    for template in ("v/{key.vin}/{payload.seq}", "v/{vin}/{seq}"):
        assert route(template).context(speed(), 0).topic == "v/WVW1/3"
    # the general path (an appendable type): the same topics
    support = types().support("vehicle::Diagnostics")
    assert support.fast is None
    data = support.cdr_of(b'{"vin": "X1", "code": "P0420", "values": [], "note": null}')
    out = route("diag/{vin}/{code}", "vehicle::Diagnostics").context(data, 0)
    assert out.topic == "diag/X1/P0420"


def test_template_members_are_checked_against_the_type() -> None:
    with pytest.raises(MappingError, match="vehicle::Speed has no member 'speed'"):
        route("v/{speed}")
    with pytest.raises(MappingError, match="'x' is not a member"):
        route("v/{kph.x}")
    route("v/{velocity.x}/{wheels.0.index}/{reading.discriminator}", "vehicle::State")


def test_a_value_that_cannot_be_a_topic_level_is_an_error() -> None:
    with pytest.raises(MappingError, match="cannot be a topic level"):
        route("v/{vin}").context(speed(vin="a/+"), 0)


def test_cdr_payloads_pass_unchanged_and_are_checked() -> None:
    data = speed()
    context = route("raw/{vin}", payload="cdr").context(data, 0)
    assert (context.topic, context.payload) == ("raw/WVW1", data)
    assert context.properties.content_type == CONTENT_CDR
    assert context.properties.payload_format_indicator is None
    with pytest.raises(MappingError, match="malformed"):
        route("raw", payload="cdr").context(data[:-5], 0)


def test_mqtt_payloads_name_the_member_path_of_a_problem() -> None:
    incoming = InRoute("cmd/{vin}/speed", "speed_{vin}")
    support = types().support("vehicle::Speed")
    context = Context("cmd/WVW9/speed", b'{"vin": "WVW9", "seq": 1, "kph": 2}')
    assert incoming.topic_of(context) == "speed_WVW9"
    assert incoming.topic_of(Context("other", b"")) is None
    assert support.json_of(incoming.cdr_of(context, support)) == (
        b'{"vin":"WVW9","seq":1,"kph":2.0}')
    for payload, problem in ((b"{", "payload is not JSON"),
                             (b'{"vin": "x", "seq": "1", "kph": 2}', "$.seq: expected an integer"),
                             (b'{"vin": "x", "seq": 1}', "missing member 'kph'")):
        with pytest.raises(MappingError) as caught:
            incoming.cdr_of(Context("cmd/x/speed", payload), support)
        assert problem in str(caught.value)
    lenient = InRoute("cmd/{vin}/speed", "speed", strict=False)
    assert lenient.cdr_of(Context("c", b'{"vin": "x", "other": 1}'), support) == (
        support.cdr_of(b'{"vin": "x", "seq": 0, "kph": 0}'))


def test_unknown_types_say_what_is_known() -> None:
    with pytest.raises(MappingError, match=r"unknown DDS type 'vehicle::Nope'.*vehicle::Speed"):
        types().support("vehicle::Nope")
    assert "vehicle::State" in types()
    assert isinstance(types().support("vehicle::State"), TypeSupport)


def _config(text: str) -> DdsAdapterConfig:
    config = parse_config(text, "t.yaml")
    return config.adapters[0]  # type: ignore[no-any-return]


BASE = f"""
adapters:
  - type: dds
    name: car
    idl_files: [{VEHICLE}]
    dds_to_mqtt:
      - {{from_dds: speed, type: vehicle::Speed, to_mqtt: "v/{{vin}}"}}
"""


def test_configuration_profiles_and_defaults() -> None:
    config = _config(BASE + """
    qos_profiles:
      - {name: default, reliability: best_effort}
      - {name: latched, durability: transient_local, history: 1, deadline: 2s}
    mqtt_to_dds:
      - {from_mqtt: "cmd/{vin}", to_dds: "cmd_{vin}", type: vehicle::State,
         qos_profile: latched, dds_qos: {history: 5}}
""")
    assert config.profile(None) == DdsQos(reliability="best_effort")
    latched = config.profile("latched")
    assert (latched.durability, latched.history, latched.deadline) == ("transient_local", 1, 2.0)
    mapping = config.mqtt_to_dds[0]
    assert mapping.dds_qos is not None
    assert mapping.dds_qos.over(latched).history == 5
    assert config.dds_to_mqtt[0].type == "vehicle::Speed"


@pytest.mark.parametrize(("extra", "problem"), [
    ("    qos_profiles: [{name: a}, {name: a}]\n", "duplicate 'a'"),
    ("    mqtt_to_dds: [{from_mqtt: x, to_dds: y, type: T, qos_profile: nope}]\n",
     "unknown profile 'nope'"),
    ("    mqtt_to_dds: [{from_mqtt: x, to_dds: 'y*', type: T}]\n", "cannot be a pattern"),
    ("    domain_id: 233\n", "domain_id"),
    ("    mqtt_to_dds: [{from_mqtt: x, to_dds: y, type: '1bad'}]\n", "IDL type name"),
])
def test_configuration_errors(extra: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(BASE + extra)
    assert problem in str(caught.value)


def test_network_settings_become_a_cyclone_configuration() -> None:
    assert DdsNetworkConfig().cyclone_xml(3) is None
    xml = DdsNetworkConfig(interfaces=("lo", "192.168.1.2"), peers=("10.0.0.9",),
                           allow_multicast=False).cyclone_xml(3)
    assert xml == (
        '<CycloneDDS xmlns="https://cdds.io/config"><Domain id="3"><General><Interfaces>'
        '<NetworkInterface name="lo"/><NetworkInterface address="192.168.1.2"/></Interfaces>'
        "<AllowMulticast>false</AllowMulticast></General><Discovery><Peers>"
        '<Peer address="10.0.0.9"/></Peers></Discovery></Domain></CycloneDDS>')
    assert DdsNetworkConfig(config="file:///etc/cyclone.xml").cyclone_xml(1) == (
        "file:///etc/cyclone.xml")


def test_a_changed_idl_file_changes_the_configuration(tmp_path: Path) -> None:
    idl = tmp_path / "a.idl"
    idl.write_text("module vehicle { struct Speed { string vin; long x; }; };")
    text = BASE.replace(str(VEHICLE), str(idl))
    first = _config(text)
    assert first == _config(text)
    idl.write_text("module vehicle { struct Speed { string vin; long y; }; };")
    assert first != _config(text)  # a reload restarts the adapter


def test_deeply_nested_json_is_a_mapping_error() -> None:
    # 100 kB of '[': json.loads raises RecursionError, not a JSONDecodeError
    with pytest.raises(MappingError, match="payload is not JSON"):
        types().support("vehicle::Speed").cdr_of(b"[" * 100_000)
