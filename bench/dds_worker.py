"""The processes of the DDS benchmark (``bench/bench_dds.py``), one role each.

    python -m bench.dds_worker ROLE JSON_ARGS

Prints one JSON line with its figures when done. Times are ``time.monotonic()``
(CLOCK_MONOTONIC, shared by all processes). Roles:

- ``writer``: a plain cyclonedds writer fed from a loop (reliable, keep all): ``n``
  samples of ``type`` on ``topic``, once ``readers`` readers matched;
- ``reader``: a plain cyclonedds reader (``take()`` into Python objects, as an
  application does), counting ``n`` samples; with ``raw``, only counting the serialized
  samples (to time a writer, not a reader);
- ``mqtt_sub``: a raw MQTT subscriber counting ``n`` PUBLISH packets;
- ``mqtt_to_dds``: publishes ``n`` JSON payloads over MQTT (QoS 0, at most ``window``
  ahead of what arrived) and counts the samples a raw DDS reader receives.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.lifetime import die_with_parent


def _types(args: dict[str, Any]) -> type:
    import idl_codegen

    schema = idl_codegen.load([Path(p) for p in args["idl"]], include_dirs=args.get("include", []))
    return schema[args["type"]]


def _qos() -> Any:
    from cyclonedds.core import Policy, Qos
    from cyclonedds.util import duration

    return Qos(Policy.Reliability.Reliable(duration(seconds=10)), Policy.History.KeepAll,
               Policy.ResourceLimits(max_samples=10_000))


def _participant(args: dict[str, Any]) -> Any:
    from cyclonedds.domain import DomainParticipant

    return DomainParticipant(args["domain"])


def writer(args: dict[str, Any]) -> dict[str, Any]:
    from cyclonedds.pub import DataWriter
    from cyclonedds.topic import Topic
    from cyclonedds.util import duration

    import idl_codegen

    cls = _types(args)
    participant = _participant(args)
    entity = DataWriter(participant, Topic(participant, args["topic"], cls), qos=_qos())
    deadline = time.monotonic() + 30
    while len(entity.get_matched_subscriptions()) < args["readers"]:
        if time.monotonic() > deadline:
            return {"error": "no reader matched"}
        time.sleep(0.02)
    time.sleep(0.5)  # the readers' side is fully up (a gateway's MQTT subscriber too)
    sample = idl_codegen.codec_for(cls).from_json(args["sample"], strict=False)
    field = args["field"].split(".")
    target = sample
    for part in field[:-1]:
        target = getattr(target, part)
    started, cpu = time.monotonic(), time.process_time()
    for index in range(args["n"]):
        setattr(target, field[-1], index)
        entity.write(sample)
    written = time.monotonic()
    entity.wait_for_acks(duration(seconds=60))
    return {"started": started, "written": written, "acked": time.monotonic(),
            "cpu": time.process_time() - cpu}


class _Counter:
    """A DDS reader counting what arrives: plain (``take()`` into sample objects) or raw
    (serialized samples, counted only)."""

    def __init__(self, args: dict[str, Any], raw: bool) -> None:
        from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState, WaitSet
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic

        participant = _participant(args)
        self.entity = DataReader(participant, Topic(participant, args["topic"], _types(args)),
                                 qos=_qos())
        self.waitset = WaitSet(participant)
        self.mask = SampleState.Any | ViewState.Any | InstanceState.Any
        self.waitset.attach(ReadCondition(self.entity, self.mask))
        self.raw = raw
        self.n = args["n"]
        self.deadline = time.monotonic() + args["timeout"]
        self.count, self.first, self.last = 0, 0.0, 0.0
        self.cpu_first = 0.0

    def run(self) -> dict[str, Any]:
        from cyclonedds._clayer import ddspy_take
        from cyclonedds.util import duration

        while self.count < self.n and time.monotonic() < self.deadline:
            self.waitset.wait(duration(milliseconds=200))
            got = (len(ddspy_take(self.entity._ref, self.mask, 1000)) if self.raw
                   else len(self.entity.take(N=1000)))
            if got:
                self.last = time.monotonic()
                if not self.count:
                    self.first = self.last
                    self.cpu_first = time.process_time()
                self.count += got
        return {"received": self.count, "first": self.first, "last": self.last,
                "cpu": time.process_time() - self.cpu_first}


def reader(args: dict[str, Any]) -> dict[str, Any]:
    counter = _Counter(args, args.get("raw", False))
    print(json.dumps({"ready": True}), flush=True)
    return counter.run()


def mqtt_sub(args: dict[str, Any]) -> dict[str, Any]:
    from bench.client import mqtt_connect, mqtt_subscribe
    from bench.frames import PUBLISH, PacketCounter

    sock = mqtt_connect(args["port"], "bench-dds-sub")
    mqtt_subscribe(sock, args["filter"], 0)
    print(json.dumps({"ready": True}), flush=True)
    counter = PacketCounter(PUBLISH)
    buffer = bytearray(1 << 20)
    count, first, last = 0, 0.0, 0.0
    sock.settimeout(0.5)
    deadline = time.monotonic() + args["timeout"]
    while count < args["n"] and time.monotonic() < deadline:
        try:
            size = sock.recv_into(buffer)
        except TimeoutError:
            continue
        if not size:
            break
        got = counter.feed(memoryview(buffer)[:size])
        if got:
            last = time.monotonic()
            if not count:
                first = last
            count += got
    sock.close()
    return {"received": count, "first": first, "last": last}


def mqtt_to_dds(args: dict[str, Any]) -> dict[str, Any]:
    from bench.client import mqtt_connect
    from bench.frames import encode_publish

    counter = _Counter(args, raw=True)
    n, deadline = counter.n, counter.deadline
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(counter.run()), daemon=True)
    thread.start()
    # wait for the gateway's writer to match this reader
    while not counter.entity.get_matched_publications():
        if time.monotonic() > deadline:
            return {"error": "the gateway's writer did not match"}
        time.sleep(0.02)
    time.sleep(0.5)
    sock = mqtt_connect(args["port"], "bench-dds-pub")
    if args["field"]:
        frames = [encode_publish(args["mqtt_topic"],
                                 json.dumps({**args["sample"], args["field"]: i}).encode(), 0)
                  for i in range(n)]
    else:
        frames = [encode_publish(args["mqtt_topic"], json.dumps(args["sample"]).encode(), 0)] * n
    window = args["window"]
    started = time.monotonic()
    sent = 0
    while sent < n and time.monotonic() < deadline:
        room = window - (sent - counter.count)
        if room <= 0:
            time.sleep(0.0005)
            continue
        batch = frames[sent:sent + min(room, 256)]
        sock.sendall(b"".join(batch))
        sent += len(batch)
    thread.join(max(deadline - time.monotonic(), 0))
    sock.close()
    return {**result, "started": started}


ROLES = {"writer": writer, "reader": reader, "mqtt_sub": mqtt_sub, "mqtt_to_dds": mqtt_to_dds}


def main() -> None:
    die_with_parent()
    role, args = sys.argv[1], json.loads(sys.argv[2])
    try:
        result = ROLES[role](args)
    except Exception as exc:  # the harness reports it with the run
        result = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
