"""What ``edgebus run`` with the embedded defaults (MQTT, WebSocket, HTTP API) imports:
no adapter's protocol library, no bridge or Spark library, and not the web framework
before the API's first connection (issue 17: an adapter's libraries are paid for only
when such an adapter is configured).

The check runs in a fresh interpreter (this process has imported everything the other
tests needed): it validates the default configuration and runs the ``Gateway`` as
``edgebus run`` does (listeners on free ports), then lists ``sys.modules`` once it is
ready: nor the configuration schema (pydantic), YAML or websockets either. Building the gateway writes the API
key into ``./edgebus-data``, so it runs in a temporary directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.timeouts import unit

# Libraries that only an adapter, a bridge profile or the Spark sink needs.
COMPONENT_LIBRARIES = (
    "cyclonedds",
    "zmq",
    "pynng",
    "someipy",
    "pyspark",
    "boto3",
    "botocore",
    "paho",
    "aiohttp",  # the webhooks' client, loaded when a webhook is configured
)
# Loaded by the HTTP API on its first connection (gateway.api.server).
WEB_FRAMEWORK = ("fastapi", "starlette", "uvicorn", "prometheus_client")
# The configuration schema and the YAML parser run in the child process that validates
# (gateway.config.light); websockets loads with a WebSocket listener's first connection.
RUN_ELSEWHERE = ("pydantic", "pydantic_core", "yaml", "websockets")

_PROBE = """
import json, sys
import asyncio
from gateway.config.light import validate_for_run
from gateway.app import Gateway
valid = validate_for_run(None)

async def main():
    gateway = Gateway(valid.config)
    for listener in gateway.config.listeners:  # port 0: another test may hold 1883 / 8083
        object.__setattr__(listener, "_fields", {**listener._fields, "bind": type(listener.bind)("127.0.0.1", 0)})
    async with asyncio.TaskGroup() as group:
        running = group.create_task(gateway.run())
        await gateway.ready.wait()
        print(json.dumps(sorted(sys.modules)))
        gateway.stop()
        await running

asyncio.run(main())
"""


def _modules_of_a_default_gateway(cwd: Path) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=unit(60),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_the_default_gateway_imports_no_component_library_and_no_web_framework(
    tmp_path: Path,
) -> None:
    modules = _modules_of_a_default_gateway(tmp_path)
    tops = {name.split(".")[0] for name in modules}
    assert sorted(tops & set(COMPONENT_LIBRARIES)) == []
    assert sorted(tops & set(WEB_FRAMEWORK)) == []
    assert sorted(tops & set(RUN_ELSEWHERE)) == []
    assert sorted(m for m in modules if m.startswith(("adapters", "bridge", "spark_sink"))) == []
