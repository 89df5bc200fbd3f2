"""Cyclone DDS on loopback for the idl_codegen interop tests, and a bounded reader.

Import this module before anything imports ``cyclonedds``: it pins Cyclone to the
loopback interface (unless ``CYCLONEDDS_URI`` is already set). Each test uses its own
domain id from ``DOMAINS`` so tests never see each other's traffic.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["DOMAINS", "LOOPBACK_URI", "dds_environment", "take"]

LOOPBACK_URI = (
    '<CycloneDDS xmlns="https://cdds.io/config"><Domain id="any">'
    '<General><Interfaces><NetworkInterface name="lo"/></Interfaces>'
    "<AllowMulticast>false</AllowMulticast></General>"
    '<Discovery><Peers><Peer address="127.0.0.1"/></Peers></Discovery>'
    "</Domain></CycloneDDS>"
)
os.environ.setdefault("CYCLONEDDS_URI", LOOPBACK_URI)

# domain ids of the idl_codegen interop tests (ports 7400 + 250 * id)
DOMAINS = {"python": 171, "c_typeinfo": 172, "c_plain": 173}


def dds_environment() -> dict[str, str]:
    """The environment for a peer process: the same loopback configuration."""
    return {**os.environ, "CYCLONEDDS_URI": os.environ["CYCLONEDDS_URI"]}


def take(cls: Any, topic_name: str, domain: int, count: int, timeout_s: float) -> list[Any]:
    """Up to ``count`` samples of ``cls`` from ``topic_name``, waiting at most ``timeout_s``.

    Reliable, transient-local, keep-all: a writer that started first is still read.
    """
    from cyclonedds.core import Policy, Qos
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from cyclonedds.util import duration

    participant = DomainParticipant(domain)
    qos = Qos(Policy.Reliability.Reliable(duration(seconds=1)), Policy.Durability.TransientLocal,
              Policy.History.KeepAll)
    reader = DataReader(participant, Topic(participant, topic_name, cls), qos=qos)
    received: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(received) < count and time.monotonic() < deadline:
        received += reader.take(N=count - len(received))
        time.sleep(0.02)
    del reader, participant
    return received
