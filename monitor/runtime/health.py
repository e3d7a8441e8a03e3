"""Liveness and readiness: what the monitor's dependencies look like right now, and the HTTP endpoints that
report it beside the metrics (`/metrics`, `/healthz`, `/readyz`).

- Liveness fails only when the process is wedged: the event loop has not beaten for `max_silence_s`. A lost
  broker, store or judge never fails it, because a restart fixes none of them.
- Readiness is true once the consumer has joined its group and the store has answered, and while the brokers,
  the store and the dead-letter topic look healthy. The store is healthy while it answers probes and its inserts
  succeed: once they have failed for longer than `unready_after_s` (MONITOR_STORE_UNREADY_AFTER_S) it is down, with
  the reason, until a write succeeds. Commits likewise: once the traffic counts (which every commit waits for) have
  not been written for longer than `unready_after_s`, `commits` is down with the reason (a store outage, or a bug
  of the monitor) until they are. The judge's circuit is reported but never gates it: a
  provider outage hits every replica alike and must not block a rollout."""

from __future__ import annotations

import asyncio
import errno
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from schemas.errors import PortInUse

COMPONENTS = ("kafka", "dead_letter_topic", "store", "commits")


@dataclass
class Health:
    """Per component: up or not, and the last problem seen (one line, no secrets); the start-up milestones; and
    information reported without gating (the judge's circuit)."""

    up: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(COMPONENTS, True))
    problem: dict[str, str] = field(default_factory=dict)
    joined: bool = False  # the consumer has joined its group (its first assignment arrived)
    store_answered: bool = False  # the store opened and answered
    info: dict[str, str] = field(default_factory=dict)
    beat: float = field(default_factory=time.monotonic)
    unready_after_s: float = 60.0  # inserts failing this long make the store (and readiness) down
    writes_failing_since: float | None = None  # monotonic time of the first failure since the last success
    write_problem: str = ""  # the last failure, one line
    commits_held_since: float | None = None  # monotonic time commits were first held back since they last could go
    commit_problem: str = ""  # why they are held back, one line

    def write_failed(self, problem: str, now: float | None = None) -> None:
        """An insert failed (it is retried): the failure's first time is kept until one succeeds."""
        if self.writes_failing_since is None:
            self.writes_failing_since = time.monotonic() if now is None else now
        self.write_problem = problem

    def write_succeeded(self) -> None:
        """An insert succeeded: writes are healthy again."""
        self.writes_failing_since, self.write_problem = None, ""

    def writes_failing_s(self, now: float | None = None) -> float:
        """How long inserts have been failing without a success in between (0 while they succeed)."""
        if self.writes_failing_since is None:
            return 0.0
        return (time.monotonic() if now is None else now) - self.writes_failing_since

    def commits_held(self, problem: str, now: float | None = None) -> None:
        """Offsets could not be committed (the traffic counts were not written; retried): since when is kept until
        they can."""
        if self.commits_held_since is None:
            self.commits_held_since = time.monotonic() if now is None else now
        self.commit_problem = problem

    def commits_flowing(self) -> None:
        """Nothing holds commits back any more."""
        self.commits_held_since, self.commit_problem = None, ""

    def _held_reason(self, component: str, now: float | None) -> str:
        """Why `component` is down for failing longer than `unready_after_s` (the store's inserts, the commits)."""
        if component == "store":
            since, what, problem = self.writes_failing_since, "inserts failing", self.write_problem
        elif component == "commits":
            since, what, problem = self.commits_held_since, "offsets not committed", self.commit_problem
        else:
            return ""
        if since is None:
            return ""
        failing = (time.monotonic() if now is None else now) - since
        return f"{what} for {failing:.0f} s: {problem}" if failing > self.unready_after_s else ""

    def mark(self, component: str, up: bool, problem: str = "") -> bool:
        """Record a component's state; returns True when it changed (so callers log transitions only)."""
        changed = self.up.get(component) is not up
        self.up[component] = up
        if up:
            self.problem.pop(component, None)
        else:
            self.problem[component] = problem
        return changed

    def component_up(self, component: str, now: float | None = None) -> bool:
        """Whether `component` looks healthy: it answers, and its inserts (the store) or commits are not failing too
        long."""
        return self.up.get(component, True) and not self._held_reason(component, now)

    def reason(self, component: str, now: float | None = None) -> str:
        """Why `component` is down (one line, no secrets), or ''."""
        return self._held_reason(component, now) or self.problem.get(component, "")

    @property
    def ready(self) -> bool:
        """Whether the monitor has started and every component is up."""
        return self.joined and self.store_answered and all(self.component_up(c) for c in self.up)

    def starting(self) -> list[str]:
        """The start-up milestones not reached yet."""
        return [
            what
            for what, done in (("joining the consumer group", self.joined), ("opening the store", self.store_answered))
            if not done
        ]

    def alive(self, max_silence_s: float, now: float | None = None) -> bool:
        """Whether the event loop beat within `max_silence_s`."""
        return (time.monotonic() if now is None else now) - self.beat <= max_silence_s

    async def heartbeat(self, every_s: float = 1.0) -> None:
        """Beat from the event loop until cancelled: a wedged loop stops beating, and liveness fails."""
        while True:
            self.beat = time.monotonic()
            await asyncio.sleep(every_s)

    def report(self) -> dict[str, Any]:
        """The readiness document served at /readyz."""
        return {
            "ready": self.ready,
            "starting": self.starting(),
            "components": {c: {"up": self.component_up(c), "reason": self.reason(c)} for c in self.up},
            "info": dict(self.info),
        }


class HealthGauges:
    """`relevancy_monitor_up{component}` and `relevancy_monitor_ready`, refreshed from a `Health`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._up = Gauge("relevancy_monitor_up", "1 while a dependency looks healthy", ["component"], registry=registry)
        self._ready = Gauge("relevancy_monitor_ready", "1 while every dependency looks healthy", registry=registry)
        self._failing = Gauge(
            "relevancy_monitor_store_writes_failing_seconds",
            "How long inserts have been failing without a success (0 while they succeed)",
            registry=registry,
        )

    def update(self, health: Health) -> None:
        """Export the current state."""
        for component in health.up:
            self._up.labels(component).set(1 if health.component_up(component) else 0)
        self._ready.set(1 if health.ready else 0)
        self._failing.set(health.writes_failing_s())


class HealthServer:
    """Serves `/metrics` (Prometheus), `/healthz` (503 once the event loop has been silent for `max_silence_s`)
    and `/readyz` (503 with the reasons until started, and while a dependency is down) on one port, in a daemon
    thread."""

    def __init__(
        self,
        registry: CollectorRegistry,
        health: Health,
        port: int,
        host: str = "0.0.0.0",
        max_silence_s: float = 30.0,
        setting: str = "MONITOR_METRICS_PORT",
    ) -> None:
        """Bind `port` (named by `setting` in the one-line `PortInUse` when another process holds it)."""
        handler = _handler(registry, health, max_silence_s)
        try:
            self._server = ThreadingHTTPServer((host, port), handler)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            raise PortInUse(
                f"port {port} is in use by another process ({setting}): stop it, or set {setting} to a free port "
                "(0 turns the server off)"
            ) from None
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


def _handler(registry: CollectorRegistry, health: Health, max_silence_s: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                alive = health.alive(max_silence_s)
                body = {"alive": alive, "silent_s": round(time.monotonic() - health.beat, 1)}
                self._send(200 if alive else 503, json.dumps(body).encode() + b"\n", "application/json")
            elif path == "/readyz":
                self._send(
                    200 if health.ready else 503, json.dumps(health.report()).encode() + b"\n", "application/json"
                )
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
