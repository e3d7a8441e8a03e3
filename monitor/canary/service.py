"""The canary in the alert evaluator: at each round of the leader, `Canary.tick` writes a finished run, and starts
the next when it is due. The I/O shell around the pure parts (schedule, figures, rows).

A run judges in a worker thread with its own event loop, so the alert rounds (and the health probe's heartbeat)
go on while it waits for the provider; every store call stays on the caller's thread (chDB and a clickhouse-connect
session take one query at a time). `background=False` judges in the round itself, for `alerts run --once` and tests."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import structlog

from monitor.canary.model import CanaryTick, RunSummary
from monitor.canary.run import CanaryRun, LabelledSet, judge_set, read_labelled_set
from monitor.canary.schedule import is_due, next_due
from monitor.canary.table import canary_rows
from monitor.judges.base import JudgeInfo
from monitor.judges.factory import build_judge
from monitor.judges.settings import JudgeSettings
from monitor.judging.settings import FlowSettings
from monitor.privacy.redactor import build_redactor
from monitor.privacy.settings import RedactionSettings
from monitor.privacy.spans import Redactor
from monitor.store.connection import ClickHouseStore
from schemas.canary import CANARY_TABLE, COLUMNS
from schemas.errors import StoreError

log = structlog.get_logger("monitor.canary")

# A run that has not finished by then has its unscored pairs as errors; an hour's interval should not let a stuck
# provider hold a run (and its alert) for the whole hour.
MAX_DEADLINE = timedelta(minutes=15)


@dataclass(frozen=True, slots=True)
class CanarySettings:
    """How often, on which set and with which judge: the live judge's settings, flow limits and redaction
    (`redaction` None: judged as written, MONITOR_REDACT=false)."""

    interval: timedelta
    labels_file: Path
    judge: JudgeSettings
    flow: FlowSettings
    redaction: RedactionSettings | None = None
    deadline: timedelta | None = None  # None: the interval, at most MAX_DEADLINE

    @property
    def deadline_s(self) -> float:
        """Seconds a run may take before its unscored pairs are errors."""
        return (self.deadline or min(self.interval, MAX_DEADLINE)).total_seconds()


def judge_info(settings: JudgeSettings) -> JudgeInfo:
    """The identity of the judge `settings` build (built and closed once: a missing API key is a `ConfigError` at
    start, not at the first run)."""
    judge = build_judge(settings)
    asyncio.run(judge.aclose())
    return judge.info


class Canary:
    """Re-scores a labelled set with the live judge every `settings.interval` and writes each run to `canary_runs`."""

    def __init__(self, store: ClickHouseStore, settings: CanarySettings, *, background: bool = True) -> None:
        """Read the labels file and build the judge once (raising `LabelsError` or `ConfigError` at start)."""
        self.store = store
        self.settings = settings
        self.labelled: LabelledSet = read_labelled_set(settings.labels_file)
        self.judge: JudgeInfo = judge_info(settings.judge)
        self._redactor: Redactor | None = build_redactor(settings.redaction)
        self._background = background
        self._pool: ThreadPoolExecutor | None = None
        self._future: Future[CanaryRun] | None = None
        self._unwritten: CanaryRun | None = None
        self._last_stored: datetime | None = None
        self._last_started: datetime | None = None
        self._lock = threading.Lock()
        self._running: tuple[asyncio.AbstractEventLoop, asyncio.Task[CanaryRun]] | None = None

    def tick(self, now: datetime) -> CanaryTick:
        """One round: write a finished run, then start the next when it is due and none is in progress."""
        written: RunSummary | None = None
        failed = ""
        if self._future is not None and self._future.done():
            future, self._future = self._future, None
            try:
                self._unwritten = future.result()
            except Exception as e:  # a bug in a run must not stop the alert rounds: logged with its traceback
                log.exception("canary run crashed", judge_id=self.judge.judge_id)
                failed = f"the run started at {_iso(self._last_started)} crashed: {type(e).__name__}: {e}"
        if self._unwritten is not None:
            written, failed = self._write_unwritten(failed)
        if self._future is not None or self._unwritten is not None:
            return CanaryTick(written, running=self._future is not None, failed=failed, next_due=self._planned())
        due, unread = self._due(now)
        if unread:
            return CanaryTick(written, failed=_joined(failed, unread))
        if not is_due(now, due):
            return CanaryTick(written, failed=failed, next_due=due)
        self._last_started = now
        if self._background:
            self._future = self._executor().submit(self._judge, now)
            return CanaryTick(written, started=True, running=True, failed=failed, next_due=self._planned())
        self._unwritten = self._judge(now)
        written, failed = self._write_unwritten(failed)
        return CanaryTick(written, started=True, failed=failed, next_due=self._planned())

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until a run judging in the background has finished (not written: the next tick writes it); False
        if it is still judging after `timeout` seconds."""
        future = self._future
        if future is None:
            return True
        try:
            future.exception(timeout=timeout)
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        """Stop a run in progress (it is not written: the next leader runs one when due) and the worker thread."""
        with self._lock:
            running = self._running
        if running is not None:
            loop, task = running
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # its loop closed meanwhile: the run just ended
                pass
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    # ---- helpers ----------------------------------------------------------------------------------------------

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="canary")
        return self._pool

    def _planned(self) -> datetime | None:
        return next_due(self._last_stored, self._last_started, self.settings.interval)

    def _due(self, now: datetime) -> tuple[datetime | None, str]:
        """When the next run is due, and why that is unknown ("" when known). When this process thinks it is due
        now, the store's last run is read first: another replica may have run one while this one did not lead, or
        this process restarted."""
        due = self._planned()
        if not is_due(now, due):
            return due, ""
        try:
            self._last_stored = self._stored_last_run()
        except StoreError as e:
            return None, f"cannot read the last canary run: {e}"
        return self._planned(), ""

    def _stored_last_run(self) -> datetime | None:
        table = f"{self.store.database}.{CANARY_TABLE}"
        rows = self.store.query(
            f"SELECT max(run_at) FROM {table} WHERE judge_id = {{j:String}} AND labels = {{l:String}} HAVING count() > "
            "0",
            {"j": self.judge.judge_id, "l": self.labelled.name},
        ).rows
        if not rows:
            return self._last_stored
        value = rows[0][0]
        last: datetime = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return max(last, self._last_stored) if self._last_stored is not None else last

    def _judge(self, now: datetime) -> CanaryRun:
        """One run, in a fresh event loop (the worker thread's, or the round's own when not in the background)."""
        return asyncio.run(self._judge_async(now))

    async def _judge_async(self, now: datetime) -> CanaryRun:
        task = asyncio.current_task()
        assert task is not None
        with self._lock:
            self._running = (asyncio.get_running_loop(), task)
        try:
            s = self.settings
            judge = build_judge(s.judge)
            return await judge_set(
                self.labelled, judge, s.flow, self._redactor, s.deadline_s, now, s.judge.context_window()
            )
        finally:
            with self._lock:
                self._running = None

    def _write_unwritten(self, failed: str) -> tuple[RunSummary | None, str]:
        run = self._unwritten
        assert run is not None
        try:
            self.store.insert_table(CANARY_TABLE, COLUMNS, canary_rows(run, datetime.now(UTC)))
        except StoreError as e:
            log.error("canary run not written", run_id=run.run_id, error=str(e))
            return None, _joined(failed, f"writing run {run.run_id} failed ({e}); retried next round")
        self._unwritten = None
        self._last_stored = max(run.run_at, self._last_stored) if self._last_stored is not None else run.run_at
        summary = run.summary()
        f = summary.figures
        log.info(
            "canary run",
            run_id=run.run_id,
            judge_id=summary.judge_id,
            labels=summary.labels,
            pairs=f.pairs,
            errors=f.errors,
            spearman=f.spearman,
            kappa=f.kappa,
            mean_shift=f.mean_shift,
            calls=summary.calls,
            cost_usd=summary.cost_usd,
            seconds=round(summary.seconds, 3),
        )
        return summary, failed


def _iso(t: datetime | None) -> str:
    return t.isoformat(timespec="seconds") if t is not None else "?"


def _joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
