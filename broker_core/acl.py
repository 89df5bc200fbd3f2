"""Topic access control: may this origin publish to, or subscribe to, this topic?

The broker consults its ``Acl`` for every PUBLISH (wills included), every topic filter
of a SUBSCRIBE, and the in-process API used by adapters and bridges, which carry their
own ``Origin``. ``deny_action`` says what a denied MQTT client gets: ``ignore`` (v5:
PUBACK/PUBREC/SUBACK 0x87 Not authorized; 3.1.1: a positive ack for PUBLISH as
[MQTT-3.3.5-2] allows, 0x80 in SUBACK) or ``disconnect`` (v5: DISCONNECT 0x87; 3.1.1:
the connection closes). 0x97 Quota exceeded is for limits, not for access control.

``RuleAcl`` evaluates ``AclRule`` s in order; the first rule that matches the origin,
the action and the topic decides, else ``default_allow``:

- Who: a rule applies when each of its conditions holds. ``username`` is the
  authenticated username. ``clientid`` is an MQTT client id, or, written
  ``<protocol>:<name>`` with a protocol of ``ORIGIN_PROTOCOLS`` (``dds:vehicle``,
  ``bridge:cloud``), the adapter or bridge instance of that name, which never matches an
  MQTT client. ``network`` contains the peer's IP address (no peer: no match).
- Topics: MQTT wildcards, ``%u`` (username) and ``%c`` (client id; an adapter's or
  bridge's instance name) substituted per origin, verbatim as mosquitto substitutes them
  in its ``pattern`` lines: a value with ``/`` fills several levels (client ``c1/x``:
  ``dev/%c/#`` is ``dev/c1/x/#``). A topic whose placeholder has no value for the
  origin (``%u`` without username) does not match it. A value with ``+`` or ``#`` would
  widen the topic: the origin is denied from that topic of that rule onwards, whatever
  the action (the rules after it are not tried), as mosquitto denies every pattern to a
  client with such an id or username; the rules and topics before it still decide.
  ``eq <filter>`` matches that exact string only, without placeholders (``eq #``
  matches a subscription to ``#``, not every topic).
- PUBLISH: the topic matches the rule's filter as a subscription would ([MQTT-4.7.2-1]:
  a leading wildcard does not match ``$`` topics).
- SUBSCRIBE: the requested filter must be covered by the rule's filter, i.e. every topic
  it can match is matched by the rule's: rule ``sensors/#`` covers ``sensors/+/temp``
  and ``sensors``, not ``#`` or ``+/temp``. A shared subscription
  (``$share/<group>/<filter>``) is judged by its ``<filter>``. A deny rule already
  applies when the requested filter overlaps its filter (some topic matches both), so
  a broad subscription cannot reach what a deny rule before it refuses: with
  ``deny secret/#`` first, subscribing to ``#`` or ``+/x`` is refused.

Decisions are cached per (origin, action, topic), at most ``cache_size`` entries and
``cache_chars`` characters of topics (the cache is emptied when either is reached: an
origin carries its client's address, so each connection adds its own entries);
``reload`` replaces the rules and empties it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import Literal, Protocol

from broker_core.context import Origin
from broker_core.mqtt.topics import SHARE_PREFIX

__all__ = [
    "DENY_DISCONNECT",
    "DENY_IGNORE",
    "ORIGIN_PROTOCOLS",
    "PUBLISH",
    "SUBSCRIBE",
    "Acl",
    "AclRule",
    "Action",
    "AllowAll",
    "RuleAcl",
    "filter_covers",
    "filters_overlap",
]

Action = Literal["publish", "subscribe"]
PUBLISH: Action = "publish"
SUBSCRIBE: Action = "subscribe"
DENY_IGNORE = "ignore"
DENY_DISCONNECT = "disconnect"

# Origins other than MQTT clients, addressed in rules as clientid `<protocol>:<name>`.
ORIGIN_PROTOCOLS = frozenset(
    {"dds", "ros2", "zmq", "nng", "someip", "loopback", "bridge", "rule", "api", "sys"}
)


class Acl(Protocol):
    def allows(self, origin: Origin, action: Action, topic: str) -> bool: ...


class AllowAll:
    def allows(self, origin: Origin, action: Action, topic: str) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class AclRule:
    """One rule; ``None`` conditions match everyone."""

    allow: bool
    topics: tuple[str, ...]
    actions: frozenset[str] = frozenset({PUBLISH, SUBSCRIBE})
    username: str | None = None
    clientid: str | None = None
    network: IPv4Network | IPv6Network | None = None
    # derived from clientid: (protocol, name) the rule is about
    _who: tuple[str, str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.clientid is not None:
            protocol, colon, name = self.clientid.partition(":")
            who = (
                (protocol, name)
                if colon and protocol in ORIGIN_PROTOCOLS
                else ("mqtt", self.clientid)
            )
            object.__setattr__(self, "_who", who)

    def applies_to(self, origin: Origin, address: IPv4Address | IPv6Address | None) -> bool:
        if self.username is not None and origin.username != self.username:
            return False
        who = self._who
        if who is not None and (origin.protocol, origin.name) != who:
            return False
        network = self.network
        return network is None or (
            address is not None and address.version == network.version and address in network
        )


# A topic pattern after substitution: ("eq", literal) or ("match", levels).
_Pattern = tuple[bool, str, tuple[str, ...]]
_Compiled = tuple[bool, frozenset[str], tuple[_Pattern, ...]]


def _levels_match(pattern: tuple[str, ...], topic: str) -> bool:
    levels = topic.split("/")
    if topic.startswith("$") and pattern[0] in ("+", "#"):
        return False  # [MQTT-4.7.2-1]
    for i, level in enumerate(pattern):
        if level == "#":
            return True
        if i >= len(levels) or (level != "+" and level != levels[i]):
            return False
    return len(pattern) == len(levels)


def filter_covers(rule: Sequence[str], requested: Sequence[str]) -> bool:
    """True when every topic the ``requested`` filter matches, ``rule`` matches too.

    Both are filters split into levels.
    """
    if requested[0].startswith("$") and rule[0] in ("+", "#"):
        return False  # the rule matches no $ topics; the request matches some
    for i, level in enumerate(rule):
        if level == "#":
            return True  # covers the rest, and the parent level itself
        if i >= len(requested):
            return False
        wanted = requested[i]
        if wanted == "#":
            return False
        if level == "+":
            continue
        if wanted == "+" or wanted != level:
            return False
    return len(rule) == len(requested)


def filters_overlap(a: Sequence[str], b: Sequence[str]) -> bool:
    """True when some topic matches both filters (split into levels)."""
    if (a[0].startswith("$") and b[0] in ("+", "#")) or (
        b[0].startswith("$") and a[0] in ("+", "#")
    ):
        return False
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x == "#" or y == "#":
            return True
        if x is None or y is None:
            return False
        if x != y and x != "+" and y != "+":
            return False
    return True


def _peer_address(peer: str | None) -> IPv4Address | IPv6Address | None:
    if not peer:
        return None
    host = peer.rpartition(":")[0] if ":" in peer else peer
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


# ``_substitute``'s answer for a value with a wildcard: the origin is denied from there.
_WIDENS = "\0widens"
# Every action: what a ``_WIDENS`` topic denies.
_ALL_ACTIONS = frozenset({PUBLISH, SUBSCRIBE})


def _substitute(topic: str, origin: Origin) -> str | None:
    """``topic`` with %u / %c filled in verbatim for ``origin``, in one pass (a value
    holding ``%c`` or ``%u`` is not filled in again); None when a placeholder has no
    value for it (the topic does not match it); ``_WIDENS`` when a value holds ``+`` or
    ``#`` (mosquitto's "dangerous" client id or username)."""
    if "%" not in topic:
        return topic
    values: dict[str, str] = {}
    for placeholder in _PLACEHOLDER.findall(topic):
        value = origin.username if placeholder == "%u" else origin.name
        if not value:
            return None
        if "+" in value or "#" in value:
            return _WIDENS
        values[placeholder] = value
    return _PLACEHOLDER.sub(lambda found: values[found.group()], topic)


_PLACEHOLDER = re.compile("%[uc]")


class RuleAcl:
    def __init__(
        self,
        rules: Iterable[AclRule] = (),
        default_allow: bool = True,
        cache_size: int = 65_536,
        cache_chars: int = 4_000_000,
    ) -> None:
        self.cache_size = cache_size
        self.cache_chars = cache_chars
        self._cached_chars = 0
        self.rules: tuple[AclRule, ...] = ()
        self.default_allow = default_allow
        self._decisions: dict[tuple[Origin, str, str], bool] = {}
        self._per_origin: dict[Origin, tuple[_Compiled, ...]] = {}
        self.reload(rules, default_allow)

    def reload(self, rules: Iterable[AclRule], default_allow: bool) -> None:
        self.rules = tuple(rules)
        self.default_allow = default_allow
        self._decisions = {}
        self._cached_chars = 0
        self._per_origin = {}

    def allows(self, origin: Origin, action: Action, topic: str) -> bool:
        key = (origin, action, topic)
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decide(origin, action, topic)
            chars = self._cached_chars + len(topic)
            if len(self._decisions) >= self.cache_size or chars > self.cache_chars:
                self._decisions.clear()
                chars = len(topic)
            self._cached_chars = chars
            self._decisions[key] = decision
        return decision

    def _decide(self, origin: Origin, action: Action, topic: str) -> bool:
        if action == SUBSCRIBE and topic.startswith(SHARE_PREFIX):
            topic = topic[len(SHARE_PREFIX) :].partition("/")[2] or topic
        levels = topic.split("/")
        for allow, actions, patterns in self._rules_for(origin):
            if action not in actions:
                continue
            if not patterns:
                return allow  # denied from a placeholder whose value widens it
            for is_eq, literal, pattern in patterns:
                if is_eq:
                    hit = literal == topic
                elif action == PUBLISH:
                    hit = _levels_match(pattern, topic)
                elif allow:
                    hit = filter_covers(pattern, levels)
                else:
                    hit = filters_overlap(pattern, levels)
                if hit:
                    return allow
        return self.default_allow

    def _rules_for(self, origin: Origin) -> tuple[_Compiled, ...]:
        """The rules that apply to ``origin``, placeholders filled in."""
        compiled = self._per_origin.get(origin)
        if compiled is not None:
            return compiled
        address = _peer_address(origin.peer)
        result: list[_Compiled] = []
        for rule in self.rules:
            if not rule.applies_to(origin, address):
                continue
            patterns: list[_Pattern] = []
            widens = False
            for text in rule.topics:
                if text.startswith("eq "):
                    patterns.append((True, text[3:], ()))
                    continue
                substituted = _substitute(text, origin)
                if substituted is _WIDENS:
                    widens = True
                    break
                if substituted is not None:
                    patterns.append((False, substituted, tuple(substituted.split("/"))))
            if patterns:
                result.append((rule.allow, rule.actions, tuple(patterns)))
            if widens:
                result.append((False, _ALL_ACTIONS, ()))  # denies whatever comes to it
                break  # no rule after it is reached
        compiled = tuple(result)
        if len(self._per_origin) >= self.cache_size:
            self._per_origin.clear()
        self._per_origin[origin] = compiled
        return compiled
