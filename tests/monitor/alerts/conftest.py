"""Synthetic scored rows and helpers for the alerting tests (times are explicit; nothing reads the clock)."""

from __future__ import annotations

import copy
import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from itertools import chain
from typing import Any
from uuid import UUID

import pytest

from monitor.alerts.rules import Rule, RuleSet, load_rules, parse_rules
from monitor.calibration.labels import golden_path, read_labels
from monitor.calibration.run import Spend
from monitor.canary.figures import run_figures
from monitor.canary.run import CanaryRun, JudgedPair
from monitor.canary.table import canary_rows
from monitor.judges.base import JudgeFailure, JudgeInfo, Judgement
from monitor.store.connection import ClickHouseStore, QueryResult
from schemas.canary import CANARY_TABLE, COLUMNS
from schemas.scored import ScoredRow

T0 = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)  # a Monday; every synthetic stream starts here


def make_row(
    t: datetime,
    *,
    app: str = "support",
    model: str = "m1",
    prompt_version: str = "v1",
    judge_id: str = "j1",
    score: float | None = 0.8,
    status: str = "ok",
    lag_s: float = 5.0,
    cost: float | None = 0.001,
    sample_rate: float = 1.0,
    event_id: str | None = None,
    judge: str = "lexical",
    statements: Sequence[str] = (),
    verdicts: Sequence[str] = (),
    sample_rule: str = "base",
    replay_run: str = "",
    turn: int = 0,
) -> ScoredRow:
    """One scored row at event time `t` (written by the replay run `replay_run`, or live when it is empty), of the
    conversation's `turn` (0: its first question)."""
    return ScoredRow(
        event_id=event_id or uuid.uuid4().hex,
        conversation_id="c-" + uuid.uuid4().hex[:8],
        event_time=t,
        app=app,
        model=model,
        prompt_version=prompt_version,
        judge=judge,
        judge_model="",
        judge_id=judge_id,
        status=status,  # type: ignore[arg-type]
        error="" if status == "ok" else "unavailable: test",
        score=score if status == "ok" else None,
        raw_score=score if status == "ok" else None,
        reasoning="r",
        question=f"q {app}",
        response=f"a {app}",
        statements=list(statements),
        verdicts=list(verdicts),
        verdict_reasons=["" for _ in verdicts],
        n_statements=len(statements),
        sample_rate=sample_rate,
        sample_rule=sample_rule,
        cost_usd=cost,
        scored_at=t + timedelta(seconds=lag_s),
        latency_ms=100,
        replay_run=replay_run,
        turn=turn,
    )


class AnsweredOnce(ClickHouseStore):
    """A store that is only read: each distinct query (its SQL and parameters) runs once, and repeats get a copy of
    the first answer. chDB spends about 30 CPU-ms on a rule's query whatever the data, so tests that evaluate the
    same windows again (a per-step backtest beside the fast one) read each once. Writes are refused."""

    def __init__(self, store: ClickHouseStore) -> None:
        super().__init__(store.url, store.database, store.table)
        self.schema_ready = store.schema_ready
        self.use_database()
        self.answers: dict[tuple[str, str], _Kept] = {}
        self.asked = 0

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> QueryResult:
        """The store's answer to `sql` with `parameters`, run the first time it is asked (errors are never kept)."""
        self.asked += 1
        key = (sql, repr(sorted((parameters or {}).items())))
        if key not in self.answers:
            self.answers[key] = _Kept(super().query(sql, parameters))
        return self.answers[key].fresh()

    def writable(self) -> None:
        """Refuse every write: answers kept from before a write would be stale."""
        raise AssertionError("AnsweredOnce serves reads only")


# Values a reader cannot change in place: a row holding only these is handed out as it is.
_IMMUTABLE = frozenset({str, int, float, bool, type(None), datetime, date, Decimal, UUID, bytes})


class _Kept:
    """An answer kept by `AnsweredOnce`, and which of its rows hold a value a reader could change in place (a list,
    a dict): found once when kept, not at every ask (a generator over every value of every row at each ask made 18.7
    million calls, 4 s, in test_history)."""

    def __init__(self, answer: QueryResult) -> None:
        self.answer = answer
        self.mutable: list[int] = []
        # The types of all its values, at C speed; row by row only when one is mutable.
        if not set(map(type, chain.from_iterable(answer.rows))) <= _IMMUTABLE:
            self.mutable = [i for i, row in enumerate(answer.rows) if any(type(v) not in _IMMUTABLE for v in row)]

    def fresh(self) -> QueryResult:
        """A copy of the answer no reader can alter the kept one through: a new list of the same (immutable) tuples,
        with the rows holding mutable values deep-copied."""
        rows = list(self.answer.rows)
        for i in self.mutable:
            rows[i] = copy.deepcopy(rows[i])
        return QueryResult(self.answer.columns, rows)


def insert(store: ClickHouseStore, rows: Iterable[ScoredRow], batch: int = 5000) -> int:
    """Insert rows in batches, each with its own dedup token; returns the count."""
    rows = list(rows)
    for i in range(0, len(rows), batch):
        store.insert_rows(rows[i : i + batch], uuid.uuid4().hex)
    return len(rows)


def stream(
    start: datetime,
    end: datetime,
    *,
    per_minute: int,
    segments: Sequence[dict[str, str]],
    score: Callable[[dict[str, str], datetime, random.Random], float],
    seed: int = 1,
    **row_kw: object,
) -> list[ScoredRow]:
    """`per_minute` rows per segment and minute over [start, end), scores from `score(segment, t, rng)`."""
    rng = random.Random(seed)
    rows = []
    t = start
    while t < end:
        for seg in segments:
            for k in range(per_minute):
                at = t + timedelta(seconds=(60 * k) // per_minute + rng.random())
                rows.append(make_row(at, score=min(1.0, max(0.0, score(seg, at, rng))), **seg, **row_kw))  # type: ignore[arg-type]
        t += timedelta(minutes=1)
    return rows


def noisy(mean: float, sd: float = 0.15) -> Callable[[dict[str, str], datetime, random.Random], float]:
    """Scores ~ N(mean, sd) clipped to [0, 1]."""
    return lambda _seg, _t, rng: rng.gauss(mean, sd)


def rules_from(yaml_text: str) -> list[Rule]:
    """Rules parsed from YAML (a list or a `rules:` mapping)."""
    return parse_rules(yaml_text, "test").rules


@pytest.fixture
def traffic_store(store: ClickHouseStore) -> ClickHouseStore:
    """The store; its schema (schemas/sql/002) includes the traffic table the monitor writes."""
    assert store.query(f"EXISTS TABLE {store.database}.traffic_counts").rows[0][0] == 1
    return store


def insert_traffic(store: ClickHouseStore, rows: Iterable[tuple[datetime, str, str, str, int, int]]) -> None:
    """Traffic rows (minute, app, model, prompt_version, consumed, sampled)."""
    data = [(m, a, mo, p, c, s, c - s, 0) for m, a, mo, p, c, s in rows]
    store.insert_table(
        "traffic_counts",
        ["minute", "app", "model", "prompt_version", "consumed", "sampled", "not_sampled", "dead_lettered"],
        data,
    )


SCORE_RULES = (
    "relevancy_drop",
    "relevancy_floor",
    "low_score_share_rise",
    "prompt_rollout_regression",
    "model_rollout_regression",
)


def default_rules(*names: str, ignore_for: bool = False) -> RuleSet:
    """The shipped default rules named (all when none are), each with the share of the budget the whole file gives
    it, with `for` set to 0 if `ignore_for` (like `check --ignore-for`)."""
    shipped = load_rules()
    chosen = shipped.chosen(names) if names else shipped
    assert not names or len(chosen.rules) == len(names), names
    if ignore_for:
        return chosen.model_copy(update={"rules": [r.model_copy(update={"for_": timedelta(0)}) for r in chosen.rules]})
    return chosen


CANARY_LABELS = "golden_set.jsonl:test"


def canary_run(
    run_at: datetime,
    *,
    shift: float = 0.0,
    errors: int = 0,
    judge_id: str = "j1",
    noise: float = 0.1,
    seed: int = 0,
    labels: str = CANARY_LABELS,
) -> CanaryRun:
    """A canary run of the golden set at `run_at`: each score its label plus `shift` and N(0, noise), clipped to
    0..1; the first `errors` pairs failed. Figures computed as a real run computes them."""
    rng = random.Random(seed)
    judged = []
    for i, pair in enumerate(read_labels(golden_path())):
        if i < errors:
            judged.append(JudgedPair(pair, JudgeFailure("unavailable", "overloaded: test", transient=True)))
            continue
        score = min(1.0, max(0.0, pair.label_unit + shift + rng.gauss(0.0, noise)))
        judged.append(JudgedPair(pair, Judgement(score=score, raw_score=4 * score, reasoning="r"), latency_s=0.01))
    scored = [(j.pair.label_unit, j.judgement.score) for j in judged if j.judgement is not None]
    info = JudgeInfo("lexical", "heuristic", judge_id, heuristic=True)
    return CanaryRun(
        uuid.uuid4().hex[:16],
        run_at,
        info,
        labels,
        tuple(judged),
        run_figures(scored, len(judged)),
        Spend(calls=len(judged)),
        0.1,
    )


def insert_canary(store: ClickHouseStore, runs: Iterable[CanaryRun]) -> None:
    """Write canary runs through the table's row builder, as the canary does."""
    rows = [row for run in runs for row in canary_rows(run, datetime.now(UTC))]
    store.insert_table(CANARY_TABLE, COLUMNS, rows)
