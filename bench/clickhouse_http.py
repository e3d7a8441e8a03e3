"""A ClickHouse server stand-in for benchmarks: chDB in a process of its own, behind the subset of ClickHouse's HTTP
interface that clickhouse-connect speaks (queries with `{name:Type}` parameters, inserts in any input format, bodies
compressed with lz4 or gzip), read-write.

There is no ClickHouse server binary on the machines this project runs on, and chDB allows one engine per process:
to run the monitor on its server path (an `http://` store URL, no embedded engine in its process) and measure that
process alone, the engine lives here instead. The engine is the same chDB the embedded path uses, so what this
measures is the monitor's side of the wire, not a server's behaviour: one session, queries serialised, the
request's settings not applied (the monitor sends none that change a result), no authentication (loopback only).

`monitor.store.embedded_reader` is the product's read-only sibling of this; this one is for benchmarks only."""

from __future__ import annotations

import contextlib
import gzip
import multiprocessing
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from monitor.store.embedded_reader import ClickHouseHTTPHandler, query_session

# An insert whose rows come in the body: `INSERT INTO t (a, b) FORMAT Native` (clickhouse-connect's form).
_INSERT = re.compile(r"^\s*(INSERT\s+INTO\s+.+?)\s+FORMAT\s+(\w+)\s*$", re.IGNORECASE | re.DOTALL)


def _decompress(body: bytes, encoding: str | None) -> bytes:
    """The request body as sent before the client compressed it (clickhouse-connect compresses inserts)."""
    if not encoding:
        return body
    if encoding == "lz4":
        import lz4.frame  # type: ignore[import-untyped]

        return bytes(lz4.frame.decompress(body))
    if encoding in ("gzip", "deflate"):
        return gzip.decompress(body)
    raise ValueError(f"Code: 36. DB::Exception: unsupported Content-Encoding {encoding!r} (BAD_ARGUMENTS)")


def _statement(query: str, body: bytes) -> tuple[str, bytes]:
    """The statement and an insert's rows from a request: the statement is the URL's `query` followed by the body,
    except an insert's rows, which follow its `FORMAT` clause and a newline (in the body, clickhouse-connect's form)."""
    head, newline, rest = body.partition(b"\n")
    if newline and _INSERT.match(f"{query}\n{head.decode(errors='replace')}".strip()):
        return f"{query}\n{head.decode()}".strip(), rest
    if body and _INSERT.match(query):
        return query, body
    return "\n".join(part for part in (query, body.decode()) if part.strip()), b""


class Engine:
    """One chDB session at `directory`; every query under one lock (a session's USE and queries must not interleave)."""

    def __init__(self, directory: Path) -> None:
        import chdb

        self._lock = threading.Lock()
        self._conn = chdb.connect(str(directory))  # type: ignore[no-untyped-call]
        self._spool = tempfile.mkdtemp(prefix="chdb-http-")
        self.timezone = str(self._conn.query("SELECT timezone()", "TabSeparated")).strip() or "UTC"

    def run(self, sql: str, database: str | None, params: dict[str, str], rows: bytes) -> tuple[bytes, str]:
        """One statement: (the result's bytes, its format). With `rows`, `sql` is an insert whose rows they are:
        chDB takes no request body, so they are spooled to a file it reads (`file()` keeps the format's types)."""
        insert = _INSERT.match(sql) if rows else None
        if insert is not None:
            fmt = insert.group(2)
            path = os.path.join(self._spool, f"rows-{threading.get_ident()}.{fmt.lower()}")
            with open(path, "wb") as f:
                f.write(rows)
            sql = f"{insert.group(1)} SELECT * FROM file('{path}', '{fmt}')"
        return query_session(self._conn, self._lock, sql, database, params)

    def close(self) -> None:
        """Close the session."""
        with self._lock:
            self._conn.close()


def _handler(engine: Engine) -> type[BaseHTTPRequestHandler]:
    class Handler(ClickHouseHTTPHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a server answers clickhouse-connect's pooled connections

        def do_GET(self) -> None:
            if urlsplit(self.path).path in ("/ping", "/"):
                self._send(200, b"Ok.\n", {"Content-Type": "text/plain"})
            else:
                self._query(b"")

        def do_POST(self) -> None:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":  # clickhouse-connect streams inserts
                self._query(self._chunked())
                return
            length = int(self.headers.get("Content-Length") or 0)
            self._query(self.rfile.read(length) if length else b"")

        def _chunked(self) -> bytes:
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()  # the CRLF after each chunk
            while self.rfile.readline().strip():  # trailers, up to the blank line
                pass
            return b"".join(parts)

        def _query(self, body: bytes) -> None:
            args = {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query, keep_blank_values=True).items()}
            params = {k.removeprefix("param_"): v for k, v in args.items() if k.startswith("param_")}
            try:
                body = _decompress(body, self.headers.get("Content-Encoding"))
                sql, rows = _statement(args.get("query", ""), body)
                data, fmt = engine.run(sql, args.get("database"), params, rows)
            except Exception as e:  # the engine's error, sent as ClickHouse sends it
                self._error(500, str(e).strip() or type(e).__name__)
                return
            headers = {
                "Content-Type": "application/octet-stream",
                "X-ClickHouse-Format": fmt,
                "X-ClickHouse-Timezone": engine.timezone,
            }
            self._send(200, data, headers)

    return Handler


def serve(directory: str, conn: Connection) -> None:
    """The server's process: open the engine, send the URL over `conn`, serve until `conn` says stop (or closes)."""
    engine = Engine(Path(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(engine))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="chdb-http", daemon=True)
    thread.start()
    conn.send(f"http://127.0.0.1:{server.server_address[1]}")
    with contextlib.suppress(EOFError):
        conn.recv()
    server.shutdown()
    server.server_close()
    engine.close()


@contextlib.contextmanager
def chdb_server(directory: Path) -> Iterator[tuple[str, int]]:
    """A chDB HTTP server on `directory` in a process of its own: yields (its URL, its pid), stops it on exit."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=serve, args=(str(directory), child), name="chdb-http", daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(120):
            raise RuntimeError("the chDB HTTP server did not start within 120 s")
        url: str = parent.recv()
        assert proc.pid is not None
        yield url, proc.pid
    finally:
        with contextlib.suppress(OSError):
            parent.send("stop")
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()
