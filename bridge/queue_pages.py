"""Queue rows read page by page from an SQLite database image, for a salvage.

``bridge.queue_salvage`` reads a damaged queue through SQLite's b-tree first; a row below
a damaged interior page (the table's root included) cannot be reached that way, though
its leaf page is intact. ``leaf_rows(image)`` finds those: it reads every table b-tree
leaf page of the image (the file as SQLite sees it, with its write-ahead log:
``Connection.serialize``) and decodes each cell whose record has a queue row's shape
(the row id, then topic text, payload blob, qos, retain, properties blob, received_at,
and ``released`` in schema 2). The pages on the freelist (rows deleted once the remote
acknowledged them, whose bytes stay there) are left out; when the freelist itself cannot
be read, nothing is returned, rather than send acknowledged messages again. The SQLite
file format: https://www.sqlite.org/fileformat2.html.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from typing import Any

#: The image: bytes, or the file mapped.
Buffer = bytes | mmap.mmap

__all__ = ["leaf_rows"]

_LEAF = 13  # a table b-tree leaf page
_HEADER = b"SQLite format 3\0"


class _Bad(Exception):
    """A page or cell that does not parse: skipped."""


def _varint(data: bytes | memoryview, at: int) -> tuple[int, int]:
    value = 0
    for index in range(8):
        if at + index >= len(data):
            raise _Bad
        byte = data[at + index]
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at + index + 1
    if at + 8 >= len(data):
        raise _Bad
    return (value << 8) | data[at + 8], at + 9


def leaf_rows(image: Buffer, wanted: Callable[[int], bool]) -> list[tuple[Any, ...]] | None:
    """``(seq, topic bytes, payload, qos, retain, properties, received_at, released)`` of
    every cell of a queue shape on a leaf page not on the freelist whose row id is
    ``wanted`` (the others are not decoded), in page order; None when the image's header
    or freelist cannot be read."""
    if len(image) < 100 or image[:16] != _HEADER:
        return None
    size = int.from_bytes(image[16:18], "big")
    size = 65536 if size == 1 else size
    usable = size - image[20]
    if size < 512 or usable < 480:
        return None
    pages = len(image) // size
    freed = _freelist(image, size, pages)
    if freed is None:
        return None
    view = memoryview(image)
    rows: list[tuple[Any, ...]] = []
    for number in range(2, pages + 1):  # page 1 holds the schema
        if number in freed:
            continue
        start = (number - 1) * size
        if view[start] != _LEAF:
            continue
        page = view[start : start + size]
        cells = int.from_bytes(page[3:5], "big")
        for cell in range(min(cells, (size - 8) // 2)):
            try:
                offset = int.from_bytes(page[8 + 2 * cell : 10 + 2 * cell], "big")
                row = _cell(view, page, offset, size, usable, pages, wanted)
            except _Bad:
                continue
            if row is not None:
                rows.append(row)
    return rows


def _freelist(image: Buffer, size: int, pages: int) -> set[int] | None:
    """The pages on the freelist (trunks and leaves), or None when it does not read."""
    trunk = int.from_bytes(image[32:36], "big")
    count = int.from_bytes(image[36:40], "big")
    freed: set[int] = set()
    while trunk:
        if trunk > pages or trunk in freed:
            return None
        freed.add(trunk)
        start = (trunk - 1) * size
        listed = int.from_bytes(image[start + 4 : start + 8], "big")
        if listed > (size - 8) // 4:
            return None
        for index in range(listed):
            leaf = int.from_bytes(image[start + 8 + 4 * index : start + 12 + 4 * index], "big")
            if not 1 < leaf <= pages:
                return None
            freed.add(leaf)
        trunk = int.from_bytes(image[start : start + 4], "big")
    return freed if len(freed) == count else None


def _cell(
    view: memoryview,
    page: memoryview,
    offset: int,
    size: int,
    usable: int,
    pages: int,
    wanted: Callable[[int], bool],
) -> tuple[Any, ...] | None:
    """The queue row in the cell at ``offset`` of a leaf ``page``, or None (another
    table's row, a row that is not ``wanted``)."""
    if not 8 <= offset < usable:
        raise _Bad
    length, at = _varint(page, offset)
    rowid, at = _varint(page, at)
    if rowid >= 2**63:
        raise _Bad
    if not wanted(rowid):
        return None
    most = usable - 35
    if length <= most:
        local = length
    else:
        least = (usable - 12) * 32 // 255 - 23
        local = least + (length - least) % (usable - 4)
        if local > most:
            local = least
    if at + local > usable:
        raise _Bad
    payload = bytes(page[at : at + local])
    if local < length:
        payload += _overflow(view, page, at + local, length - local, size, usable, pages)
    return _record(rowid, payload)


def _overflow(
    view: memoryview, page: memoryview, at: int, left: int, size: int, usable: int, pages: int
) -> bytes:
    """The ``left`` bytes of a payload on its overflow pages, from the chain at ``at``."""
    number = int.from_bytes(page[at : at + 4], "big")
    parts = []
    seen: set[int] = set()
    while left > 0:
        if not 1 < number <= pages or number in seen:
            raise _Bad
        seen.add(number)
        start = (number - 1) * size
        take = min(left, usable - 4)
        parts.append(bytes(view[start + 4 : start + 4 + take]))
        left -= take
        number = int.from_bytes(view[start : start + 4], "big")
    return b"".join(parts)


def _record(rowid: int, payload: bytes) -> tuple[Any, ...] | None:
    """A queue row from a record (``seq`` the row id), or None when it is not one."""
    header, at = _varint(payload, 0)
    if not 0 < header <= len(payload):
        raise _Bad
    types = []
    while at < header:
        kind, at = _varint(payload, at)
        types.append(kind)
    if not _queue_shape(types):
        return None
    values: list[Any] = []
    body = header
    for kind in types[1:]:
        value, body = _value(payload, body, kind)
        values.append(value)
    if body != len(payload):
        raise _Bad
    if len(values) == 6:
        values.append(0)  # schema 1: not released
    return (rowid, *values)


_INT_SIZES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}
_INTS = frozenset({*_INT_SIZES, 8, 9})


def _text(kind: int) -> bool:
    return kind >= 13 and kind % 2 == 1


def _blob(kind: int) -> bool:
    return kind >= 12 and kind % 2 == 0


def _queue_shape(types: list[int]) -> bool:
    """The serial types of a queue row: the row id (NULL: it is the row id), topic text,
    payload blob, qos, retain, properties blob, received_at (a real, or an integer when
    it has no fraction), and ``released`` (schema 2)."""
    if len(types) not in (7, 8) or types[0] != 0:
        return False
    if not (_text(types[1]) and _blob(types[2]) and _blob(types[5])):
        return False
    if types[3] not in _INTS or types[4] not in _INTS:
        return False
    if types[6] != 7 and types[6] not in _INTS:
        return False
    return len(types) == 7 or types[7] in _INTS


def _value(payload: bytes, at: int, kind: int) -> tuple[Any, int]:
    if kind in _INT_SIZES:
        end = at + _INT_SIZES[kind]
        if end > len(payload):
            raise _Bad
        return int.from_bytes(payload[at:end], "big", signed=True), end
    if kind == 0:
        return None, at
    if kind == 7:
        if at + 8 > len(payload):
            raise _Bad
        return struct.unpack(">d", payload[at : at + 8])[0], at + 8
    if kind in (8, 9):
        return kind - 8, at
    if kind >= 12:
        length = (kind - 12) // 2
        if at + length > len(payload):
            raise _Bad
        return bytes(payload[at : at + length]), at + length  # text too: bytes, decoded later
    raise _Bad
