"""An adapter module whose native library is not installed."""

import edgebus_missing_lib  # type: ignore[import-not-found]  # noqa: F401


class Adapter:  # pragma: no cover - never importable
    pass
