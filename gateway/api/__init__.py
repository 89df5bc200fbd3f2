"""The HTTP management API (``/api/v1/...``) and Prometheus ``/metrics``.

``ApiServer(gateway)`` serves ``create_app(gateway)`` with uvicorn in the gateway's
event loop; docs/api.md describes the endpoints. ``create_app`` (FastAPI) is imported
on first use: the server loads it when the API gets its first connection.
"""

from __future__ import annotations

from typing import Any

from gateway.api.server import ApiServer

__all__ = ["ApiServer", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from gateway.api.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
