"""A DDS type Cyclone's C core would corrupt is refused when the dds adapter loads it.

``union switch (short) { case -1: long long neg; ...; default: boolean flag; }`` after a
1-byte member: cyclonedds-python writes ``neg = 5`` right, Cyclone's C core takes a
discriminator -1 on 2 bytes for the default case and turns the value's first byte into
a boolean, so every reader (this gateway too) got 1. The adapter now refuses such a type
when it loads it, naming the union and the workaround; the same union over a ``long``
discriminator carries every value intact between a cyclonedds peer process and MQTT.

A type from ``idl_files`` is refused earlier, by the configuration check (``edgebus
check``, ``run``, reload: test_dds_check_union.py); what only the adapter can refuse is a
type discovered on the network (``type: auto``): its topic is skipped, counted and logged,
and the adapter runs on.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.dds import NETWORK_YAML, DdsPeer, domain_id, gateway_matched, unique
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import Clients, wait_until

IDL = """
module u {
  union Short switch (short) { case -1: long long neg; case 7: unsigned short uu;
                               default: boolean flag; };
  union Long switch (long) { case -1: long long neg; case 7: unsigned short uu;
                             default: boolean flag; };
  struct S { long id; octet o; Short u; };
  struct L { long id; octet o; Long u; };
};
"""


def status(gw: RunningGateway, name: str) -> dict[str, Any]:
    found = gw.call(lambda: gw.gateway.adapters.status(name))
    assert found is not None
    return found


def test_a_union_cyclone_misreads_is_refused_and_a_long_discriminator_works(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    idl = tmp_path / "u.idl"
    idl.write_text(IDL, encoding="utf-8")
    domain = domain_id()
    short_topic, long_topic = unique("short"), unique("long")
    config = f"""
adapters:
  - type: dds
    name: short
    domain_id: {domain}
{NETWORK_YAML}    dds_to_mqtt:
      - {{from_dds: {short_topic}, type: auto, to_mqtt: short}}
  - type: dds
    name: long
    domain_id: {domain}
{NETWORK_YAML}    idl_files: [{idl}]
    dds_to_mqtt:
      - {{from_dds: {long_topic}, type: u::L, to_mqtt: long}}
"""
    with (caplog.at_level(logging.WARNING, logger="adapters.dds"),
          running_gateway(tmp_path, config) as gw, DdsPeer(domain) as peer):
        wait_until(lambda: status(gw, "short")["state"] == "running", unit(15), "short runs")
        wait_until(lambda: status(gw, "long")["state"] == "running", unit(15), "long runs")
        clients = Clients(gw)
        try:
            sub = clients.subscriber(5, "long", 1)
            peer.call("load", idl=[str(idl)])
            peer.call("writer", id="s", topic=short_topic, type="u::S", qos={})
            wait_until(lambda: status(gw, "short")["component_stats"].get("no_type", 0) >= 1,
                       unit(15), "the discovered type with the short union is refused")
            logged = "\n".join(record.getMessage() for record in caplog.records)
            assert (f"{short_topic}: discovered type not supported: DDS type 'u::S' is not"
                    " supported: union 'u::Short' (used by 'u::S') has the negative case"
                    " label -1 ('neg') on a short discriminator") in logged
            assert "Use a long discriminator, non-negative labels, or no default case" in logged
            assert status(gw, "short")["state"] == "running"
            assert status(gw, "short")["component_stats"]["readers"] == 0
            peer.call("writer", id="l", topic=long_topic, type="u::L", qos={})
            assert peer.call("matched", id="l", timeout=unit(10))["matched"] >= 1
            wait_until(lambda: gateway_matched(gw, "long", "reader", long_topic), unit(10),
                       "the gateway's reader matched the peer")
            values: list[dict[str, Any]] = [{"neg": 5}, {"neg": 300}, {"neg": -2},
                                            {"uu": 5}, {"flag": True}]
            peer.call("write", id="l",
                      samples=[{"id": i, "o": 0, "u": u} for i, u in enumerate(values)])
            got = [json.loads(m.payload) for m in sub.expect_messages(len(values), unit(10))]
            members = [{k: v for k, v in g["u"].items() if k != "discriminator"} for g in got]
            assert [(g["id"], m) for g, m in zip(got, members, strict=True)] == list(
                enumerate(values))
            assert [g["u"].get("discriminator") for g in got[:4]] == [-1, -1, -1, 7]
        finally:
            clients.close_all()
