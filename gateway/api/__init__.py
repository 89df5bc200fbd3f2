"""The HTTP management API (``/api/v1/...``) and Prometheus ``/metrics``.

``ApiServer(gateway)`` serves ``create_app(gateway)`` with uvicorn in the gateway's
event loop; docs/api.md describes the endpoints.
"""

from __future__ import annotations

from gateway.api.app import create_app
from gateway.api.server import ApiServer

__all__ = ["ApiServer", "create_app"]
