"""ZeroMQ and NNG adapters: messages per second beside a plain pyzmq / pynng pair.

``run()`` returns the result lines (``python -m bench`` prints them after the broker
table); ``python -m bench.bench_sockets`` runs it alone. For each library, in every
round and in this order:

- **plain pair**: a sender process pushes ``N`` messages (``PUSH``/``push0``) straight
  to a receiver process (``PULL``/``pull0``), both plain Python loops of the library;
- **-> MQTT**: the same sender pushes to an edgebus gateway (a subprocess) whose
  adapter (``pull``/``pull0``, QoS 0 mapping) publishes them; a raw-socket MQTT
  subscriber (QoS 0) counts them;
- **MQTT ->**: a raw-socket MQTT publisher sends ``N`` QoS 0 PUBLISH frames; the
  adapter (``push``/``push0``, QoS 0 subscription, a queue that holds them all) sends
  them on; the same plain receiver counts them.

Each rate is measured at the receiving end, from its first message to its last, and
must account for all ``N`` (a run that loses messages is reported as failed). The
figure is the median over rounds; the ratio is edgebus / plain pair. Every process of a
run is its own: sender, receiver, gateway, MQTT client. On a shared 2-core machine the
figures swing from run to run; compare ratios of one run, not absolute rates.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.brokers import free_port, launch
from bench.client import mqtt_connect, mqtt_subscribe
from bench.frames import PacketCounter, encode_disconnect, encode_publish
from bench.lifetime import die_with_parent

__all__ = ["run"]

ROUNDS = 5
COUNTS = {"zmq": 200_000, "nng": 60_000}
TOPIC = b"bench/x"
PAYLOAD = b"0123456789abcdef"  # 16 bytes
TIMEOUT_S = 120.0
TARGET = 0.5  # issue 14: at least half the plain pair's rate, each way

_SPAWN = multiprocessing.get_context("spawn")  # NNG is not fork-safe


# -- the processes (module level: spawned children import them) ---------------------------


def _sender(lib: str, url: str, count: int) -> None:
    """Pushes ``count`` messages to ``url`` (dials / connects)."""
    die_with_parent()
    if lib == "zmq":
        import zmq

        ctx = zmq.Context()
        sock = ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.SNDHWM, 100_000)
        sock.connect(url)
        frames = [TOPIC, PAYLOAD]
        for _ in range(count):
            sock.send_multipart(frames)
        sock.close(linger=-1)
        ctx.term()
    else:
        import pynng

        nsock = pynng.Push0(send_buffer_size=8192)
        nsock.dial(url, block=False)
        body = TOPIC + b":" + PAYLOAD
        for _ in range(count):
            nsock.send(body)
        time.sleep(1.0)  # no linger in NNG: let the buffer drain
        nsock.close()


def _receiver(lib: str, url: str, count: int, ready: Any, results: Any) -> None:
    """Listens on ``url``, receives ``count`` messages; reports (first, last) times."""
    die_with_parent()
    if lib == "zmq":
        import zmq

        ctx = zmq.Context()
        sock = ctx.socket(zmq.PULL)
        sock.setsockopt(zmq.RCVHWM, 100_000)
        sock.bind(url)
        ready.set()
        sock.recv_multipart()
        first = time.perf_counter()
        for _ in range(count - 1):
            sock.recv_multipart()
        results.put((first, time.perf_counter(), count))
        sock.close()
        ctx.term()
    else:
        import pynng

        nsock = pynng.Pull0(recv_buffer_size=8192)
        nsock.listen(url)
        ready.set()
        nsock.recv()
        first = time.perf_counter()
        for _ in range(count - 1):
            nsock.recv()
        results.put((first, time.perf_counter(), count))
        nsock.close()


def _mqtt_subscriber(port: int, count: int, ready: Any, results: Any) -> None:
    """Subscribes (QoS 0) and counts ``count`` PUBLISH packets."""
    die_with_parent()
    sock = mqtt_connect(port, "bench-sockets-sub")
    mqtt_subscribe(sock, "bench/in/#", 0)
    sock.settimeout(TIMEOUT_S)
    ready.set()
    counter = PacketCounter()
    buffer = bytearray(1 << 20)
    seen = 0
    first = 0.0
    while seen < count:
        n = sock.recv_into(buffer)
        if not n:
            break
        got = counter.feed(memoryview(buffer)[:n])
        if got and not seen:
            first = time.perf_counter()
        seen += got
    results.put((first, time.perf_counter(), seen))
    sock.sendall(encode_disconnect())
    sock.close()


def _mqtt_publisher(port: int, count: int) -> None:
    """Publishes ``count`` QoS 0 messages as fast as the socket takes them."""
    die_with_parent()
    sock = mqtt_connect(port, "bench-sockets-pub")
    frame = encode_publish("bench/out/x", PAYLOAD, 0)
    batch = frame * 512
    sent = 0
    while sent + 512 <= count:
        sock.sendall(batch)
        sent += 512
    sock.sendall(frame * (count - sent))
    sock.sendall(encode_disconnect())
    # No half-close: the broker closes once it has read the DISCONNECT, so everything
    # before it was read. (An EOF while edgebus still holds input over its read budget
    # loses that input: reported to the lead.)
    sock.settimeout(TIMEOUT_S)
    while sock.recv(65536):
        pass
    sock.close()


# -- one measurement ----------------------------------------------------------------------


@dataclass
class _Rate:
    rate: float | None
    error: str | None = None


def _measure(
    start_receiver: Callable[[Any, Any], Any],
    start_sender: Callable[[], Any],
    count: int,
) -> _Rate:
    ready, results = _SPAWN.Event(), _SPAWN.Queue()
    receiver = start_receiver(ready, results)
    sender = None
    try:
        if not ready.wait(30):
            return _Rate(None, "the receiver did not start")
        sender = start_sender()
        try:
            first, last, seen = results.get(timeout=TIMEOUT_S)
        except Exception:
            return _Rate(None, f"nothing reported within {TIMEOUT_S:.0f}s")
        if seen != count:
            return _Rate(None, f"{seen} of {count} messages arrived")
        return _Rate((count - 1) / max(last - first, 1e-9))
    finally:
        for process in (sender, receiver):
            if process is not None:
                process.join(10)
                if process.is_alive():
                    process.kill()
                    process.join()


def _process(target: Callable[..., None], *args: Any) -> Any:
    process = _SPAWN.Process(target=target, args=args, daemon=True)
    process.start()
    return process


def _plain(lib: str, count: int) -> _Rate:
    url = f"tcp://127.0.0.1:{free_port()}"
    return _measure(
        lambda ready, results: _process(_receiver, lib, url, count, ready, results),
        lambda: _process(_sender, lib, url, count),
        count,
    )


def _adapter_config(lib: str, in_url: str, out_url: str, count: int) -> str:
    topic = "{zmq.topic}" if lib == "zmq" else "{nng.topic}"
    pull, push = ("pull", "push") if lib == "zmq" else ("pull0", "push0")
    framing = "" if lib == "zmq" else ", delimiter: ':'"
    return (
        "adapters:\n"
        f"  - type: {lib}\n"
        "    name: bench\n"
        f"    queue_size: {count * 2}\n"
        f"    {lib}_to_mqtt:\n"
        f"      - {{socket: {pull}, bind: '{in_url}', to_mqtt: 'bench/in/{topic}',"
        f" qos: 0{framing}}}\n"
        f"    mqtt_to_{lib}:\n"
        f"      - {{from_mqtt: 'bench/out/#', socket: {push}, connect: '{out_url}',"
        f" qos: 0{framing}}}\n"
    )


def _through_edgebus(lib: str, count: int) -> tuple[_Rate, _Rate]:
    in_url = f"tcp://127.0.0.1:{free_port()}"
    out_url = f"tcp://127.0.0.1:{free_port()}"
    with launch("edgebus", extra_config=_adapter_config(lib, in_url, out_url, count)) as broker:
        port = broker.port
        to_mqtt = _measure(
            lambda ready, results: _process(_mqtt_subscriber, port, count, ready, results),
            lambda: _process(_sender, lib, in_url, count),
            count,
        )
        from_mqtt = _measure(
            lambda ready, results: _process(_receiver, lib, out_url, count, ready, results),
            lambda: _process(_mqtt_publisher, port, count),
            count,
        )
        broker.check_alive()
    return to_mqtt, from_mqtt


# -- the report -----------------------------------------------------------------------------


def _median(rates: list[_Rate]) -> float | None:
    values = [r.rate for r in rates if r.rate is not None]
    return statistics.median(values) if values else None


def _shown(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:,.0f}/s"


def run(rounds: int = ROUNDS) -> list[str]:
    lines = [
        "ZeroMQ and NNG adapters (bench/bench_sockets.py): messages/s, median of"
        f" {rounds} rounds, ratio = edgebus / plain pair (target >= {TARGET}x)",
        f"{'library':<8} {'plain pair':>13} {'-> MQTT':>13} {'ratio':>7}"
        f" {'MQTT ->':>13} {'ratio':>7}",
    ]
    for lib, count in COUNTS.items():
        plain: list[_Rate] = []
        inbound: list[_Rate] = []
        outbound: list[_Rate] = []
        for _ in range(rounds):
            plain.append(_plain(lib, count))
            to_mqtt, from_mqtt = _through_edgebus(lib, count)
            inbound.append(to_mqtt)
            outbound.append(from_mqtt)
        base, to, back = _median(plain), _median(inbound), _median(outbound)
        cells = [f"{lib:<8}", f"{_shown(base):>13}"]
        for value in (to, back):
            ratio = f"{value / base:.2f}x" if value is not None and base else "n/a"
            cells += [f"{_shown(value):>13}", f"{ratio:>7}"]
        lines.append(" ".join(cells) + f"   ({count:,} messages of {len(PAYLOAD)} bytes)")
        errors = {r.error for r in (*plain, *inbound, *outbound) if r.error}
        lines += [f"  {lib}: failed run: {error}" for error in sorted(errors)]
    return lines


if __name__ == "__main__":
    for line in run():
        print(line)
