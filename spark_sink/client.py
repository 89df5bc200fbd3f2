"""``GatewayClient``: the stream log's HTTP API as the PySpark source uses it.

Standard library only (urllib): it runs in Spark's Python workers, on any machine of a
cluster, where only ``spark_sink`` (and pyarrow, which Spark needs anyway) is installed.
It imports nothing of the gateway.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import IO, Any

__all__ = ["GatewayClient", "GatewayError", "RecordsResponse"]


class GatewayError(RuntimeError):
    """The gateway refused a request (``status``: its HTTP status), or could not be
    reached (``status`` None); the message says which."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class RecordsResponse:
    """A streamed answer of ``/stream/records``: read ``body``, then close it."""

    body: IO[bytes]
    media_type: str
    start: int  # the first offset the answer covers
    end: int  # the offset after the last

    def close(self) -> None:
        self.body.close()


class GatewayClient:
    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise GatewayError(
                f"gateway: expected an http(s) URL such as http://host:8081, got {url!r}"
            )
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._headers: dict[str, str] = {}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        elif username is not None:
            token = base64.b64encode(f"{username}:{password or ''}".encode()).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"

    def _open(self, path: str, query: dict[str, Any] | None = None) -> Any:
        url = f"{self.url}/api/v1{path}"
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        request = urllib.request.Request(url, headers=self._headers)
        try:
            return urllib.request.urlopen(request, timeout=self.timeout_s)
        except urllib.error.HTTPError as exc:
            detail = _detail(exc)
            exc.close()
            if exc.code == 401:
                raise GatewayError(
                    f"{url}: the gateway refused the credentials (401): give the option"
                    " apiKey, or username and password",
                    401,
                ) from None
            raise GatewayError(f"{url}: {exc.code} {detail}", exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise GatewayError(f"{url}: cannot reach the gateway: {reason}") from None

    def offsets(self) -> dict[str, int]:
        """``{"start", "end", "records", "bytes", "segments"}`` of the stream log."""
        with self._open("/stream/offsets") as response:
            found: dict[str, int] = json.loads(response.read())
        return found

    def records(
        self, start: int, end: int, topic: str | None = None, format: str = "arrow"
    ) -> RecordsResponse:
        """The records of ``[start, end)`` (all of them: no limit)."""
        query = {
            "start": start,
            "end": end,
            "limit": max(end - start, 1),
            "topic": None if topic in (None, "#") else topic,
            "format": format,
        }
        response = self._open("/stream/records", query)
        headers = response.headers
        return RecordsResponse(
            response,
            headers.get("Content-Type", ""),
            int(headers.get("X-Edgebus-Start", start)),
            int(headers.get("X-Edgebus-End", end)),
        )


def _detail(error: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(error.read())
        return str(body.get("detail", body))
    except (ValueError, OSError, AttributeError):
        return str(error.reason)
