"""``edgebus run -c FILE`` with the minimal configuration

    listeners:
      - type: tcp
        bind: 127.0.0.1:<free port>
    data_dir: <tmp>/edgebus-data
    api:
      bind: 127.0.0.1:0    # not the default 8081, which may be taken

serves mosquitto_pub / mosquitto_sub and exits with status 0 soon after SIGTERM or SIGINT.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.interop.mosquitto.tools import (
    LOOPBACK,
    EdgebusProcess,
    MosquittoSub,
    mosquitto_pub,
    run_args,
)

pytestmark = pytest.mark.interop


def test_cli_serves_mosquitto_clients(tmp_path: Path) -> None:
    with EdgebusProcess(tmp_path) as edgebus:
        port = edgebus.port
        with (
            MosquittoSub(
                LOOPBACK, port, *run_args("mqttv5", 2), "-t", "cli/#", "-C", "2", client_id="s5"
            ) as sub5,
            MosquittoSub(
                LOOPBACK, port, *run_args("mqttv311", 1), "-t", "cli/+", "-C", "2", client_id="s4"
            ) as sub4,
        ):
            sub5.wait_subscribed()
            sub4.wait_subscribed()
            mosquitto_pub(
                LOOPBACK, port, *run_args("mqttv311", 2), "-t", "cli/a", "-m", "from 3.1.1"
            )
            mosquitto_pub(LOOPBACK, port, *run_args("mqttv5", 1), "-t", "cli/b", "-m", "from 5")
            assert [(m.topic, m.qos, m.payload) for m in sub5.expect_messages(2)] == [
                ("cli/a", 2, "from 3.1.1"),
                ("cli/b", 1, "from 5"),
            ]
            assert [(m.topic, m.qos, m.payload) for m in sub4.expect_messages(2)] == [
                ("cli/a", 1, "from 3.1.1"),
                ("cli/b", 1, "from 5"),
            ]
        assert (tmp_path / "edgebus-data").is_dir()
        assert edgebus.signal_and_wait(signal.SIGTERM) == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_cli_exits_0_on_signal_with_clients_connected(tmp_path: Path, signum: int) -> None:
    with EdgebusProcess(tmp_path) as edgebus:
        port = edgebus.port
        with (
            MosquittoSub(
                LOOPBACK, port, *run_args("mqttv5", 1), "-t", "t/#", client_id="on5"
            ) as sub5,
            MosquittoSub(
                LOOPBACK, port, *run_args("mqttv311", 1), "-t", "t/#", client_id="on4"
            ) as sub4,
        ):
            sub5.wait_subscribed()
            sub4.wait_subscribed()
            assert edgebus.signal_and_wait(signum) == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_cli_exits_0_on_signal_when_idle(tmp_path: Path, signum: int) -> None:
    with EdgebusProcess(tmp_path) as edgebus:
        assert edgebus.signal_and_wait(signum) == 0


def test_cli_keeps_retained_messages_across_a_restart(tmp_path: Path) -> None:
    # The default store lives in data_dir: a clean shutdown keeps retained messages.
    edgebus = EdgebusProcess(tmp_path)
    with edgebus:
        mosquitto_pub(
            LOOPBACK, edgebus.port, *run_args("mqttv311", 1), "-r", "-t", "keep/t", "-m", "kept"
        )
        assert edgebus.signal_and_wait(signal.SIGTERM) == 0
    with edgebus:
        with MosquittoSub(
            LOOPBACK, edgebus.port, *run_args("mqttv5", 1), "-t", "keep/#", "-C", "1"
        ) as sub:
            message = sub.expect_message()
            assert (message.topic, message.retain, message.payload) == ("keep/t", True, "kept")
        assert edgebus.signal_and_wait(signal.SIGTERM) == 0


def test_cli_keeps_persistent_sessions_and_their_queues_across_a_restart(tmp_path: Path) -> None:
    edgebus = EdgebusProcess(tmp_path)
    sub_args = [*run_args("mqttv311", 1), "-c", "-t", "ps/t"]
    with edgebus:
        with MosquittoSub(LOOPBACK, edgebus.port, *sub_args, client_id="keeper") as sub:
            sub.wait_subscribed()
        mosquitto_pub(
            LOOPBACK, edgebus.port, *run_args("mqttv311", 1), "-t", "ps/t", "-m", "before"
        )
        assert edgebus.signal_and_wait(signal.SIGTERM) == 0
    with edgebus:
        mosquitto_pub(LOOPBACK, edgebus.port, *run_args("mqttv5", 1), "-t", "ps/t", "-m", "after")
        with MosquittoSub(LOOPBACK, edgebus.port, *sub_args, "-C", "2", client_id="keeper") as sub:
            assert [m.payload for m in sub.expect_messages(2)] == ["before", "after"]
        assert edgebus.signal_and_wait(signal.SIGTERM) == 0


def test_cli_keeps_acknowledged_retained_messages_after_kill_9(tmp_path: Path) -> None:
    # ARCHITECTURE.md, Storage: after a kill -9 nothing acknowledged with QoS >= 1 is lost.
    edgebus = EdgebusProcess(tmp_path)
    with edgebus:
        mosquitto_pub(
            LOOPBACK, edgebus.port, *run_args("mqttv5", 1), "-r", "-t", "k9/t", "-m", "acked"
        )
        assert edgebus.signal_and_wait(signal.SIGKILL) == -signal.SIGKILL
    with edgebus:
        with MosquittoSub(
            LOOPBACK, edgebus.port, *run_args("mqttv5", 1), "-t", "k9/#", "-C", "1"
        ) as sub:
            message = sub.expect_message()
            assert (message.topic, message.retain, message.payload) == ("k9/t", True, "acked")
        assert edgebus.signal_and_wait(signal.SIGTERM) == 0
