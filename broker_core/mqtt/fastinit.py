"""Faster ``__init__`` for frozen slotted dataclasses on the message hot path.

A frozen dataclass's generated ``__init__`` assigns each field through
``object.__setattr__``, which costs about three times a plain slot store; a message
passes through two such objects (``Publish``, ``Context``). ``fast_init`` replaces
``__init__`` with one that stores through the slots' member descriptors. The class
stays a frozen dataclass: attribute assignment still raises ``FrozenInstanceError``,
and ``dataclasses.replace``, equality, hashing and ``repr`` are unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fast_init"]

T = TypeVar("T")

_MISSING = dataclasses.MISSING


def fast_init(cls: type[T]) -> type[T]:
    params: list[str] = []
    body: list[str] = []
    namespace: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = f.name
        setter = f"_set_{name}"
        namespace[setter] = cls.__dict__[name].__set__
        if not f.init:
            if f.default is not _MISSING:
                namespace[f"_default_{name}"] = f.default
                body.append(f"    {setter}(self, _default_{name})")
            continue
        if f.default is not _MISSING:
            namespace[f"_default_{name}"] = f.default
            params.append(f"{name}=_default_{name}")
            body.append(f"    {setter}(self, {name})")
        elif f.default_factory is not _MISSING:
            namespace[f"_factory_{name}"] = f.default_factory
            params.append(f"{name}=_MISSING")
            body.append(f"    {setter}(self, _factory_{name}() if {name} is _MISSING else {name})")
        else:
            params.append(name)
            body.append(f"    {setter}(self, {name})")
    namespace["_MISSING"] = _MISSING
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body or ["    pass"])
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
