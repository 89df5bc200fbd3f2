"""Service availability from SOME/IP service discovery, as states (pure: no I/O, no clock).

The adapter listens to the discovery multicast group and feeds what it hears here:

- an OfferService entry (TTL > 0): the instance is ``offered`` until ``now + ttl``
  (TTL 0xFFFFFF: until further notice);
- a StopOfferService entry (an offer with TTL 0): ``stopped``;
- no offer renewed before the deadline: ``expired`` (a server that died, a cable cut);
- an offer of another major version, or of another minor version than a configured
  one: ``incompatible`` (it is not the configured service: someipy's daemon does not
  use it either). While the configured version is offered, offers of other versions
  change nothing; a StopOffer counts only for the version it names.

Every instance watched starts ``unknown``. Each call returns the ``Status`` to publish
when the state (or the offered endpoint or version) changed, else None; a renewed offer
changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "EXPIRED",
    "INCOMPATIBLE",
    "INFINITE_TTL",
    "OFFERED",
    "STOPPED",
    "UNKNOWN",
    "Availability",
    "Status",
    "Watched",
]

OFFERED = "offered"
INCOMPATIBLE = "incompatible"
STOPPED = "stopped"
EXPIRED = "expired"
UNKNOWN = "unknown"
INFINITE_TTL = 0xFFFFFF


@dataclass(frozen=True, slots=True)
class Status:
    service_id: int
    instance_id: int
    state: str
    major_version: int | None = None
    minor_version: int | None = None
    endpoint: str | None = None  # "ip:port" of the offered endpoint
    ttl_s: int | None = None
    deadline: float | None = None  # monotonic time the offer expires; None: never

    @property
    def key(self) -> tuple[int, int]:
        return (self.service_id, self.instance_id)

    def same_offer(self, other: Status) -> bool:
        return (
            self.state == other.state
            and self.major_version == other.major_version
            and self.minor_version == other.minor_version
            and self.endpoint == other.endpoint
        )


@dataclass(frozen=True, slots=True)
class Watched:
    """A configured service instance: the versions an offer must have to be it."""

    service_id: int
    instance_id: int
    major_version: int
    minor_version: int | None = None  # None: any

    def accepts(self, major_version: int, minor_version: int) -> bool:
        return major_version == self.major_version and (
            self.minor_version is None or minor_version == self.minor_version
        )

    def version(self) -> str:
        """The configured version, for messages: ``major version 1`` (``, minor 2``)."""
        minor = "" if self.minor_version is None else f", minor {self.minor_version}"
        return f"major version {self.major_version}{minor}"


class Availability:
    """The state of each watched (service id, instance id)."""

    def __init__(self, watched: list[Watched]) -> None:
        self._watched = {(w.service_id, w.instance_id): w for w in watched}
        self._states = {key: Status(key[0], key[1], UNKNOWN) for key in self._watched}

    def watched(self, service_id: int, instance_id: int) -> Watched:
        return self._watched[(service_id, instance_id)]

    def status(self, service_id: int, instance_id: int) -> Status:
        return self._states[(service_id, instance_id)]

    def statuses(self) -> list[Status]:
        return list(self._states.values())

    def offered(
        self,
        service_id: int,
        instance_id: int,
        major_version: int,
        minor_version: int,
        ttl_s: int,
        endpoint: str | None,
        now: float,
    ) -> Status | None:
        old = self._states.get((service_id, instance_id))
        if old is None:
            return None
        if ttl_s == 0:
            return self.stopped(service_id, instance_id, now, major_version, minor_version)
        if self._watched[old.key].accepts(major_version, minor_version):
            state = OFFERED
        elif old.state == OFFERED:
            return None  # the configured version is offered: another one changes nothing
        else:
            state = INCOMPATIBLE
        deadline = None if ttl_s >= INFINITE_TTL else now + ttl_s
        new = Status(
            service_id, instance_id, state, major_version, minor_version, endpoint, ttl_s,
            deadline,
        )  # fmt: skip
        self._states[new.key] = new
        return None if old.same_offer(new) else new

    def stopped(
        self,
        service_id: int,
        instance_id: int,
        now: float,
        major_version: int | None = None,
        minor_version: int | None = None,
    ) -> Status | None:
        """A StopOffer of the versions given (None: whatever is offered)."""
        old = self._states.get((service_id, instance_id))
        if old is None or old.state not in (OFFERED, INCOMPATIBLE):
            return None
        if (major_version is not None and major_version != old.major_version) or (
            minor_version is not None and minor_version != old.minor_version
        ):
            return None  # the stop of a version that is not the one heard
        new = replace(old, state=STOPPED, deadline=None)
        self._states[new.key] = new
        return new

    def expire(self, now: float) -> list[Status]:
        """The offers whose TTL ran out by ``now``, now ``expired``."""
        out: list[Status] = []
        for key, old in self._states.items():
            live = old.state in (OFFERED, INCOMPATIBLE)
            if live and old.deadline is not None and old.deadline <= now:
                new = self._states[key] = replace(old, state=EXPIRED, deadline=None)
                out.append(new)
        return out

    def next_deadline(self) -> float | None:
        deadlines = [s.deadline for s in self._states.values() if s.deadline is not None]
        return min(deadlines, default=None)

    def unavailable(self) -> list[Status]:
        return [s for s in self._states.values() if s.state != OFFERED]
