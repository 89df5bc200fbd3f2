"""The SOME/IP adapter's own someipy daemon: a child process it starts and watches.

``python -m adapters.someip.daemon`` (someipyd with the workarounds of
``adapters/someip/daemon.py``) runs with a JSON config, its Unix socket and its log
(``someipyd.log``, truncated at each start) in the adapter's data directory. ``start()``
returns once the socket accepts connections; ``wait()`` returns when the daemon exits
(the adapter then fails and the supervisor restarts both with backoff); ``close()``
ends it (SIGTERM, then SIGKILL). The daemon also ends when the gateway's process dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from adapters.someip.config import DaemonConfig
from adapters.someip.daemon import PARENT_ENV
from broker_core.errors import AdapterConnectionError

__all__ = ["DaemonProcess", "socket_path_for"]

log = logging.getLogger(__name__)

_MAX_SOCKET_PATH = 100  # AF_UNIX paths are at most 107 bytes on Linux
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def socket_path_for(data_dir: Path) -> Path:
    """The own daemon's socket: in ``data_dir``, or in the temp directory when that path
    would be too long for a Unix socket."""
    path = data_dir / "someipyd.sock"
    if len(str(path)) <= _MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha1(str(data_dir.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"edgebus-someipyd-{digest}.sock"


class DaemonProcess:
    def __init__(self, config: DaemonConfig, data_dir: Path) -> None:
        self.config = config
        self.data_dir = data_dir
        self.socket_path = socket_path_for(data_dir)
        self.log_path = data_dir / "someipyd.log"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config_path = self.data_dir / "someipyd.json"
        config_path.write_text(
            json.dumps(
                {
                    "socket_path": str(self.socket_path),
                    "interface": self.config.interface,
                    "sd_address": self.config.sd_address,
                    "sd_port": self.config.sd_port,
                    "log_level": self.config.log_level,
                    "log_path": str(self.log_path),
                },
                indent=2,
            )
        )
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_PACKAGE_ROOT), *filter(None, [env.get("PYTHONPATH")])]
        )
        env[PARENT_ENV] = str(os.getpid())
        with self.log_path.open("wb") as output:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "adapters.someip.daemon",
                "--config",
                str(config_path),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                env=env,
            )
        log.info(
            "someipyd started (pid %d) on %s, service discovery %s:%d, socket %s",
            self.process.pid,
            self.config.interface,
            self.config.sd_address,
            self.config.sd_port,
            self.socket_path,
        )
        await self._until_ready()

    async def _until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.config.start_timeout
        while True:
            if self.process.returncode is not None:
                raise AdapterConnectionError(
                    f"someipyd exited with code {self.process.returncode}: {self.log_tail()}"
                )
            try:
                _, writer = await asyncio.open_unix_connection(str(self.socket_path))
            except OSError:
                if time.monotonic() > deadline:
                    raise AdapterConnectionError(
                        f"someipyd did not accept connections on {self.socket_path} within"
                        f" {self.config.start_timeout:g}s: {self.log_tail()}"
                    ) from None
                await asyncio.sleep(0.05)
                continue
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return

    async def wait(self) -> int:
        """Returns the daemon's exit code once it has exited."""
        assert self.process is not None
        return await self.process.wait()

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(empty log)"

    async def close(self, timeout_s: float = 2.0) -> None:
        process = self.process
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                async with asyncio.timeout(timeout_s):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        log.info("someipyd (pid %d) stopped with code %s", process.pid, process.returncode)
