"""Fixtures of the bridge tests: test certificates for one session, a remote mosquitto."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.bridge.support import Remote
from tests.integration.listeners.pki import Pki


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, a server certificate for 127.0.0.1, and client certificates on demand."""
    return Pki.create(tmp_path_factory.mktemp("bridge-pki"))


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    """A plain mosquitto standing in for the cloud."""
    with Remote(tmp_path / "remote") as broker:
        yield broker


@pytest.fixture
def secure_remote(tmp_path: Path, pki: Pki) -> Iterator[Remote]:
    """A mosquitto with the EMQX Cloud (TLS and password) and AWS IoT (mutual TLS)
    stand-in listeners."""
    with Remote(tmp_path / "remote", pki) as broker:
        yield broker
