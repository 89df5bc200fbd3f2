"""QoS 2 after PUBREC: the *released* marks of the bridge's queued messages.

Once the remote sent PUBREC for a QoS 2 message it owns it, and must never see its
PUBLISH again in that session: it would deliver it twice once our PUBREL reached it
(MQTT 5.0 4.3.3, 4.4). So:

- ``pubrec(item)`` marks the row *released* on disk (``DiskQueue.release``, in the next
  commit) and holds the message in ``releasing``; ``committed()``, called on that
  commit, hands back the messages whose PUBREL may now go out, so that a restart after
  a ``kill -9`` finds every PUBREL that was sent. A PUBREC again for a message whose
  PUBREL went out (or goes) on this link is ignored.
- A released message is sent again as a PUBREL when the session is present (MQTT 5.0
  4.4); a remote that answers PUBCOMP to a Packet Identifier it completed already ends
  it there.
- Without a session (clean start, or the remote lost it), the remote forgot the Packet
  Identifier, and whether it delivered the message depends on it: mosquitto delivers
  an incoming QoS 2 message only when our PUBREL comes, and drops it with the session
  before that (EMQX delivers at the PUBLISH). ``unrelease(ready)`` undoes the marks of
  the released messages about to be sent (``DiskQueue.unrelease``, ``unreleasing`` until
  the commit), and only then does their PUBLISH go again: at least once, never lost,
  and a later run that finds a session sends that PUBLISH again rather than a PUBREL
  for it.

The ``Forwarder`` (``bridge.forward``) owns the window and the wire: it calls these on
the remote's PUBREC, on each commit of the queue and before sending a released message
without a session, and writes the PUBRELs.
"""

from __future__ import annotations

from collections.abc import Iterable

from bridge.mapping import Queued
from bridge.queue import DiskQueue

__all__ = ["Releases"]


class Releases:
    """The QoS 2 messages between PUBREC and the commit of their released mark, and the
    released ones whose mark is being undone; see the module docstring."""

    def __init__(self, queue: DiskQueue) -> None:
        self.queue = queue
        #: QoS 2 messages the remote sent PUBREC for, by seq: their PUBRELs wait for the
        #: commit that marks them released on disk.
        self.releasing: dict[int, Queued] = {}
        #: Released messages to send again as PUBLISH (a new session), by seq: they wait
        #: for the commit that undoes their released marks.
        self.unreleasing: dict[int, Queued] = {}

    def pubrec(self, item: Queued, qos2_window: int) -> bool:
        """The remote has the QoS 2 message ``item``: marks it released on disk. True
        when its PUBREL may go at once (it is no longer queued: nothing to keep on
        disk); otherwise it goes once ``committed()`` hands it back."""
        if item.released or item.seq in self.releasing:
            return False  # its PUBREL went out (or goes) on this link: a PUBREC again
        if self.queue.release(item.seq):
            self.releasing[item.seq] = item
            if 2 * len(self.releasing) >= qos2_window:
                # As the forwarder's ``_hurry``: the QoS 2 window waits on it.
                self.queue.commit_now()
            return False
        item.released = True  # no longer queued (dropped meanwhile)
        return True

    @property
    def waiting(self) -> bool:
        """Marks wait for the queue's next commit."""
        return bool(self.releasing or self.unreleasing)

    def committed(self) -> list[Queued]:
        """The commit that wrote the marks asked so far is made: the messages now
        released, whose PUBRELs may go; the unreleased ones may be sent as PUBLISH."""
        items = list(self.releasing.values())
        self.releasing.clear()
        for item in items:
            item.released = True
        if self.unreleasing:
            for item in self.unreleasing.values():
                item.released = False
            self.unreleasing.clear()
        return items

    def unrelease(self, ready: Iterable[Queued], window: int) -> None:
        """A new session (none present): the remote forgot the released messages among
        the first ``window`` of ``ready``, so their PUBLISH goes again, once their
        released marks are undone on disk (a restart that finds a session then must not
        send PUBREL for a PUBLISH the remote may not have)."""
        for position, item in enumerate(ready):
            if position >= window:
                break
            if item.released and item.seq not in self.unreleasing:
                if self.queue.unrelease(item.seq):
                    self.unreleasing[item.seq] = item
                else:  # no longer queued: nothing on disk to undo
                    item.released = False
