"""Issue 8.6: password guessing is throttled, and a real user's login stays fast meanwhile.

A guesser on 127.0.0.2 (another loopback address) opens connections from several threads
as fast as it can, each with a wrong password, while alice logs in from 127.0.0.1. The
password file has the default hash cost, so unthrottled guesses would take the CPU and
the hashing threads from alice's login. With throttling, the guesser's attempts past the
free failures wait or are refused unchecked (0x9F), and alice's logins stay fast.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import statistics
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.passwords import DEFAULT_ITERATIONS, hash_password, write_password_file
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.timeouts import unit
from tests.integration.security.support import security_gateway

GUESSER = "127.0.0.2"
_ids = itertools.count(1)


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[RunningGateway]:
    users = {name: hash_password(f"{name}-pw", DEFAULT_ITERATIONS) for name in ("alice", "admin")}
    write_password_file(tmp_path / "passwd", users)
    config = {
        "auth": {"password_file": str(tmp_path / "passwd"), "login_throttle": {"delay": "0.5s"}},
        "listeners": [{"type": "tcp", "bind": "127.0.0.1:0", "allow_anonymous": False}],
    }
    with security_gateway(tmp_path, config) as gateway:
        yield gateway


def attempt(
    gw: RunningGateway,
    username: str,
    password: str,
    source: str = "127.0.0.1",
    timeout: float | None = None,
) -> int:
    """One login over a fresh socket from ``source``; returns the CONNACK code."""
    address = gw.address()
    wait = unit(15) if timeout is None else timeout
    with socket.create_connection(address, timeout=wait, source_address=(source, 0)) as s:
        connect = mb.gen_connect(
            f"t{next(_ids)}", proto_ver=5, username=username, password=password
        )
        s.sendall(connect)
        data = b""
        while len(data) < 4:
            chunk = s.recv(64)
            if not chunk:
                break
            data += chunk
    assert data[:1] == b"\x20", data
    return data[3]


@contextlib.contextmanager
def guessing(gw: RunningGateway, threads: int, usernames: list[str]) -> Iterator[list[int]]:
    """Guessers from GUESSER until the block ends; yields the CONNACK codes they got."""
    codes: list[int] = []
    stop = threading.Event()

    def guess(offset: int) -> None:
        for n in itertools.count(offset):
            if stop.is_set():
                return
            with contextlib.suppress(OSError, AssertionError):
                # A guesser does not wait for answers held back: it tries again at once.
                user = usernames[n % len(usernames)]
                codes.append(attempt(gw, user, f"guess{n}", GUESSER, timeout=unit(1)))

    workers = [threading.Thread(target=guess, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    try:
        yield codes
    finally:
        stop.set()
        for worker in workers:
            worker.join(unit(20))


def timed_login(gw: RunningGateway) -> float:
    started = time.monotonic()
    assert attempt(gw, "alice", "alice-pw") == 0
    return time.monotonic() - started


@pytest.mark.parametrize(
    "targets", [["admin"], ["admin", "root", "pi", "user"]], ids=["one", "many"]
)
def test_a_real_login_stays_fast_while_a_guesser_runs(
    gw: RunningGateway, targets: list[str]
) -> None:
    baseline = statistics.median(timed_login(gw) for _ in range(3))
    with guessing(gw, threads=16, usernames=targets) as codes:
        # 16 guessing threads share this process with the gateway: on a loaded machine
        # the first 20 refusals can take a while.
        deadline = time.monotonic() + unit(40)
        while codes.count(0x9F) < 20:  # the throttle has taken over
            assert time.monotonic() < deadline, f"no throttling: {codes[-20:]}"
            time.sleep(0.05)
        during = [timed_login(gw) for _ in range(8)]
        attempts = len(codes)
    throttle = gw.call(lambda: gw.broker.login_throttle)
    assert throttle is not None
    # Passwords checked: the free failures and about one per delay slot, not one per guess.
    assert throttle.failures < 40 < attempts
    assert 0x86 in codes  # the free failures were checked and refused
    # A login costs one hash (~0.05 s here); unthrottled, these 16 guessers made it ~1 s.
    assert statistics.median(during) < 3 * baseline + unit(0.3)


def metrics(gw: RunningGateway) -> dict[str, float]:
    host, port = gw.gateway.api_address or ("", 0)
    key = (Path(gw.gateway.config.data_dir) / "api-key").read_text().strip()
    request = urllib.request.Request(
        f"http://{host}:{port}/metrics", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(request, timeout=unit(5)) as reply:
        text = reply.read().decode()
    samples = (line.rsplit(" ", 1) for line in text.splitlines() if line and line[0] != "#")
    return {name: float(value) for name, value in samples}


def test_failed_logins_are_counted_in_metrics(gw: RunningGateway) -> None:
    for n in range(7):
        attempt(gw, "admin", f"wrong{n}", GUESSER)
    assert attempt(gw, "alice", "alice-pw") == 0  # another user from another address
    samples = metrics(gw)
    assert samples["edgebus_login_failures_total"] == 7
    assert samples['edgebus_limit_hits_total{limit="login_throttle"}'] >= 2


def test_a_throttled_address_is_refused_unchecked(gw: RunningGateway) -> None:
    """Guesses arriving together are spaced one delay apart; those that would wait past
    the connect timeout are refused at once, unchecked, even with the right password."""
    assert [attempt(gw, "admin", f"wrong{n}", GUESSER) for n in range(5)] == [0x86] * 5
    quick: list[int] = []

    def guess(n: int) -> None:
        started = time.monotonic()
        with contextlib.suppress(OSError, AssertionError):
            code = attempt(gw, "admin", f"parallel{n}", GUESSER)
            if time.monotonic() - started < unit(2):
                quick.append(code)

    workers = [threading.Thread(target=guess, args=(n,), daemon=True) for n in range(40)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + unit(5)
    while quick.count(0x9F) < 15:  # 0.5 s apart: past ~20 of them the wait exceeds 10 s
        assert time.monotonic() < deadline, f"refused at once: {quick}"
        time.sleep(0.02)
    started = time.monotonic()
    assert attempt(gw, "admin", "admin-pw", GUESSER) == 0x9F
    assert time.monotonic() - started < unit(2)
    assert attempt(gw, "alice", "alice-pw") == 0
    failures = gw.call(lambda: gw.broker.login_throttle.failures)  # type: ignore[union-attr]
    assert failures < 10
