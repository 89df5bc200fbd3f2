"""A plain cyclonedds program the DDS tests drive from another process.

    python -m tests.helpers.dds_peer DOMAIN

Reads one JSON command per line on stdin, answers one JSON line on stdout
(``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``). Types come from IDL files
(``load``, through ``idl_codegen.load``), samples are given and returned as the JSON of
``idl_codegen``'s codec. Commands:

- ``load {idl: [paths], include: [dirs]}``
- ``writer {id, topic, type, qos}`` / ``reader {id, topic, type, qos}``; ``qos`` keys:
  ``reliability`` (reliable | best_effort), ``durability`` (volatile |
  transient_local), ``history`` (N | all), ``ignore_local`` (bool)
- ``matched {id, count, timeout}``: waits until the endpoint has matched ``count``
- ``write {id, samples: [json]}``; ``bulk {id, n, sample, field}``: ``n`` samples with
  ``field`` set to 0..n-1
- ``take {id, count, timeout}``: up to ``count`` samples, waiting at most ``timeout``
- ``quiet {id, seconds}``: the samples that arrive within ``seconds``
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

import idl_codegen


def qos_of(spec: dict[str, Any]) -> Qos:
    policies: list[Any] = []
    if spec.get("reliability", "reliable") == "reliable":
        policies.append(Policy.Reliability.Reliable(duration(seconds=10)))
    else:
        policies.append(Policy.Reliability.BestEffort)
    if spec.get("durability") == "transient_local":
        policies.append(Policy.Durability.TransientLocal)
    history = spec.get("history", "all")
    policies.append(Policy.History.KeepAll if history == "all"
                    else Policy.History.KeepLast(int(history)))
    if spec.get("ignore_local"):
        policies.append(Policy.IgnoreLocal.Participant)
    return Qos(*policies)


class Peer:
    def __init__(self, domain: int) -> None:
        self.participant = DomainParticipant(domain)
        self.types: dict[str, type] = {}
        self.topics: dict[str, Topic] = {}
        self.entities: dict[str, Any] = {}

    def topic(self, name: str, type_name: str) -> tuple[Topic, Any]:
        cls = self.types[type_name]
        if name not in self.topics:
            self.topics[name] = Topic(self.participant, name, cls)
        return self.topics[name], idl_codegen.codec_for(cls)

    def op_load(self, idl: list[str], include: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
        schema = idl_codegen.load(idl, include_dirs=list(include))
        self.types.update(schema.types)
        return {"types": sorted(schema.types)}

    def op_writer(self, id: str, topic: str, type: str, qos: dict[str, Any] = {}) -> dict[str, Any]:  # noqa: B006
        dds_topic, codec = self.topic(topic, type)
        self.entities[id] = (DataWriter(self.participant, dds_topic, qos=qos_of(qos)), codec)
        return {}

    def op_reader(self, id: str, topic: str, type: str, qos: dict[str, Any] = {}) -> dict[str, Any]:  # noqa: B006
        dds_topic, codec = self.topic(topic, type)
        self.entities[id] = (DataReader(self.participant, dds_topic, qos=qos_of(qos)), codec)
        return {}

    def op_delete(self, id: str) -> dict[str, Any]:
        """Deletes a reader or writer (remote participants see it disposed at once)."""
        entity, _ = self.entities.pop(id)
        entity.__del__()
        return {}

    def op_matched(self, id: str, count: int = 1, timeout: float = 10) -> dict[str, Any]:
        entity, _ = self.entities[id]
        deadline = time.monotonic() + timeout
        while True:
            if isinstance(entity, DataWriter):
                matched = len(entity.get_matched_subscriptions())
            else:
                matched = len(entity.get_matched_publications())
            if matched >= count or time.monotonic() > deadline:
                return {"matched": matched}
            time.sleep(0.02)

    def op_write(self, id: str, samples: list[Any]) -> dict[str, Any]:
        writer, codec = self.entities[id]
        for value in samples:
            writer.write(codec.from_json(value))
        return {"written": len(samples)}

    def op_bulk(self, id: str, n: int, sample: dict[str, Any], field: str) -> dict[str, Any]:
        writer, codec = self.entities[id]
        template = codec.from_json(sample)
        started = time.monotonic()
        for index in range(n):
            setattr(template, field, index)
            writer.write(template)
        return {"written": n, "seconds": time.monotonic() - started}

    def op_take(self, id: str, count: int, timeout: float = 10) -> dict[str, Any]:
        reader, codec = self.entities[id]
        deadline = time.monotonic() + timeout
        got: list[Any] = []
        while len(got) < count and time.monotonic() < deadline:
            for sample in reader.take(N=max(count - len(got), 1)):
                if sample.sample_info.valid_data:
                    got.append(codec.to_json(sample))
            time.sleep(0.01)
        return {"samples": got}

    def op_quiet(self, id: str, seconds: float) -> dict[str, Any]:
        reader, codec = self.entities[id]
        time.sleep(seconds)
        return {"samples": [codec.to_json(s) for s in reader.take(N=1000)
                            if s.sample_info.valid_data]}


def serve(peer: Any) -> None:
    """Runs ``peer.op_<op>(**args)`` for each command line of stdin, answers on stdout."""
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        try:
            answer = getattr(peer, f"op_{op}")(**command)
            answer["ok"] = True
        except Exception as exc:  # reported to the test, which fails with it
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve(Peer(int(sys.argv[1])))
