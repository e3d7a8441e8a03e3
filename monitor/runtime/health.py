"""Liveness and readiness: what the monitor's dependencies look like right now, and the HTTP endpoints that
report it beside the metrics (`/metrics`, `/healthz`, `/readyz`).

Readiness is false while the brokers cannot be reached or the dead-letter topic refuses writes: the monitor
keeps its unfinished events and retries, and the probe says why nothing moves."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

COMPONENTS = ("kafka", "dead_letter_topic", "store")


@dataclass
class Health:
    """Per component: up or not, and the last problem seen (one line, no secrets)."""

    up: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(COMPONENTS, True))
    problem: dict[str, str] = field(default_factory=dict)

    def mark(self, component: str, up: bool, problem: str = "") -> bool:
        """Record a component's state; returns True when it changed (so callers log transitions only)."""
        changed = self.up.get(component) is not up
        self.up[component] = up
        if up:
            self.problem.pop(component, None)
        else:
            self.problem[component] = problem
        return changed

    @property
    def ready(self) -> bool:
        """Whether every component is up."""
        return all(self.up.values())

    def report(self) -> dict[str, Any]:
        """The readiness document served at /readyz."""
        return {"ready": self.ready, "components": {c: {"up": u, "problem": self.problem.get(c, "")} for c, u in self.up.items()}}


class HealthGauges:
    """`relevancy_monitor_up{component}` and `relevancy_monitor_ready`, refreshed from a `Health`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._up = Gauge("relevancy_monitor_up", "1 while a dependency looks healthy", ["component"], registry=registry)
        self._ready = Gauge("relevancy_monitor_ready", "1 while every dependency looks healthy", registry=registry)

    def update(self, health: Health) -> None:
        """Export the current state."""
        for component, up in health.up.items():
            self._up.labels(component).set(1 if up else 0)
        self._ready.set(1 if health.ready else 0)


class HealthServer:
    """Serves `/metrics` (Prometheus), `/healthz` (the process answers) and `/readyz` (503 with the reasons
    while a dependency is down) on one port, in a daemon thread."""

    def __init__(self, registry: CollectorRegistry, health: Health, port: int, host: str = "0.0.0.0") -> None:
        handler = _handler(registry, health)
        self._server = ThreadingHTTPServer((host, port), handler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="health-http", daemon=True)

    def start(self) -> HealthServer:
        """Start serving."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


def _handler(registry: CollectorRegistry, health: Health) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                self._send(200, b'{"alive": true}\n', "application/json")
            elif path == "/readyz":
                self._send(200 if health.ready else 503, json.dumps(health.report()).encode() + b"\n", "application/json")
            else:
                self._send(404, b"not found: try /metrics, /healthz or /readyz\n", "text/plain")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds would drown the structured log

    return Handler
