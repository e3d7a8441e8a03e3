"""Reads of a running monitor's embedded store from other processes.

chDB allows one process per directory, so while `run` (or `demo`) holds it, `sql`, `alerts` and `report` could not
read it. The process that holds the directory therefore serves its engine read-only over ClickHouse's own HTTP
interface (the subset clickhouse-connect speaks), so the read commands reach it with the same client and the same
code as a server:

- on loopback only, on a port of its own: the metrics port listens on every interface for Prometheus, and this one
  answers with conversation text;
- with a random password, in a file readable only by the owner (`READER_FILE` in the directory, removed on stop),
  so another local user cannot read through the port what the directory's permissions keep from them;
- on a chDB session with ClickHouse's `readonly = 1`: the engine refuses writes, DDL and setting changes itself
  (no keyword filter), so writes stay with the monitor."""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
import os
import re
import secrets
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import structlog

log = structlog.get_logger("monitor.store.embedded_reader")

READER_FILE = "relevancy-monitor-reader.json"
READER_USER = "reader"

# Parameters clickhouse-connect sends about the transport, not the query: under readonly = 1 the engine refuses
# any setting, so these are dropped rather than applied.
_TRANSPORT_PARAMS = frozenset(
    {
        "query",
        "database",
        "session_id",
        "session_timeout",
        "query_id",
        "wait_end_of_query",
        "send_progress_in_http_headers",
        "http_headers_progress_interval_ms",
        "enable_http_compression",
        "client_protocol_version",
        "default_format",
        "cancel_http_readonly_queries_on_client_close",
    }
)
_FORMAT = re.compile(r"\bFORMAT\s+(\w+)\s*;?\s*$", re.IGNORECASE)
_ERROR_CODE = re.compile(r"Code: (\d+)")
_DRAIN = "SELECT 0 WHERE 0"


@dataclass(frozen=True, slots=True)
class ReaderAddress:
    """Where a running monitor serves reads of its embedded store, and the password it asks for."""

    url: str
    password: str
    pid: int


def reader_address(directory: Path) -> ReaderAddress | None:
    """The address a live monitor left in `directory`, or None (no file, unreadable, or its process has ended)."""
    try:
        doc = json.loads((directory / READER_FILE).read_text(encoding="utf-8"))
        address = ReaderAddress(url=str(doc["url"]), password=str(doc["password"]), pid=int(doc["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return address if _alive(address.pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


class EmbeddedReader:
    """Serves read-only queries of the embedded engine at `directory` on 127.0.0.1, in daemon threads."""

    def __init__(self, directory: Path) -> None:
        import chdb

        self.directory = directory
        self._password = secrets.token_urlsafe(24)
        self._lock = threading.Lock()  # one chDB session: its USE and queries must not interleave between threads
        self._conn = chdb.connect(os.path.realpath(directory))  # type: ignore[no-untyped-call] # chDB compares engine paths literally, as the writer spells it
        self._conn.query("SET readonly = 1")
        timezone = str(self._conn.query("SELECT timezone()", "TabSeparated")).strip() or "UTC"
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, timezone))
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="embedded-reader", daemon=True)

    @property
    def url(self) -> str:
        """The loopback URL of the endpoint."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> EmbeddedReader:
        """Start serving and publish the address (file mode 0600)."""
        self._thread.start()
        path = self.directory / READER_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"url": self.url, "password": self._password, "pid": os.getpid()}, f)
        log.info("embedded_reader_started", url=self.url, directory=str(self.directory))
        return self

    def stop(self) -> None:
        """Withdraw the address, stop serving and close the session."""
        with contextlib.suppress(FileNotFoundError):
            (self.directory / READER_FILE).unlink()
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            self._conn.close()

    def authorised(self, header: str | None) -> bool:
        """Whether an `Authorization: Basic` header carries this endpoint's user and password."""
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        return user == READER_USER and hmac.compare_digest(password.encode(), self._password.encode())

    def run(
        self, sql: str, database: str | None, params: dict[str, str], settings: dict[str, str]
    ) -> tuple[bytes, str]:
        """One query on the read-only session: (the result's bytes, its format). Raises the engine's error. The
        request's `settings` are not applied: under readonly = 1 the engine refuses any change, and the session is
        read-only whatever they say."""
        return query_session(self._conn, self._lock, sql, database, params)


def query_session(
    conn: Any, lock: threading.Lock, sql: str, database: str | None, params: dict[str, str]
) -> tuple[bytes, str]:
    """One query on a chDB session guarded by `lock`, as ClickHouse's HTTP interface answers it: (the result's bytes,
    its format: the query's `FORMAT`, else TabSeparated). Raises the engine's error."""
    match = _FORMAT.search(sql)
    fmt = match.group(1) if match else "TabSeparated"  # ClickHouse's HTTP default
    with lock:
        if database:
            conn.query(f"USE `{database.replace('`', '')}`")
        try:
            result = conn.query(sql, fmt, params=params or None)
        except Exception:
            # A multi-statement query that fails part-way leaves its first results in the session, and chDB
            # prepends them to the next answer: another request's. An empty query takes them out.
            conn.query(_DRAIN, "Native")
            raise
        # Copied under the lock: the session's next query reuses the result's buffer (two concurrent reads
        # answered each other's bytes when this was copied after it).
        data = bytes(result.bytes() if hasattr(result, "bytes") else str(result).encode())
    return data, fmt


class ClickHouseHTTPHandler(BaseHTTPRequestHandler):
    """Answers as ClickHouse's HTTP interface answers: a body with its length, an error with its exception code."""

    def _error(self, status: int, message: str) -> None:
        code = _ERROR_CODE.search(message)
        headers = {
            "Content-Type": "text/plain; charset=UTF-8",
            "X-ClickHouse-Exception-Code": code.group(1) if code else "1000",
        }
        self._send(status, message.encode() + b"\n", headers)

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing: queries carry conversation text, and none of it goes to the log."""


def _handler(reader: EmbeddedReader, timezone: str) -> type[BaseHTTPRequestHandler]:
    class Handler(ClickHouseHTTPHandler):
        def do_GET(self) -> None:
            if urlsplit(self.path).path in ("/ping", "/"):
                self._send(200, b"Ok.\n", {"Content-Type": "text/plain"})
            else:
                self._query(b"")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self._query(self.rfile.read(length) if length else b"")

        def _query(self, body: bytes) -> None:
            if not reader.authorised(self.headers.get("Authorization")):
                self._error(516, "Code: 516. DB::Exception: reader: Authentication failed (AUTHENTICATION_FAILED)")
                return
            if self.headers.get("Content-Encoding"):
                self._error(
                    400, "Code: 36. DB::Exception: compressed request bodies are not supported here (BAD_ARGUMENTS)"
                )
                return
            args = {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query, keep_blank_values=True).items()}
            sql = "\n".join(part for part in (args.get("query", ""), body.decode("utf-8")) if part.strip())
            params = {k.removeprefix("param_"): v for k, v in args.items() if k.startswith("param_")}
            settings = {k: v for k, v in args.items() if k not in _TRANSPORT_PARAMS and not k.startswith("param_")}
            try:
                data, fmt = reader.run(sql, args.get("database"), params, settings)
            except Exception as e:  # the engine's error (ChdbError and friends), sent as ClickHouse sends it
                self._error(500, str(e).strip() or type(e).__name__)
                return
            self._send(
                200,
                data,
                {
                    "Content-Type": "application/octet-stream",
                    "X-ClickHouse-Format": fmt,
                    "X-ClickHouse-Timezone": timezone,
                },
            )

    return Handler
