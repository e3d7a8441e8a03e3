"""`relevancy-monitor broker` never orphans tansu (issue 10, item 13): SIGTERM and SIGINT stop it and free the port,
the wrapper dying by SIGKILL still stops it (Linux), and a taken port is a one-line error instead of "listening"."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import monitor.devtools.localbroker as localbroker
from monitor.devtools.localbroker import LocalBroker, free_port
from schemas.errors import LocalBrokerError

CLI = str(Path(sys.executable).parent / "relevancy-monitor")

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds tansu processes through /proc")


def tansu_pids(port: int) -> list[int]:
    """Live (not zombie) tansu processes listening on 127.0.0.1:`port`, found by their command line."""
    want = f"tcp://127.0.0.1:{port}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue  # not a process, or gone meanwhile
        if b"tansu" in cmdline and want in cmdline.split(b"\0") and state != "Z":
            pids.append(int(proc.name))
    return pids


def port_is_free(port: int) -> bool:
    """True when 127.0.0.1:`port` can be bound as a server binds it."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Poll `predicate` until it is true or `timeout_s` passes; returns its last value."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return bool(predicate())
        time.sleep(0.05)
    return True


@pytest.fixture
def port() -> Iterator[int]:
    """A free port; any tansu left on it afterwards is killed (so a failing test cannot leak one)."""
    p = free_port()
    yield p
    for pid in tansu_pids(p):
        os.kill(pid, signal.SIGKILL)


@contextmanager
def broker_command(port: int) -> Iterator[subprocess.Popen[str]]:
    """`relevancy-monitor broker --port PORT`, once it says it is listening and its tansu is up; killed on exit."""
    proc = subprocess.Popen([CLI, "broker", "--port", str(port)], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()  # bounded: start() gives up after 15 s and the command exits
        if "listening on" not in line or not wait_until(lambda: len(tansu_pids(port)) == 1, 10):
            pytest.fail(f"broker did not start: {line!r}")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        proc.stderr.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_stops_tansu_and_frees_the_port(port: int, sig: signal.Signals) -> None:
    """SIGTERM, SIGINT or SIGHUP to `broker` exits 0 with its tansu gone and the port free (tansu outlived SIGTERM)."""
    with broker_command(port) as proc:
        proc.send_signal(sig)
        assert proc.wait(15) == 0
    assert tansu_pids(port) == []
    assert port_is_free(port)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_tansu_dies_with_a_killed_parent(port: int) -> None:
    """SIGKILL of the wrapper (no cleanup runs) still ends its tansu: the kernel sends it SIGTERM."""
    with broker_command(port) as proc:
        proc.kill()
        proc.wait(10)
    assert wait_until(lambda: tansu_pids(port) == [], 10), "tansu outlived its parent"
    assert wait_until(lambda: port_is_free(port), 10)


def test_a_second_broker_on_a_taken_port_is_a_one_line_error(port: int) -> None:
    """`broker --port P` while another broker holds P exits 1 with one line, instead of claiming to listen."""
    with broker_command(port) as first:
        done = subprocess.run([CLI, "broker", "--port", str(port)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 1
        assert done.stderr == (
            f"relevancy-monitor: error: port {port} on 127.0.0.1 is already in use (another broker?): stop it or pick "
            "another --port\n"
        )
        assert tansu_pids(port) != [] and first.poll() is None  # the first broker is untouched
        first.send_signal(signal.SIGTERM)
        assert first.wait(15) == 0


def test_tansu_exiting_at_once_is_not_reported_as_listening(port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the port is taken after the check, tansu exits at once; start() says so even though the port accepts."""
    monkeypatch.setattr(localbroker, "check_port_free", lambda port, host="127.0.0.1": None)
    with socket.socket() as holder:  # someone else's listener, which accepts the readiness probe
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        holder.listen()
        broker = LocalBroker(port=port)
        with pytest.raises(LocalBrokerError, match=f"tansu exited at once with code .*: is port {port} taken"):
            broker.start()
        assert not broker.running
