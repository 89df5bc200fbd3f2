"""What ``edgebus run`` with the embedded defaults (MQTT, WebSocket, HTTP API) imports:
no adapter's protocol library, no bridge or Spark library, and not the web framework
before the API's first connection (issue 17: an adapter's libraries are paid for only
when such an adapter is configured).

The check runs in a fresh interpreter (this process has imported everything the other
tests needed): it validates the default configuration and builds the ``Gateway`` as
``edgebus run`` does (``gateway.entry``, ``gateway.serve``), then lists ``sys.modules``:
nor the configuration schema (pydantic), YAML, websockets or click either
(tests/integration/operations/test_start_up_memory.py checks the running process).
Building the gateway writes the API key into ``./edgebus-data``, so it runs in a
temporary directory.
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
# click: the console script starts a plain `run` without it (gateway.entry).
RUN_ELSEWHERE = ("pydantic", "pydantic_core", "yaml", "websockets", "click")
# OpenSSL's digests (0.4 MB of idle RSS) and the random module (0.2 MB) load with their
# first use: the API's first request, the rule engine, a component's restart. Random ids
# come from os.urandom, as the secrets module takes them.
ON_FIRST_USE = ("hashlib", "_hashlib", "hmac", "secrets", "random")
# The rule engine and the webhooks: built when rules or webhooks are configured, a reload
# adds rules or the HTTP API is used (gateway.app, Gateway.rules).
ON_FIRST_RULE = ("gateway.rules", "gateway.webhook", "gateway.mapping")

_PROBE = """
import json, sys
import gateway.entry, gateway.serve
from gateway.config.light import validate_for_run
from gateway.app import Gateway
valid = validate_for_run(None)
Gateway(valid.config)
print(json.dumps(sorted(sys.modules)))
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
    assert sorted(tops & set(ON_FIRST_USE)) == []
    assert sorted(m for m in modules if m.startswith(ON_FIRST_RULE)) == []
    assert sorted(m for m in modules if m.startswith(("adapters", "bridge", "spark_sink"))) == []
