"""A ZeroMQ peer for the adapter tests, run as its own process: ``python zmq_peer.py
<role> (--bind URL | --connect URL) [options]``.

It prints JSON lines on stdout: ``{"ready": true}`` once its socket is set up, then
what the role reports (messages received, replies, a summary). Message frames are
written as latin-1 text. Roles:

- ``push``: sends ``--count`` messages, payload ``0``, ``1``, ... (``--frames`` layout,
  ``--topic``), then ``{"sent": n}``; waits until they are delivered.
- ``pull``: receives ``--count`` messages; ``{"message": frames}`` each with
  ``--print``, then ``{"received": n, "in_order": bool}`` (payloads ``0..n-1``).
- ``pub``: publishes ``--topic`` messages every ``--interval`` seconds until killed.
- ``sub``: subscribes to ``--subscribe`` prefixes, prints ``--count`` messages.
- ``stall``: subscribes to everything, reads one message and prints ``{"probed":
  true}``, then never reads again (queue and buffers of one message's size), until
  killed.
- ``rep``: answers every request with ``echo:`` and the request's frames joined by
  ``|``, until killed (``--delay`` seconds before each answer).
- ``req``: sends each ``--data`` as a request, ``--parallel`` at once (one REQ socket
  each), prints ``{"request": ..., "reply": ...}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import zmq


def out(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def text(frames: list[bytes]) -> list[str]:
    return [f.decode("latin-1") for f in frames]


def frames_of(topic: str, payload: bytes, layout: str, delimiter: str) -> list[bytes]:
    if layout == "multipart":
        return [topic.encode(), payload]
    if layout == "prefix":
        return [topic.encode() + delimiter.encode() + payload]
    return [payload]


def setup(
    ctx: zmq.Context[zmq.Socket[bytes]], kind: int, args: argparse.Namespace
) -> zmq.Socket[bytes]:
    sock = ctx.socket(kind)
    hwm = 1 if args.role == "stall" else 100_000
    sock.setsockopt(zmq.SNDHWM, hwm)
    sock.setsockopt(zmq.RCVHWM, hwm)
    if args.role == "stall":
        sock.setsockopt(zmq.RCVBUF, 4096)
    if kind == zmq.SUB:
        for prefix in args.subscribe or [""]:
            sock.setsockopt(zmq.SUBSCRIBE, prefix.encode())
    if args.bind:
        sock.bind(args.bind)
    else:
        sock.connect(args.connect)
    return sock


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["push", "pull", "pub", "sub", "stall", "rep", "req"])
    p.add_argument("--bind")
    p.add_argument("--connect")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--topic", default="t")
    p.add_argument("--frames", default="multipart")
    p.add_argument("--delimiter", default="")
    p.add_argument("--interval", type=float, default=0.02)
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--subscribe", action="append")
    p.add_argument("--data", action="append", default=[])
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--print", action="store_true")
    args = p.parse_args()
    ctx = zmq.Context()
    role = args.role
    if role == "req":
        socks = [setup(ctx, zmq.REQ, args) for _ in range(args.parallel)]
        out(ready=True)
        pending = list(args.data)
        while pending:
            batch, pending = pending[: len(socks)], pending[len(socks) :]
            for sock, data in zip(socks, batch, strict=False):
                sock.send(data.encode())
            for sock, data in zip(socks, batch, strict=False):
                out(request=data, reply=sock.recv().decode("latin-1"))
        return
    kind = {"push": zmq.PUSH, "pull": zmq.PULL, "pub": zmq.PUB, "sub": zmq.SUB, "rep": zmq.REP}
    kind["stall"] = zmq.SUB
    sock = setup(ctx, kind[role], args)
    out(ready=True)
    if role == "push":
        for i in range(args.count):
            sock.send_multipart(frames_of(args.topic, str(i).encode(), args.frames, args.delimiter))
        out(sent=args.count)
        sock.close(linger=-1)
        ctx.term()
    elif role == "pull":
        in_order = True
        for i in range(args.count):
            frames = sock.recv_multipart()
            if args.print:
                out(message=text(frames))
            if frames[-1] != str(i).encode():
                in_order = False
        out(received=args.count, in_order=in_order)
    elif role == "pub":
        i = 0
        while True:
            sock.send_multipart(frames_of(args.topic, str(i).encode(), args.frames, args.delimiter))
            i += 1
            time.sleep(args.interval)
    elif role == "sub":
        for _ in range(args.count):
            out(message=text(sock.recv_multipart()))
    elif role == "stall":
        sock.recv_multipart()  # the subscription has reached the publisher
        out(probed=True)
        while True:
            time.sleep(3600)
    elif role == "rep":
        while True:
            frames = sock.recv_multipart()
            if args.delay:
                time.sleep(args.delay)
            sock.send(b"echo:" + b"|".join(frames))


if __name__ == "__main__":
    main()
