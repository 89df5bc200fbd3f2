"""``QueueIndex``: what the bridge queue knows of its rows without the disk.

The size and arrival time of every queued row, by sequence number, in order, so that
the queue's depth, bytes, oldest age and the overflow decisions (``bridge.forward``)
never wait for the disk. ``DiskQueue`` (``bridge.queue``) keeps one, filled by its
appends and, at open, by the rows an earlier run left.
"""

from __future__ import annotations

from array import array

__all__ = ["QueueIndex"]


class QueueIndex:
    """The size and arrival time of every queued row, by sequence number, in order.

    Two compact arrays indexed by ``seq - base`` (a removed row has size -1), so a
    million queued messages cost about 12 MB here and every question is answered
    without the disk.
    """

    def __init__(self) -> None:
        self.base = 1  # seq of position 0
        self.head = 0  # first position that may be live
        self.sizes = array("q")
        self.times = array("d")
        self.count = 0
        self.bytes = 0

    @property
    def last(self) -> int:
        """The highest sequence number ever added (``base - 1`` when none)."""
        return self.base + len(self.sizes) - 1

    def add(self, seq: int, size: int, received_at: float) -> None:
        sizes = self.sizes
        if sizes and seq == self.base + len(sizes):  # the next one: the usual case
            sizes.append(size)
            self.times.append(received_at)
            self.count += 1
            self.bytes += size
            return
        gap = seq - self.last - 1
        if gap < 0:
            raise ValueError(f"sequence {seq} is not after {self.last}")
        if not self.sizes:
            self.base, self.head = seq, 0
        else:
            for _ in range(gap):
                self.sizes.append(-1)
                self.times.append(0.0)
        self.sizes.append(size)
        self.times.append(received_at)
        self.count += 1
        self.bytes += size

    def contains(self, seq: int) -> bool:
        position = seq - self.base
        return self.head <= position < len(self.sizes) and self.sizes[position] >= 0

    def remove(self, seq: int) -> int:
        """Forgets ``seq``; returns its size, or -1 when it was not there."""
        position = seq - self.base
        if not (self.head <= position < len(self.sizes)):
            return -1
        size = self.sizes[position]
        if size < 0:
            return -1
        self.sizes[position] = -1
        self.count -= 1
        self.bytes -= size
        if position == self.head:
            self._advance()
        return size

    def remove_many(self, seqs: list[int]) -> list[int]:
        """``remove`` of each of ``seqs`` (a run of acknowledgements); returns those
        that were there."""
        base, head, sizes = self.base, self.head, self.sizes
        end = len(sizes)
        gone: list[int] = []
        freed = 0
        for seq in seqs:
            position = seq - base
            if head <= position < end:
                size = sizes[position]
                if size >= 0:
                    sizes[position] = -1
                    freed += size
                    gone.append(seq)
        self.count -= len(gone)
        self.bytes -= freed
        if head < end and sizes[head] < 0:
            self._advance()
        return gone

    def first(self, at_least: int = 0) -> int | None:
        """The lowest live sequence number that is ``>= at_least``; None if none."""
        position = max(self.head, at_least - self.base)
        sizes = self.sizes
        while position < len(sizes):
            if sizes[position] >= 0:
                return self.base + position
            position += 1
        return None

    def oldest_time(self) -> float | None:
        first = self.first()
        return None if first is None else self.times[first - self.base]

    def nth(self, n: int) -> int | None:
        """The sequence number of the ``n``-th live row (0 = the oldest)."""
        position = self.head
        sizes = self.sizes
        while position < len(sizes):
            if sizes[position] >= 0:
                if n == 0:
                    return self.base + position
                n -= 1
            position += 1
        return None

    def _advance(self) -> None:
        sizes = self.sizes
        head = self.head
        while head < len(sizes) and sizes[head] < 0:
            head += 1
        self.head = head
        if head >= 4096 and head * 2 >= len(sizes):  # drop the dead prefix
            del sizes[:head]
            del self.times[:head]
            self.base += head
            self.head = 0
