"""Run a real ``Gateway`` in-process, in its own thread and event loop, for tests.

    with running_gateway(tmp_path) as gw:        # listeners on 127.0.0.1:0
        host, port = gw.address()                # the first listener
        gw.call(lambda: len(gw.broker.sessions)) # run code on the gateway's loop

The YAML text given is merged under the defaults this helper sets (one tcp listener
on 127.0.0.1:0, the HTTP API on 127.0.0.1:0, ``data_dir`` in ``tmp_path``,
``persistence: memory``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml

from broker_core.broker import Broker
from gateway.app import Gateway
from gateway.config import parse_config
from tests.helpers.timeouts import unit

__all__ = ["RunningGateway", "running_gateway"]

T = TypeVar("T")


class RunningGateway:
    def __init__(self, gateway: Gateway, loop: asyncio.AbstractEventLoop) -> None:
        self.gateway = gateway
        self.loop = loop

    @property
    def broker(self) -> Broker:
        return self.gateway.broker

    def address(self, listener: str | None = None) -> tuple[str, int]:
        if listener is None:
            return next(iter(self.gateway.addresses.values()))
        return self.gateway.addresses[listener]

    @property
    def port(self) -> int:
        return self.address()[1]

    def call(self, fn: Callable[[], T], timeout: float | None = None) -> T:
        """Runs ``fn`` on the gateway's loop and returns its result."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        return future.result(unit(5) if timeout is None else timeout)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@contextlib.contextmanager
def running_gateway(
    tmp_path: Path,
    config_yaml: str = "",
    loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
) -> Iterator[RunningGateway]:
    """``loop_factory``: the gateway's event loop (``uvloop.new_event_loop``, as
    ``edgebus run`` uses when uvloop is installed)."""
    base = {
        "listeners": [{"type": "tcp", "bind": "127.0.0.1:0"}],
        "data_dir": str(tmp_path / "data"),
        "persistence": "memory",
        "sys": {"interval": 0},
        "api": {"bind": "127.0.0.1:0"},
    }
    extra = yaml.safe_load(config_yaml) if config_yaml.strip() else {}
    text = yaml.safe_dump(_merge(base, extra or {}))
    config = parse_config(text, "test-gateway.yaml")
    loop = loop_factory()
    holder: dict[str, Any] = {}
    started = threading.Event()

    async def main() -> None:
        gateway = Gateway(config)
        holder["gateway"] = gateway
        task = asyncio.ensure_future(gateway.run())
        ready = asyncio.ensure_future(gateway.ready.wait())
        await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
        started.set()
        await task

    def thread_main() -> None:
        try:
            loop.run_until_complete(main())
        except BaseException as exc:
            holder["error"] = exc
            started.set()

    thread = threading.Thread(target=thread_main, name="edgebus-test-gateway", daemon=True)
    thread.start()
    if not started.wait(unit(10)):
        raise TimeoutError("gateway did not start")
    if "error" in holder:
        raise holder["error"]
    gateway = holder["gateway"]
    if not gateway.ready.is_set():
        thread.join(unit(5))
        raise RuntimeError(f"gateway stopped during start-up: {holder.get('error')!r}")
    running = RunningGateway(gateway, loop)
    try:
        yield running
    finally:
        loop.call_soon_threadsafe(gateway.stop)
        thread.join(unit(10))
        loop.close()
