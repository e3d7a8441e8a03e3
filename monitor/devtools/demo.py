"""The demo: a local broker, the monitor and the alert evaluator on this machine, fed six hours of history and then
live traffic in which one app's new prompt version starts padding its answers, until the alert fires.

The order of one run:
1. prepare the store: the demo's own earlier store is replaced, anyone else's is refused (`prepare_store`);
2. start the broker and the service; write the history: events stamped over the past hours, judged and written
   as the monitor would have at the time (`demo_history`);
3. live traffic at `rate` through Kafka and the service, users' feedback on a share of the answers beside it (on
   the same topic; with OTLP traffic, as JSON on a topic of its own); `regress_after_s` in, the regressed app rolls
   out its new prompt version; the evaluator runs a round every few seconds (the shipped rules) and the screen
   shows progress; the traffic stops `AFTER_FIRING_S` after the planted alert fires, or after `duration_s`;
4. drain, a last round, stop the service; read the worst examples of what fired and the feedback figures (the
   thumbs-down share by prompt version, the judge against users) and write the HTML report;
5. mark the store as the demo's (`MARKER_FILE`), so the next demo may replace it.

Rule windows end on a whole minute (traffic is counted per minute), so the alert fires at the first minute
boundary after enough of the new version's events: 15 to 75 seconds after the rollout."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

from monitor.alerts.engine import AlertRunner, Evaluation, SegmentResult
from monitor.alerts.rules import load_rules
from monitor.calibration.labels import golden_path
from monitor.canary.service import Canary, CanarySettings
from monitor.config import Settings, load_settings
from monitor.devtools.demo_feedback import (
    HISTORY_MIX,
    LIVE_MIX,
    OTLP_FEEDBACK_TOPIC,
    FeedbackFigures,
    read_feedback_figures,
)
from monitor.devtools.demo_history import history_feedback, judge_history, write_history
from monitor.devtools.demo_traffic import REGRESSED, history_records, regressed_segment, story_record
from monitor.devtools.feedback_traffic import Answer, FeedbackQueue, interleave
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.otlp_traffic import otlp_outgoing
from monitor.devtools.outgoing import Outgoing
from monitor.devtools.traffic import produce
from monitor.runtime.logs import configure_logging
from monitor.runtime.metrics import Metrics
from monitor.runtime.service import run_service
from monitor.store.connection import ClickHouseStore, QueryResult
from monitor.store.embedded_reader import READER_FILE, reader_address
from monitor.store.migrations import Migrations
from schemas.errors import MonitorError, StoreError, UsageError

T = TypeVar("T")

MARKER_FILE = "relevancy-monitor-demo.json"
TOPIC = "conversations"
OTLP_CALLS_PER_RECORD = 10  # a small batch, so that a record's calls are seconds apart at most at the demo's rates
EVALUATE_EVERY_S = 3.0
AFTER_FIRING_S = 5.0
PLANTED_RULE = "relevancy_drop"  # the shipped rule the demo waits for: its detector pages on the planted drop
CANARY_HISTORY_EVERY = timedelta(hours=1)  # canary runs in the history, as ALERTS_CANARY_INTERVAL's default
CANARY_LIVE_EVERY = timedelta(seconds=20)  # and during the live minute or two, so one falls on each side of the rollout


@dataclass(frozen=True, slots=True)
class DemoPlan:
    """What one demo run does: how long, how fast, how much history, which judge, where the store and report go."""

    duration_s: float  # the most seconds of live traffic (it stops sooner once the planted alert fires)
    rate: float
    history_hours: float
    history_events: int
    data_dir: Path
    report_path: Path
    judge: str  # "lexical", or "statements" when an Anthropic API key is set
    seed: int = field(default_factory=lambda: int(time.time()))
    input_format: str = "events"  # or otlp_proto / otlp_json: the live traffic as a Collector's records of spans

    @property
    def calls_per_record(self) -> int:
        """LLM calls in one Kafka record of live traffic (an OTLP record holds a batch of spans)."""
        return 1 if self.input_format == "events" else OTLP_CALLS_PER_RECORD

    @property
    def consumed_unit(self) -> str:
        """What the consumed count counts, after the number."""
        return "" if self.calls_per_record == 1 else f" records ({self.calls_per_record} calls each)"

    @property
    def regress_after_s(self) -> float:
        """When, into the live traffic, the regressed app rolls out its new prompt version."""
        return min(15.0, self.duration_s / 3)


def plan_demo(
    duration_s: float,
    rate: float,
    data_dir: Path,
    report_path: Path,
    env: Mapping[str, str],
    input_format: str = "events",
) -> DemoPlan:
    """The plan for these flags: an LLM judge (and less traffic, to keep the bill to cents) when `env` configures
    one (`llm_configured`), the lexical heuristic otherwise. Raises `UsageError` on a bad duration or rate."""
    if not duration_s >= 30:
        raise UsageError(
            f"--duration must be at least 30 seconds (alert windows end on whole minutes), got {duration_s:g}"
        )
    if not 1 <= rate <= 5000:
        raise UsageError(f"--rate must be between 1 and 5000 events per second, got {rate:g}")
    llm = llm_configured(env)
    rate = min(rate, 4.0) if llm else rate
    events = 300 if llm else max(600, int(rate * 60))
    judge = "statements" if llm else "lexical"
    return DemoPlan(
        duration_s, rate, 6.0, events, data_dir.absolute(), report_path.absolute(), judge, input_format=input_format
    )


def llm_configured(env: Mapping[str, str]) -> bool:
    """Whether `env` configures an LLM judge: an Anthropic or MONITOR_JUDGE_API_KEY key, or a provider other than
    anthropic (a local vLLM or Ollama needs no key; Bedrock and Vertex use their platforms' credentials). A provider
    configured wrongly is then refused in one line by the judge's own settings check."""
    keys = ("ANTHROPIC_API_KEY", "MONITOR_ANTHROPIC_API_KEY", "MONITOR_JUDGE_API_KEY")
    if any((env.get(k) or "").strip() for k in keys):
        return True
    return (env.get("MONITOR_JUDGE_PROVIDER") or "anthropic").strip() not in ("", "anthropic")


def prepare_store(data_dir: Path) -> None:
    """Empty `data_dir` for a fresh demo when it is missing, empty or the demo's own (the marker, and nothing written
    since); raises `UsageError` when a monitor holds it or it holds data the demo did not write."""
    if not data_dir.exists() or not any(data_dir.iterdir()):
        return
    holder = reader_address(data_dir)
    if holder is not None:
        raise UsageError(
            f"a running monitor (pid {holder.pid}) holds {data_dir}: stop it, or give the demo another --data-dir"
        )
    marker = data_dir / MARKER_FILE
    if not marker.exists():
        raise UsageError(
            f"{data_dir} holds a store the demo did not write: the demo starts empty, so give it another --data-dir"
        )
    written = max(
        (
            p.stat().st_mtime
            for p in data_dir.rglob("*")
            if p.is_file() and p.name not in (MARKER_FILE, READER_FILE, "status")
        ),
        default=0.0,
    )
    if written > marker.stat().st_mtime + 60:  # chDB touches a few files as it shuts down, after the marker
        raise UsageError(
            f"{data_dir} was written to after the last demo (by `relevancy-monitor run`?): give the demo another "
            "--data-dir"
        )
    shutil.rmtree(data_dir)


@dataclass
class DemoProgress:
    """What the screen shows while the demo runs; updated by the demo, read by the screen."""

    phase: str = "starting"
    counting: bool = False  # the counters cover live traffic only: the history is written beside the service
    consumed: int = 0
    judged: int = 0
    in_flight: int = 0
    dead_lettered: int = 0
    live_elapsed_s: float = 0.0
    regressed: bool = False
    segments: list[tuple[str, str, int, float | None, int, float | None]] = field(
        default_factory=list
    )  # app, version, n/mean history, live
    firing: list[SegmentResult] = field(default_factory=list)
    story: list[str] = field(default_factory=list)  # what happened, one timestamped line each, oldest first


@dataclass(frozen=True, slots=True)
class Example:
    """One of the worst-scored answers of the segment that fired, with its statements and their verdicts."""

    score: float
    question: str
    statements: list[str]
    verdicts: list[str]


@dataclass(frozen=True, slots=True)
class DemoOutcome:
    """What one demo run produced: the counters, the last evaluation, what fired and its worst examples, the report."""

    plan: DemoPlan
    url: str
    consumed: int
    judged: int
    dead_lettered: int
    produced_history: int
    produced_live: int
    evaluation: Evaluation | None
    fired: list[SegmentResult]
    examples: dict[str, list[Example]]  # by rule name of what fired
    report_path: Path | None
    report_error: str = ""
    feedback: FeedbackFigures | None = None  # None: not read (the store refused; the screen leaves it out)


def _counter(metrics: Metrics, name: str) -> int:
    return int(
        sum(
            s.value
            for m in metrics.registry.collect()
            if m.name == name
            for s in m.samples
            if s.name.endswith("_total")
        )
    )


def _gauge(metrics: Metrics, name: str) -> int:
    return int(sum(s.value for m in metrics.registry.collect() if m.name == name for s in m.samples))


def demo_settings(plan: DemoPlan, bootstrap: str) -> Settings:
    """The monitor's settings for the demo: the local broker, the embedded store at `plan.data_dir`, quick batches."""
    extra: dict[str, Any] = {"budget_usd_per_day": 1.0, "judge_concurrency": 16} if plan.judge != "lexical" else {}
    topics, input_format = [TOPIC], plan.input_format
    if plan.input_format != "events":  # OTLP spans on TOPIC; the feedback, our JSON, on a topic of its own
        topics, input_format = [TOPIC, OTLP_FEEDBACK_TOPIC], f"{TOPIC}={plan.input_format},{OTLP_FEEDBACK_TOPIC}=events"
    return load_settings(
        kafka_bootstrap_servers=bootstrap,
        kafka_topics=topics,
        feedback_topics=[feedback_topic(plan)],
        input_format=input_format,
        kafka_group_id="relevancy-monitor-demo",
        clickhouse_url=f"chdb://{plan.data_dir}",
        judge=plan.judge,
        metrics_port=0,
        log_format="console",
        log_level="error",
        batch_max_seconds=0.5,
        commit_interval_s=0.5,
        **extra,
    )


def feedback_topic(plan: DemoPlan) -> str:
    """Where the demo's feedback goes: beside the conversations on their topic, or (OTLP traffic) a topic of its own."""
    return TOPIC if plan.input_format == "events" else OTLP_FEEDBACK_TOPIC


def run_demo(plan: DemoPlan, show: Callable[[DemoProgress], None] | None = None) -> DemoOutcome:
    """Run the whole demo (see the module docstring); `show` is called with the progress about twice a second."""
    prepare_store(plan.data_dir)
    configure_logging("console", "error")  # the screen tells the story; warnings would break into the live panel
    with LocalBroker() as broker:
        settings = demo_settings(plan, broker.bootstrap)
        outcome = asyncio.run(_Demo(plan, settings, show or (lambda _: None)).run())
    (plan.data_dir / MARKER_FILE).write_text(
        json.dumps({"finished_at": datetime.now(UTC).isoformat()}), encoding="utf-8"
    )
    return outcome


_SEGMENTS_SQL = """
SELECT app, prompt_version,
       countIf(event_time < {live:DateTime64(3, 'UTC')}) AS n_history,
       avgIf(score, event_time < {live:DateTime64(3, 'UTC')}) AS history,
       countIf(event_time >= {live:DateTime64(3, 'UTC')}) AS n_live,
       avgIf(score, event_time >= {live:DateTime64(3, 'UTC')}) AS live
FROM {table} FINAL WHERE status = 'ok' GROUP BY app, prompt_version ORDER BY app, prompt_version
"""
_WORST_SQL = """
SELECT score, question, statements, verdicts FROM {table} FINAL
WHERE status = 'ok' AND app = {app:String} AND prompt_version = {version:String}
  AND event_time >= {since:DateTime64(3, 'UTC')}
ORDER BY n_statements > 1 DESC, score ASC, event_time DESC LIMIT 50
"""


class _Demo:
    """One run's moving parts: the service task, the producers, the evaluator, and a store client for reading."""

    def __init__(self, plan: DemoPlan, settings: Settings, show: Callable[[DemoProgress], None]) -> None:
        self.plan = plan
        self.settings = settings
        self.show = show
        self.metrics = Metrics()
        self.progress = DemoProgress()
        self.rng = random.Random(plan.seed)
        self.store = ClickHouseStore.from_settings(settings.store)
        self.rules = load_rules()
        self.runner: AlertRunner | None = None
        self.evaluation: Evaluation | None = None
        self.live_start = datetime.now(UTC)
        self.live_events = 0
        self.feedback = FeedbackQueue(LIVE_MIX, plan.seed)  # replaced as the live traffic starts
        self._states: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}  # each rule and segment's last state
        # One thread for every call of this client: the chDB client is not for concurrent use.
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="demo-store")

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._io, fn, *args)

    async def run(self) -> DemoOutcome:
        stop = asyncio.Event()
        service = asyncio.create_task(run_service(self.settings, stop=stop, metrics=self.metrics))
        try:
            produced_history = await self._history(service)
            records = await self._live(service)
            produced_live = self.live_events
            await self._drain(service, records)
            self.progress.phase = "last alert round"
            self.show(self.progress)
            await self._evaluate()
        finally:
            stop.set()
            await service
        self.progress.phase = "writing the report"
        self.show(self.progress)
        try:
            return await self._call(self._finish, produced_history, produced_live)
        finally:
            await self._call(self.store.close)
            self._io.shutdown()

    async def _history(self, service: asyncio.Task[None]) -> int:
        now = datetime.now(UTC)
        records = history_records(self.rng, now, self.plan.history_hours, self.plan.history_events)
        values = [value for value, _ in records]
        self.progress.phase = (
            f"writing {self.plan.history_hours:g} h of history ({len(values)} events, judged as they came)"
        )
        self.show(self.progress)
        past = await judge_history(self.settings, values, self.rng)
        answers = [answer for _, answer in records]
        feedback = history_feedback(self.settings, answers, HISTORY_MIX, self.plan.seed, now)
        past = dataclasses.replace(past, feedback=feedback)
        await self._open_store(service)
        await self._call(write_history, self.store, past)
        canary = None
        if self.plan.judge == "lexical":  # an LLM judge's canary would re-score 107 labelled pairs a run, on the bill
            await self._call(self._canary_history)
            canary = await self._call(self._canary, CANARY_LIVE_EVERY)
        self.runner = AlertRunner(self.store, self.rules, [], replica="demo", canary=canary)
        return len(values)

    def _canary(self, every: timedelta) -> Canary:
        s = self.settings
        settings = CanarySettings(every, golden_path(), s.judge, s.flow, s.redaction)
        return Canary(self.store, settings, background=False)

    def _canary_history(self) -> None:
        """Canary runs over the history, hourly: the judge's own record beside the live scores."""
        canary = self._canary(CANARY_HISTORY_EVERY)
        start = datetime.now(UTC) - timedelta(hours=self.plan.history_hours)
        for hour in range(int(self.plan.history_hours)):
            canary.tick(start + hour * CANARY_HISTORY_EVERY)
        canary.close()

    async def _open_store(self, service: asyncio.Task[None], limit_s: float = 120.0) -> None:
        """Open the store for writes once the service has migrated it (it migrates the embedded store as it starts,
        under the schema lock this waits on): the history is never written into a half-made schema."""
        deadline = time.monotonic() + limit_s
        while True:
            await self._refresh(service)
            try:
                await self._call(partial(Migrations(self.store).ensure, migrate=False))
                return
            except StoreError:
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.25)

    async def _wait_consumed(self, service: asyncio.Task[None], total: int, limit_s: float = 300.0) -> None:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            await self._refresh(service)
            if self.progress.consumed >= total and self.progress.in_flight == 0:
                await asyncio.sleep(
                    self.settings.flow.batch_max_seconds + 0.5
                )  # the last batch's rows and traffic counts
                return
            await asyncio.sleep(0.25)
        raise UsageError(f"the monitor did not finish {total} events within {limit_s:.0f} s")

    async def _refresh(self, service: asyncio.Task[None]) -> None:
        if service.done():
            service.result()  # the service's own error, as it would end `run`
            raise UsageError("the monitor stopped early")
        p, m = self.progress, self.metrics
        p.consumed = _counter(m, "relevancy_monitor_events_consumed")
        p.judged = _counter(m, "relevancy_monitor_events_judged")
        p.dead_lettered = _counter(m, "relevancy_monitor_events_dead_lettered")
        p.in_flight = _gauge(m, "relevancy_monitor_in_flight_events")
        self.show(p)

    async def _live(self, service: asyncio.Task[None]) -> int:
        """Live traffic until the planted alert has fired and `AFTER_FIRING_S` more, or `duration_s`; returns the
        conversation records sent (`live_events` counts the events in them; the feedback records are not counted)."""
        self.progress.phase, self.progress.counting = "live traffic", True
        self.live_start = datetime.now(UTC)
        started = time.monotonic()
        ends_at = started + self.plan.duration_s

        def values() -> Iterator[tuple[Outgoing, Answer | None]]:
            while time.monotonic() < ends_at:
                regressed = time.monotonic() - started >= self.plan.regress_after_s
                if regressed and not self.progress.regressed:
                    self.progress.story.append(rollout_line(datetime.now(UTC)))
                self.progress.regressed = regressed
                self.live_events += 1
                value, answer = story_record(self.rng, datetime.now(UTC), regressed=self.progress.regressed)
                yield Outgoing(value, answer.conversation_id.encode() if answer else None), answer

        plan = self.plan
        topic = feedback_topic(plan)
        mix = dataclasses.replace(LIVE_MIX, topic=None if topic == TOPIC else topic)
        self.feedback = FeedbackQueue(mix, plan.seed, clock=lambda: datetime.now(UTC))
        records = interleave(values(), self.feedback)
        if plan.input_format != "events":
            encoding: Literal["otlp_proto", "otlp_json"] = (
                "otlp_json" if plan.input_format == "otlp_json" else "otlp_proto"
            )
            records = otlp_outgoing(
                records, encoding=encoding, per_record=plan.calls_per_record, seed=plan.seed, evaluations=False
            )
        bootstrap = self.settings.kafka.bootstrap_servers
        rate = plan.rate / plan.calls_per_record + plan.rate * mix.share  # records a second, the feedback's included
        producer = asyncio.create_task(produce(bootstrap, TOPIC, records, rate=rate, kafka=self.settings.kafka))
        next_round, next_query = time.monotonic() + EVALUATE_EVERY_S, 0.0
        while not producer.done():
            now = time.monotonic()
            self.progress.live_elapsed_s = now - started
            if now >= next_query:
                await self._segments()
                next_query = time.monotonic() + 1.0
            if now >= next_round:
                await self._evaluate()
                next_round = time.monotonic() + EVALUATE_EVERY_S
                if self.planted_fired() and ends_at > time.monotonic() + AFTER_FIRING_S:
                    ends_at = time.monotonic() + AFTER_FIRING_S
            await self._refresh(service)
            await asyncio.sleep(0.5)
        return await producer - self.feedback.sent

    def planted_fired(self) -> bool:
        """Whether the shipped relevancy_drop fires for the regressed segment."""
        wanted = regressed_segment().items()
        return any(
            r.rule.name == PLANTED_RULE and wanted <= dict(r.state.segment).items() for r in self.progress.firing
        )

    async def _drain(self, service: asyncio.Task[None], live: int) -> None:
        self.progress.phase = "judging the last events"
        await self._wait_consumed(service, live)
        await self._segments()

    async def _segments(self) -> None:
        sql = _SEGMENTS_SQL.replace("{table}", self.store.qualified_table)
        result = await self._call(self.store.query, sql, {"live": self.live_start})
        self.progress.segments = [
            (str(a), str(v), int(nh), _opt(h), int(nl), _opt(li)) for a, v, nh, h, nl, li in result.rows
        ]

    async def _evaluate(self) -> None:
        assert self.runner is not None
        report = await self._call(self.runner.run_once)
        self.evaluation = report.evaluation
        if report.evaluation is not None:
            results = report.evaluation.results
            self.progress.firing = [r for r in results if r.state.state == "firing"]
            for r in results:
                key = (r.rule.name, r.state.segment)
                if r.state.state != self._states.get(key, "inactive") and r.state.state != "inactive":
                    self.progress.story.append(decision_line(datetime.now(UTC), r))
                self._states[key] = r.state.state

    def _finish(self, produced_history: int, produced_live: int) -> DemoOutcome:
        fired = [r for r in self.evaluation.results if r.state.state == "firing"] if self.evaluation else []
        examples = {
            r.rule.name: self._worst(r) for r in fired if {"app", "prompt_version"} <= dict(r.state.segment).keys()
        }
        report_path, report_error = self._report()
        return DemoOutcome(
            feedback=self._feedback_figures(),
            plan=self.plan,
            url=self.store.url,
            consumed=self.progress.consumed,
            judged=self.progress.judged,
            dead_lettered=self.progress.dead_lettered,
            produced_history=produced_history,
            produced_live=produced_live,
            evaluation=self.evaluation,
            fired=fired,
            examples=examples,
            report_path=report_path,
            report_error=report_error,
        )

    def _worst(self, result: SegmentResult) -> list[Example]:
        segment = dict(result.state.segment)
        since = self.live_start
        result_rows: QueryResult = self.store.query(
            _WORST_SQL.replace("{table}", self.store.qualified_table),
            {"app": segment["app"], "version": segment["prompt_version"], "since": since},
        )
        examples: dict[tuple[str, ...], Example] = {}
        for score, question, statements, verdicts in result_rows.rows:
            verdicts = [str(v) for v in verdicts]
            # One example per kind of padding: the same irrelevant sentences on another order number teach nothing new.
            shape = tuple(st for st, v in zip(statements, verdicts, strict=False) if v != "yes")
            examples.setdefault(shape, Example(float(score), str(question), list(statements), verdicts))
        return list(examples.values())[:3]

    def _feedback_figures(self) -> FeedbackFigures | None:
        """The closing figures on users' feedback, over the history and the live minutes; None if the store refuses
        (the rest of the story stands without them)."""
        start = self.live_start - timedelta(hours=self.plan.history_hours + 1)
        try:
            return read_feedback_figures(self.store, REGRESSED.name, start, datetime.now(UTC) + timedelta(minutes=10))
        except StoreError:
            return None

    def _report(self) -> tuple[Path | None, str]:
        from monitor.report import write_report

        try:  # the default range: all of it, the history and the live minutes (the report zooms on the change)
            summary = write_report(self.store, None, datetime.now(UTC), self.plan.report_path)
        except MonitorError as e:  # the story is told on screen: a report that cannot be written is said, not fatal
            return None, str(e)
        return summary.path, ""


def rollout_line(at: datetime) -> str:
    """`14:32:05 support-bot rolls out prompt v13 (pads its answers)`."""
    return f"{at:%H:%M:%S} {REGRESSED.name} rolls out prompt {REGRESSED.new_version} (pads its answers)"


def decision_line(at: datetime, result: SegmentResult) -> str:
    """`14:33:00 relevancy_drop firing for app=support-bot, prompt_version=v13: 0.484 against 0.886 (n=120)`."""
    st = result.state
    segment = ", ".join(f"{k}={v}" for k, v in st.segment) or "all segments"
    figures = ""
    if st.value is not None:
        against = f" against {st.baseline:.3f}" if st.baseline is not None else ""
        figures = f": {st.value:.3f}{against} (n={st.n_current})"
    return f"{at:%H:%M:%S} {result.rule.name} ({result.rule.severity}) {st.state} for {segment}{figures}"


def _opt(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if f != f else f  # avgIf over no rows is nan
