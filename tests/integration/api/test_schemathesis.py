"""Schemathesis against the served OpenAPI description: no input makes the API answer
5xx. Positive (valid per the description) and negative (invalid) requests, a bounded
number per operation, with credentials; a client and a retained message exist so that
some generated requests reach them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.api.support import KEY, bearer
from tests.integration.broker.support import Clients

EXAMPLES = 30  # per operation and generation mode: about 2000 requests, ~40 s

AUTH = bearer(KEY)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    path: Path = tmp_path_factory.mktemp("schemathesis")
    # The stream log runs, so that its routes answer from a real log.
    with running_gateway(path, API_CONFIG + "stream:\n  enabled: true\n") as gateway:
        yield gateway


# Thousands of requests: on a loaded machine several times the suite's 120 s default.
@pytest.mark.timeout(900)
def test_no_input_makes_a_server_error(served: RunningGateway) -> None:
    http = http_of(served)
    clients = Clients(served)
    try:
        # Something for the generated requests to find.
        resident = clients.paho(5, "resident")
        resident.connect()
        resident.subscribe("fuzz/#", 1)
        http.post("/api/v1/publish", {"topic": "fuzz/kept", "payload": "k", "retain": True})

        schema = schemathesis.openapi.from_url(
            f"{http.base}/api/v1/openapi.json", headers=AUTH, timeout=unit(10)
        )
        # ok() fails (AttributeError) on an operation schemathesis could not read.
        operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
        assert len(operations) == 41
        failures: list[str] = []
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                strategy = operation.as_strategy(generation_mode=mode)

                @settings(
                    max_examples=EXAMPLES,
                    deadline=None,
                    derandomize=True,
                    database=None,
                    suppress_health_check=list(HealthCheck),
                )
                @given(case=strategy)
                def run(case: schemathesis.Case) -> None:
                    # Failures are collected, not raised: no shrinking, one report.
                    try:
                        response = case.call(base_url=http.base, headers=AUTH, timeout=unit(10))
                    except requests.RequestException as exc:
                        failures.append(f"{exc!r}: {case.as_curl_command()}")
                        return
                    if response.status_code >= 500:
                        failures.append(
                            f"{case.method} {case.formatted_path} -> {response.status_code}:"
                            f" {case.as_curl_command()}"
                        )

                run()
        assert failures == []
        # No generated body was a whole valid bridge (it would have started connecting).
        assert served.call(lambda: served.gateway.components.specs("bridge")) == []
    finally:
        clients.close_all()
