"""An NNG peer (pynng) for the adapter tests, run as its own process: ``python
nng_peer.py <role> (--bind URL | --connect URL) [options]``.

JSON lines on stdout, as ``zmq_peer.py``: ``{"ready": true}``, then what the role
reports. Messages are ``topic + delimiter + payload`` (``--topic``, ``--delimiter``;
``--raw`` sends the payload alone). Roles:

- ``push``: sends ``--count`` messages, payload ``0``, ``1``, ..., then ``{"sent": n}``,
  and stays until ended: NNG has no linger, and closing the socket would discard what
  still waits in its send buffer (up to 8192 messages) before the adapter read it.
- ``pull``: receives ``--count`` messages (``{"message": ...}`` each with ``--print``),
  then ``{"received": n, "in_order": bool}`` (payloads ``0..n-1``, after the last
  delimiter unless ``--raw``).
- ``pub``: publishes every ``--interval`` seconds until killed.
- ``sub``: subscribes to ``--subscribe`` prefixes, prints ``--count`` messages.
- ``rep``: answers ``echo:`` + request, until killed.
- ``req``: sends each ``--data`` as a request, ``--parallel`` at once (contexts).

``--socket pair0|pair1`` makes ``push`` / ``pull`` use a pair socket instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time

import pynng


def out(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def body(args: argparse.Namespace, payload: bytes) -> bytes:
    if args.raw:
        return payload
    return args.topic.encode() + args.delimiter.encode() + payload


def setup(cls: type[pynng.Socket], args: argparse.Namespace) -> pynng.Socket:
    sock = (
        cls(recv_buffer_size=8192, send_buffer_size=8192)
        if cls
        not in (
            pynng.Sub0,
            pynng.Pub0,
        )
        else cls()
    )
    if cls is pynng.Sub0:
        for prefix in args.subscribe or [""]:
            sock.subscribe(prefix.encode())
    if args.bind:
        sock.listen(args.bind)
    else:
        sock.dial(args.connect, block=False)
    return sock


async def requests(args: argparse.Namespace) -> None:
    sock = setup(pynng.Req0, args)
    out(ready=True)
    slots = asyncio.Semaphore(args.parallel)

    async def ask(data: str) -> None:
        async with slots:
            ctx = sock.new_context()
            await ctx.asend(data.encode())
            reply = await ctx.arecv()
            ctx.close()
            out(request=data, reply=reply.decode("latin-1"))

    await asyncio.gather(*(ask(d) for d in args.data))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["push", "pull", "pub", "sub", "rep", "req"])
    p.add_argument("--bind")
    p.add_argument("--connect")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--topic", default="t")
    p.add_argument("--delimiter", default="/")
    p.add_argument("--raw", action="store_true")
    p.add_argument("--interval", type=float, default=0.02)
    p.add_argument("--subscribe", action="append")
    p.add_argument("--data", action="append", default=[])
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--print", action="store_true")
    p.add_argument("--socket", choices=["pair0", "pair1"], help="push / pull over a pair")
    args = p.parse_args()
    role = args.role
    if role == "req":
        asyncio.run(requests(args))
        return
    kind = {"push": pynng.Push0, "pull": pynng.Pull0, "pub": pynng.Pub0, "sub": pynng.Sub0}
    kind["rep"] = pynng.Rep0
    if args.socket:
        kind["push"] = kind["pull"] = pynng.Pair0 if args.socket == "pair0" else pynng.Pair1
    sock = setup(kind[role], args)
    out(ready=True)
    if role == "push":
        for i in range(args.count):
            sock.send(body(args, str(i).encode()))
        out(sent=args.count)
        threading.Event().wait()  # until the test ends the process (PeerProcess.close)
    elif role == "pull":
        in_order = True
        for i in range(args.count):
            data = sock.recv()
            if args.print:
                out(message=data.decode("latin-1"))
            payload = data if args.raw else data.rsplit(args.delimiter.encode(), 1)[-1]
            if payload != str(i).encode():
                in_order = False
        out(received=args.count, in_order=in_order)
    elif role == "pub":
        i = 0
        while True:
            sock.send(body(args, str(i).encode()))
            i += 1
            time.sleep(args.interval)
    elif role == "sub":
        for _ in range(args.count):
            out(message=sock.recv().decode("latin-1"))
    elif role == "rep":
        while True:
            sock.send(b"echo:" + sock.recv())


if __name__ == "__main__":
    main()
