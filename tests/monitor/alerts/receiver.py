"""A real HTTP server on 127.0.0.1 that records JSON POSTs (for the notifier tests; no mocks)."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """Records every POST by path; `fail[path] = n` answers the next n requests on `path` with HTTP 500."""

    def __init__(self) -> None:
        self.posts: dict[str, list[Any]] = defaultdict(list)
        self.attempts: dict[str, int] = defaultdict(int)
        self.fail: dict[str, int] = defaultdict(int)
        self.headers: list[dict[str, str]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.attempts[self.path] += 1
                receiver.headers.append(dict(self.headers))
                if receiver.fail[self.path] > 0:
                    receiver.fail[self.path] -= 1
                    self.send_response(500)
                    self.end_headers()
                    return
                receiver.posts[self.path].append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
