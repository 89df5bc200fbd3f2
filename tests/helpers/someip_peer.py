"""A someipy app in its own process, for tests and the bench: a server or a client of one
service, driven by JSON lines on stdin, reporting JSON lines on stdout.

    python -m tests.helpers.someip_peer '<json config>'

Config: ``role`` (``server`` | ``client``), ``socket`` (the daemon's), ``interface``,
``port`` (the endpoint), ``service``, ``instance``, ``major``, ``eventgroups`` ({id:
[event ids]}), ``methods`` ({id: behaviour}), ``ttl``, ``cycle_ms``.

Method behaviours (server): ``"reverse"`` (answers the request reversed), ``"error:N"``
(an ERROR with return code N), ``"sleep:S"`` (answers after S seconds), ``"hex:..."``
(answers those bytes).

Commands: ``{"op": "send", "eventgroup": g, "event": e, "payload": hex}``,
``{"op": "burst", "eventgroup": g, "event": e, "count": n, "size": b, "rate": r}`` (n
events of b bytes, numbered, at most r per second; r 0: as fast as possible),
``{"op": "stop_offer"}``, ``{"op": "call", "method": m, "payload": hex, "id": x}``,
``{"op": "count"}``, ``{"op": "reset"}`` (client: zero the event count), ``{"op": "exit"}``.

Reports: ``{"ev": "ready"}``, ``{"ev": "available"}`` (client: the service was found),
``{"ev": "event", "event": e, "payload": hex}`` (client; with ``"quiet": true`` in the
config only counts), ``{"ev": "count", "events": n, "first": t, "last": t}`` (on
``{"op": "count"}``), ``{"ev": "result", "id": x, "code": c, "payload": hex}``,
``{"ev": "request", "method": m, "payload": hex}`` (server), ``{"ev": "sent", "count": n,
"seconds": s}`` (after a burst).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from typing import Any

from someipy import (
    ClientServiceInstance,
    Event,
    EventGroup,
    MessageType,
    Method,
    MethodResult,
    ReturnCode,
    ServerServiceInstance,
    ServiceBuilder,
    TransportLayerProtocol,
    connect_to_someipy_daemon,
)
from someipy.someipy_logging import set_someipy_log_level

UDP = TransportLayerProtocol.UDP


def say(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def behaviour(spec: str) -> Any:
    async def handler(payload: bytes, addr: tuple[str, int]) -> MethodResult:
        say(ev="request", payload=payload.hex())
        result = MethodResult()
        kind, _, arg = spec.partition(":")
        if kind == "reverse":
            result.payload = payload[::-1]
        elif kind == "error":
            result.message_type = MessageType.ERROR
            result.return_code = ReturnCode(int(arg, 0))
        elif kind == "sleep":
            await asyncio.sleep(float(arg))
            result.payload = payload
        elif kind == "hex":
            result.payload = bytes.fromhex(arg)
        return result

    return handler


async def main(config: dict[str, Any]) -> None:
    set_someipy_log_level(logging.ERROR)
    daemon = await connect_to_someipy_daemon({"socket_path": config["socket"]})
    builder = (
        ServiceBuilder()
        .with_service_id(config["service"])
        .with_major_version(config.get("major", 1))
    )
    server = config["role"] == "server"
    for method_id, spec in config.get("methods", {}).items():
        handler = behaviour(spec) if server else None
        builder.with_method(Method(int(method_id), UDP, handler))
    groups = [
        EventGroup(id=int(group), events=[Event(id=e, protocol=UDP) for e in events])
        for group, events in config.get("eventgroups", {}).items()
    ]
    for group in groups:
        builder.with_eventgroup(group)
    service = builder.build()
    args = (daemon, service, config["instance"], config["interface"], config["port"])
    if server:
        instance: Any = ServerServiceInstance(
            *args, ttl=config.get("ttl", 3), cyclic_offer_delay_ms=config.get("cycle_ms", 500)
        )
        await instance.start_offer()
    else:
        instance = ClientServiceInstance(*args)
        stats = {"events": 0, "first": 0.0, "last": 0.0}
        quiet = config.get("quiet", False)

        def on_event(event_id: int, payload: bytes) -> None:
            now = time.monotonic()
            if not stats["events"]:
                stats["first"] = now
            stats["events"] += 1
            stats["last"] = now
            if not quiet:
                say(ev="event", event=event_id, payload=payload.hex())

        instance.register_callback(on_event)
        for group in groups:
            instance.subscribe_eventgroup(group, 5)
    say(ev="ready")
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    tasks: set[asyncio.Task[None]] = set()
    if not server:
        tasks.add(asyncio.create_task(announce_available(instance)))
    while line := await reader.readline():
        command = json.loads(line)
        op = command["op"]
        if op == "exit":
            break
        if op == "send":
            payload = bytes.fromhex(command["payload"])
            instance.send_event(command["eventgroup"], command["event"], payload)
        elif op == "burst":
            task = asyncio.create_task(burst(daemon, instance, command))
            tasks.add(task)
        elif op == "stop_offer":
            await instance.stop_offer()
            say(ev="stopped")
        elif op == "count":
            say(ev="count", **stats)
        elif op == "reset":
            stats.update(events=0, first=0.0, last=0.0)
        elif op == "call":
            task = asyncio.create_task(call(instance, command))
            tasks.add(task)
    await asyncio.sleep(0.2)  # let queued messages reach the daemon


async def announce_available(instance: Any) -> None:
    while not await instance.is_available():
        await asyncio.sleep(0.1)
    say(ev="available")


async def burst(daemon: Any, instance: Any, command: dict[str, Any]) -> None:
    count, size, rate = command["count"], command.get("size", 8), command.get("rate", 0)
    started = time.monotonic()
    for n in range(count):
        instance.send_event(
            command["eventgroup"], command["event"], n.to_bytes(8, "big").ljust(size, b"\0")
        )
        if rate:
            delay = started + (n + 1) / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        elif daemon._tx_queue.qsize() > 200:
            await daemon._tx_queue.join()
    await daemon._tx_queue.join()
    say(ev="sent", count=count, seconds=time.monotonic() - started)


async def call(instance: Any, command: dict[str, Any]) -> None:
    try:
        result = await instance.call_method(command["method"], bytes.fromhex(command["payload"]))
    except Exception as exc:
        say(ev="result", id=command.get("id"), code=-1, error=repr(exc))
        return
    say(
        ev="result",
        id=command.get("id"),
        code=result.return_code.value,
        payload=result.payload.hex(),
    )


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
