"""Alert state in ClickHouse (`alert_state`, ReplacingMergeTree: the latest row per rule and segment wins),
and a lease (`alert_leases`) so that of several `alerts run` replicas only one evaluates and notifies."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from monitor.alerts.evaluator import AlertState, Frozen
from monitor.alerts.likelihood import Bank, with_baseline
from monitor.alerts.sequential import BIN_VALUES, Reference
from monitor.alerts.windows import utc
from monitor.store.connection import ClickHouseStore

STATE_TABLE = "alert_state"
LEASE_TABLE = "alert_leases"

_STATE_COLUMNS = (
    "rule",
    "segment_key",
    "segment",
    "state",
    "since",
    "fired_at",
    "resolved_at",
    "last_eval_at",
    "last_notified_at",
    "notified",
    "value",
    "baseline",
    "n_current",
    "n_baseline",
    "p_value",
    "severity",
    "note",
    "detector",
    "updated_at",
    "writer",
)
_LEASE_COLUMNS = ("replica", "joined_at", "heartbeat_at", "released")


def _opt(dt: Any) -> datetime | None:
    return None if dt is None else utc(dt)


class StateStore:
    """Loads and saves `AlertState` rows in `{database}.alert_state` (created by the versioned DDL)."""

    def __init__(self, store: ClickHouseStore, writer: str = "") -> None:
        self.store = store
        self.writer = writer or default_replica_id()

    @property
    def table(self) -> str:
        """`database.alert_state`."""
        return f"{self.store.database}.{STATE_TABLE}"

    def load(self) -> dict[tuple[str, str], AlertState]:
        """Every stored state, keyed by (rule, segment key)."""
        cols = [c for c in _STATE_COLUMNS if c not in ("segment_key", "updated_at", "writer")]
        result = self.store.query(f"SELECT {', '.join(cols)} FROM {self.table} FINAL")
        out: dict[tuple[str, str], AlertState] = {}
        for row in result.rows:
            r = dict(zip(cols, row, strict=True))
            segment = tuple((str(k), str(v)) for k, v in json.loads(r["segment"]))
            s = AlertState(
                rule=r["rule"],
                segment=segment,
                state=r["state"],
                since=_opt(r["since"]),
                fired_at=_opt(r["fired_at"]),
                resolved_at=_opt(r["resolved_at"]),
                last_eval_at=_opt(r["last_eval_at"]),
                last_notified_at=_opt(r["last_notified_at"]),
                notified=dict(r["notified"]),
                value=r["value"],
                baseline=r["baseline"],
                n_current=int(r["n_current"]),
                n_baseline=int(r["n_baseline"]),
                p_value=r["p_value"],
                severity=r["severity"],
                note=r["note"],
                frozen=frozen_from_json(r["detector"]),
            )
            out[s.key] = s
        return out

    def save(self, states: Iterable[AlertState], now: datetime) -> int:
        """Write `states` (each replaces its earlier row); returns how many were written. Raises `StoreError`."""
        data: list[tuple[Any, ...]] = []
        for s in states:
            data.append(
                (
                    s.rule,
                    s.key[1],
                    json.dumps([list(p) for p in s.segment]),
                    s.state,
                    s.since,
                    s.fired_at,
                    s.resolved_at,
                    s.last_eval_at or now,
                    s.last_notified_at,
                    s.notified,
                    s.value,
                    s.baseline,
                    s.n_current,
                    s.n_baseline,
                    s.p_value,
                    s.severity,
                    s.note[:2000],
                    frozen_to_json(s.frozen),
                    now,
                    self.writer,
                )
            )
        if data:
            self.store.insert_table(STATE_TABLE, _STATE_COLUMNS, data)
        return len(data)


def frozen_to_json(frozen: Frozen | None) -> str:
    """A detector's frozen reference as stored in `alert_state.detector` ('' for none)."""
    if frozen is None:
        return ""
    ref = frozen.reference
    out: dict[str, Any] = {
        "mean": ref.mean,
        "slack": ref.slack,
        "threshold": ref.threshold,
        "resolve_at": ref.resolve_at,
        "margin": ref.margin,
    }
    if ref.bank is not None:
        # The baseline's histogram and the members' thresholds: the alternatives are rebuilt from the histogram.
        out.update(probs=ref.bank.probs.tolist(), limits=ref.bank.limits.tolist())
    out["until"] = frozen.until.isoformat()
    if frozen.accepted_at is not None:
        out.update(accepted_by=frozen.accepted_by, accepted_at=frozen.accepted_at.isoformat())
    return json.dumps(out, separators=(",", ":"))


def frozen_from_json(text: str | None) -> Frozen | None:
    """The frozen reference of `frozen_to_json`; None for '' (and for a row this version cannot read)."""
    if not text:
        return None
    try:
        d = json.loads(text)
        ref = Reference(
            float(d["mean"]),
            float(d["slack"]),
            float(d["threshold"]),
            float(d.get("resolve_at", 0.0)),
            float(d.get("margin", 0.0)),
        )
        if "probs" in d:
            probs = np.array([float(v) for v in d["probs"]])
            limits = np.array([float(v) for v in d["limits"]])
            if len(probs) != len(BIN_VALUES) or not (probs > 0).all():
                return None
            bank = with_baseline(Bank(probs, np.empty((0, len(probs))), limits), probs, BIN_VALUES)
            ref = dataclasses.replace(ref, bank=bank)
        accepted = d.get("accepted_at")
        accepted_at = utc(datetime.fromisoformat(accepted)) if accepted else None
        return Frozen(ref, utc(datetime.fromisoformat(d["until"])), str(d.get("accepted_by", "")), accepted_at)
    except (ValueError, KeyError, TypeError):
        return None  # a reference is recalibrated from the baseline rather than fail the round


def default_replica_id() -> str:
    """host:pid:random, unique per process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Lease:
    """Leader election through heartbeat rows: among replicas whose heartbeat is younger than `ttl`, the one
    that joined first leads. A replica that joins later never outranks a live leader, and one whose own
    heartbeat went stale rejoins at the back, so two replicas never both believe they lead after one read."""

    def __init__(self, store: ClickHouseStore, replica: str, ttl: timedelta) -> None:
        self.store = store
        self.replica = replica
        self.ttl = ttl
        self._joined: datetime | None = None
        self._last_beat: datetime | None = None

    @property
    def table(self) -> str:
        """`database.alert_leases`."""
        return f"{self.store.database}.{LEASE_TABLE}"

    def acquire(self, now: datetime) -> bool:
        """Heartbeat, then True if this replica leads now."""
        now = utc(now)
        if self._joined is None or self._last_beat is None or now - self._last_beat > self.ttl:
            self._joined = now
        self._beat(self._joined, now, released=False)
        self._last_beat = now
        rows = self.store.query(
            "SELECT replica, argMax(joined_at, heartbeat_at) AS joined, max(heartbeat_at) AS beat,"
            f" argMax(released, heartbeat_at) AS gone FROM {self.table} "
            "GROUP BY replica HAVING beat >= {cutoff:DateTime64(3, 'UTC')} AND gone = 0 ORDER BY joined, replica LIMIT "
            "1",
            {"cutoff": now - self.ttl},
        ).rows
        return bool(rows) and rows[0][0] == self.replica

    def release(self, now: datetime) -> None:
        """Step down (on shutdown), so another replica takes over at its next round instead of after `ttl`."""
        if self._joined is not None:
            # Strictly after the last heartbeat, so the released row is the latest one (ties would be ambiguous).
            last = self._last_beat + timedelta(milliseconds=1) if self._last_beat is not None else utc(now)
            self._beat(self._joined, max(utc(now), last), released=True)
            self._joined = None

    def _beat(self, joined: datetime, at: datetime, *, released: bool) -> None:
        self.store.insert_table(LEASE_TABLE, _LEASE_COLUMNS, [(self.replica, joined, at, int(released))])
