"""The API key's rules, in a module that imports no pydantic: the schema checks a key
file with them, and the running API reads or creates one (``gateway.api.credentials``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["MIN_KEY_LENGTH", "default_key_file", "key_problem"]

#: The shortest API key accepted from the configuration.
MIN_KEY_LENGTH = 16


def default_key_file(data_dir: Path) -> Path:
    """Where the generated API key is kept when ``api.key_file`` is not set."""
    return data_dir / "api-key"


def key_problem(text: str) -> str | None:
    """Why ``text`` (read from a key file, stripped) is not a usable API key, or None."""
    if len(text) < MIN_KEY_LENGTH or any(char.isspace() for char in text):
        return (
            f"holds no usable key (at least {MIN_KEY_LENGTH} characters without white"
            " space); delete it to generate a new one"
        )
    return None
