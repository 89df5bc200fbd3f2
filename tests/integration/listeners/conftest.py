"""Fixtures of the listener tests: one set of test certificates per session."""

from __future__ import annotations

import pytest

from tests.integration.listeners.pki import Pki


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, a server certificate for 127.0.0.1, and client certificates on demand."""
    return Pki.create(tmp_path_factory.mktemp("pki"))
