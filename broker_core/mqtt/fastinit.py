"""Fast construction of frozen slotted dataclasses on the message hot path.

A frozen dataclass's ``__init__`` stores each field through ``object.__setattr__``
(its own ``__setattr__`` refuses), about four times the cost of a plain slot store;
every message passes through three such objects (``Publish``, ``Context``,
``PublishReceived``). ``frozen_factory(cls)`` returns a function taking every field
positionally that builds the instance as a twin class with the same slots and plain
attribute stores, then gives it its real class (CPython allows ``__class__``
assignment between classes of identical layout). The result is an ordinary instance
of ``cls``: frozen, equal, hashable and ``dataclasses.replace``-able as any other.
Use the class itself everywhere else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["frozen_factory"]


def frozen_factory(cls: type) -> Callable[..., Any]:
    params = dataclasses.fields(cls)
    names = [f.name for f in params]
    slots = getattr(cls, "__slots__", None)
    if slots is None or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__} is not a frozen slotted dataclass")
    twin = type(f"_{cls.__name__}Twin", (), {"__slots__": tuple(slots)})
    body = "\n".join(f"    obj.{name} = {name}" for name in names)
    source = (
        f"def new_{cls.__name__.lower()}({', '.join(names)}):\n"
        "    obj = _new(_twin)\n"
        f"{body}\n"
        "    obj.__class__ = _cls\n"
        "    return obj\n"
    )
    namespace: dict[str, Any] = {"_new": object.__new__, "_twin": twin, "_cls": cls}
    exec(source, namespace)
    factory: Callable[..., Any] = namespace[f"new_{cls.__name__.lower()}"]
    factory.__doc__ = f"A {cls.__name__}, every field given positionally (see fastinit)."
    return factory
