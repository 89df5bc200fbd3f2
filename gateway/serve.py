"""``edgebus run``: validate, start the gateway, serve until SIGTERM or SIGINT (SIGHUP
reloads). Imports no click: the console script (``gateway.entry``) calls
``run_gateway`` for ``edgebus run [-c FILE]`` without loading the CLI's library (~1.7 MB
of a running gateway; docs/performance.md, "Start-up memory"); ``gateway.cli``'s
``run`` calls it too.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

from broker_core.errors import ConfigError
from broker_core.memory import release_free_memory
from broker_core.store.schema import StoreError
from gateway.binding import BindError, unavailable_addresses
from gateway.config.light import validate_for_run
from gateway.data_lock import DataDirInUse, lock_data_dir
from gateway.logs import configure_logging

if TYPE_CHECKING:
    from gateway.app import Gateway

__all__ = ["GC_GEN0_THRESHOLD", "collect_less", "refuse", "run_gateway"]

log = logging.getLogger(__name__)

E = TypeVar("E", bound=BaseException)


def _leaves(group: BaseExceptionGroup[E]) -> list[E]:
    """The exceptions of ``group``, nested groups flattened."""
    out: list[E] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


def refuse(problems: list[str], status: int, prefix: str = "") -> NoReturn:
    """Print each problem on stderr and exit with ``status``."""
    for problem in problems:
        print(f"{prefix}{problem}", file=sys.stderr)
    raise SystemExit(status)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


#: The cyclic garbage collector's first threshold in a running gateway (CPython's default:
#: 700); see ``collect_less``.
GC_GEN0_THRESHOLD = 10_000


def collect_less() -> None:
    """The garbage collector's settings for a running gateway, set once it is ready: the
    one place they are set (docs/performance.md, "Garbage collection").

    - ``gc.freeze()``: the objects of start-up (modules, classes, the configuration's
      models: ~45,000) move to a permanent generation, which no collection traverses
      again. Full collections traversed them all, a few times per second under load,
      collecting nothing.
    - First threshold ``GC_GEN0_THRESHOLD``: a young collection per 10,000 container
      allocations instead of 700. Every message allocates a few (the packet, its
      Context, ...), most freed by their reference counts within the loop turn; at 700
      a collection came every few hundred messages, and what a turn holds (queued
      deliveries, the stream log's batch) was traversed and promoted again and again.
      Cyclic garbage lives a little longer (at most 10,000 objects).
    """
    gc.collect()  # start-up's garbage is not frozen
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])
    release_free_memory()  # what start-up freed, given back (~0.8 MB; performance.md)
    log.info(
        "garbage collector: %d start-up objects frozen, first threshold %d",
        gc.get_freeze_count(),
        GC_GEN0_THRESHOLD,
    )


def _reload(gateway: Gateway) -> None:
    """SIGHUP: re-read the configuration; a broken file changes nothing."""
    # A refusal is logged by Gateway.reload (ERROR "reload refused: ...", one record per
    # problem), through the configured handler: JSON, the log file.
    if gateway.stopping:  # SIGTERM came first: nothing starts any more
        log.info("reload ignored: the gateway is stopping")
        return
    try:
        gateway.reload()
    except ConfigError:
        return  # refused, and logged
    except Exception:  # a bug: logged here, through the configured handler, not asyncio's
        log.exception("reload failed")


def run_gateway(config_path: Path | None) -> None:
    """Start the gateway and serve until SIGTERM or SIGINT (SIGHUP reloads).

    The configuration is checked first, as `edgebus check` does: on any problem
    nothing starts and nothing is written (exit status 2; 1 for a busy address, a lost
    store or another system error).
    """
    try:  # in a child process: the gateway does not load the schema (gateway.config.light)
        valid = validate_for_run(config_path)
    except ConfigError as exc:
        refuse(exc.problems, 2)
    configure_logging(valid.config.logging)
    busy = unavailable_addresses(valid.config)
    if busy:
        refuse([f"{valid.where(error.path)}: {error}" for error in busy], 1)
    try:  # held until the process ends
        lock_data_dir(Path(valid.config.data_dir))
    except (DataDirInUse, OSError) as exc:
        refuse([f"{valid.where(('data_dir',))}: {exc}"], 1)
    from gateway.app import Gateway

    async def serve() -> None:
        gateway = Gateway(valid.config, config_path)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, gateway.stop)
        loop.add_signal_handler(signal.SIGHUP, _reload, gateway)
        async with asyncio.TaskGroup() as group:
            running = group.create_task(gateway.run())
            ready = group.create_task(gateway.ready.wait())
            await asyncio.wait((running, ready), return_when=asyncio.FIRST_COMPLETED)
            if ready.done():
                collect_less()
            else:
                ready.cancel()
        # Closing the loop would give SIGHUP back its default action, which ends the
        # process: one arriving in the last moments of a shutdown is ignored instead.
        loop.remove_signal_handler(signal.SIGHUP)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    try:
        with asyncio.Runner(loop_factory=_new_loop) as runner:
            runner.run(serve())
    except* BindError as bind_errors:
        lines = [f"{valid.where(error.path)}: {error}" for error in _leaves(bind_errors)]
        refuse(lines, 1)
    except* ConfigError as config_errors:
        lines = [line for exc in _leaves(config_errors) for line in exc.problems]
        refuse(lines, 2, "edgebus: ")
    except* StoreError as store_errors:  # a lost or corrupt store: one line, no traceback
        refuse([str(error) for error in _leaves(store_errors)], 1, "edgebus: ")
    except* OSError as os_errors:
        refuse([str(error) for error in _leaves(os_errors)], 1, "edgebus: ")
