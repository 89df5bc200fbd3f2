"""Servers the connect benches run in processes of their own (``bench.connect_floor``,
``bench.reuseport_prototype``): ``python -m <module> --serve PORT`` serves on ``PORT``
and prints ``ready`` once it listens.

``serving(module, count)`` starts ``count`` of them on one free port and waits until
they answer a CONNECT; ``main(doc, run, serve)`` is such a module's command line: the
report of ``run(rounds)`` (a module that only serves has none), or with ``--serve PORT
[ARGS...]`` the server ``serve(PORT, *ARGS)`` on uvloop (a module that only reports has
none).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bench.brokers import free_port
from bench.client import mqtt_connect

__all__ = ["main", "serve_protocol", "serving"]

_START_TIMEOUT_S = 10.0


@contextmanager
def serving(
    module: str, count: int = 1, args: Sequence[str] = ()
) -> Iterator[tuple[int, list[int]]]:
    """``count`` processes of ``python -m module --serve PORT [ARGS...]``: (the port,
    their pids); stopped on exit."""
    port = free_port()
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", module, "--serve", str(port), *args], stdout=subprocess.PIPE
        )
        for _ in range(count)
    ]
    try:
        for process in processes:
            if process.stdout is None or process.stdout.readline().strip() != b"ready":
                raise RuntimeError(f"{module}: a server did not start")
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:  # they answer a CONNECT
            try:
                mqtt_connect(port, "probe", 4, timeout_s=5.0).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield port, [process.pid for process in processes]
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(10)


async def serve_protocol(
    protocol_factory: Callable[[], asyncio.BaseProtocol],
    port: int | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serves ``protocol_factory`` on 127.0.0.1:``port`` (or the listening ``sock``),
    prints ``ready`` and serves until cancelled: a ``serve`` of ``main``."""
    loop = asyncio.get_running_loop()
    if sock is not None:
        await loop.create_server(protocol_factory, sock=sock)
    else:
        await loop.create_server(protocol_factory, "127.0.0.1", port)
    print("ready", flush=True)
    await asyncio.Event().wait()


def main(
    doc: str,
    run: Callable[[int], list[str]] | None,
    serve: Callable[..., Coroutine[Any, Any, None]] | None = None,
) -> None:
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("serve_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        if serve is None:
            parser.error("this module serves nothing")
        import uvloop

        uvloop.run(serve(args.serve, *args.serve_args))
        return
    if run is None:
        parser.error("this module only serves: --serve PORT")
    print("\n".join(run(args.rounds)))
