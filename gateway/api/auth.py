"""Who may use the API: API keys and users from the ``api:`` section, or a generated key.

A request authenticates with one of

- ``Authorization: Bearer <key>`` or ``X-API-Key: <key>`` (a key of ``api.keys``, or
  the generated one), or
- ``Authorization: Basic ...`` (a user of ``api.users``).

Anything else is 401 with a ``WWW-Authenticate`` challenge naming the schemes accepted.
Keys and passwords are compared in constant time, against every candidate, so the time
taken says nothing about which one came close.

The credentials themselves (``Credentials``, ``build_credentials``, the generated key)
live in ``gateway.api.credentials``, which needs no web framework; this module is the
FastAPI dependency that checks them.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import (
    APIKeyHeader,
    HTTPAuthorizationCredentials,
    HTTPBasic,
    HTTPBasicCredentials,
    HTTPBearer,
)

from gateway.api.credentials import (
    GENERATED_KEY_NAME,
    REALM,
    Credentials,
    Principal,
    build_credentials,
    default_key_file,
    load_or_create_key,
)

__all__ = [
    "GENERATED_KEY_NAME",
    "Credentials",
    "Principal",
    "authenticate",
    "build_credentials",
    "caller_of",
    "challenge_headers",
    "default_key_file",
    "load_or_create_key",
]


def challenge_headers(credentials: Credentials) -> dict[str, str]:
    """The ``WWW-Authenticate`` header of a 401: the schemes this API accepts."""
    challenges = [f'Bearer realm="{REALM}"']
    if credentials.accepts_users:
        challenges.append(f'Basic realm="{REALM}"')
    return {"WWW-Authenticate": ", ".join(challenges)}


# The schemes, declared so that the OpenAPI description names them; none fails on its
# own (auto_error=False), ``authenticate`` decides.
_bearer = HTTPBearer(auto_error=False, description="An API key as a bearer token.")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key.")


class _Basic(HTTPBasic):
    """``HTTPBasic`` for which malformed credentials (not base64, no colon) are no
    credentials: FastAPI answers them with its own 401 (``Not authenticated``, a Basic
    challenge only) even with ``auto_error=False``; ``authenticate`` answers them as any
    other failure."""

    async def __call__(self, request: Request) -> HTTPBasicCredentials | None:  # type: ignore[override]
        try:
            return await super().__call__(request)
        except HTTPException:
            return None


_basic = _Basic(auto_error=False, realm=REALM, description="A user of `api.users`.")


async def caller_of(request: Request) -> Principal | None:
    """The caller the request's credentials name, or None; outside FastAPI's dependency
    resolution (an error handler answering a request that failed before it)."""
    try:
        return await authenticate(
            request, await _bearer(request), await _api_key(request), await _basic(request)
        )
    except HTTPException:
        return None


async def authenticate(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
    basic: Annotated[HTTPBasicCredentials | None, Depends(_basic)],
) -> Principal:
    """The FastAPI dependency guarding every endpoint: the caller, or 401."""
    credentials: Credentials = request.app.state.credentials
    principal: Principal | None = None
    if bearer is not None:
        principal = credentials.check_key(bearer.credentials)
    elif api_key is not None:
        principal = credentials.check_key(api_key)
    elif basic is not None:
        principal = credentials.check_user(basic.username, basic.password)
    if principal is None:
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong credentials",
            headers=challenge_headers(credentials),
        )
    return principal
