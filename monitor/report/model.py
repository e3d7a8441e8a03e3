"""What the report is made of: the rows its queries return, typed (no SQL, no rendering here)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

from monitor.alerts.windows import WeightedSums
from monitor.feedback.agreement_queries import JudgeUserAgreement

# Whether an optional table could be read: absent from the database, present without rows in the range, or with rows.
TableStatus = Literal["missing", "empty", "present"]

LOW_SCORE_BELOW = 0.5


@dataclass(frozen=True, slots=True, order=True)
class Segment:
    """One series of the report: an app and prompt version as judged by one judge (`judge_id`)."""

    app: str
    prompt_version: str
    judge_id: str
    judge: str = ""
    judge_model: str = ""

    @property
    def label(self) -> str:
        """The series' name in a chart's legend: prompt version and judge id (which names the method)."""
        return f"{self.prompt_version or '(none)'} · {self.judge_id}"


@dataclass(frozen=True, slots=True)
class SegmentBucket:
    """The rows of one segment in one time bucket; `w_*` are sums of 1/sample_rate (or of 1 when unweighted)."""

    t: datetime
    segment: Segment
    rows: int
    ok: int
    errors: int
    w_ok: float
    w_score: float
    w_low: float
    w_sq: float = 0.0  # sum of w^2 over the ok rows: the effective n (sum w)^2 / sum w^2, as the alerts count it
    w_score_sq: float = 0.0  # sum of w * score^2 over the ok rows: the spread behind the band

    def sums(self) -> WeightedSums:
        """The bucket's ok rows as the alerts' weighted sums (the band and the effective n come from them)."""
        return WeightedSums(self.w_ok, self.w_sq, self.w_score, self.w_score_sq, self.w_low)


@dataclass(frozen=True, slots=True)
class HealthBucket:
    """Judge health of one judge in one time bucket: error rows, rate-limited error rows, scoring lag in seconds."""

    t: datetime
    judge_id: str
    judge: str
    rows: int
    errors: int
    rate_limited: int
    lag_p50_s: float | None
    lag_p90_s: float | None
    lag_max_s: float | None


@dataclass(frozen=True, slots=True)
class JudgeTotals:
    """One judge over the whole range: rows, error rows, rate-limited error rows, scoring lag and spend."""

    judge_id: str
    judge: str
    judge_model: str
    rows: int
    errors: int
    rate_limited: int
    lag_p50_s: float | None
    lag_p90_s: float | None
    lag_max_s: float | None
    cost_usd: float
    priced: int


@dataclass(frozen=True, slots=True)
class ErrorReason:
    """How many error rows one judge wrote for one reason over the whole range."""

    judge_id: str
    reason: str
    rows: int


@dataclass(frozen=True, slots=True)
class CostDay:
    """Judge spend of one judge on one UTC day (of event time). `priced` rows carry a cost; the rest had no price."""

    day: date
    judge_id: str
    judge: str
    judge_model: str
    rows: int
    priced: int
    cached: int
    cost_usd: float


@dataclass(frozen=True, slots=True)
class TrafficBucket:
    """Events consumed and chosen for judging (traffic table), events judged (scores table) and calls without
    content per app and prompt version in one time bucket. The app is empty for records that could not be decoded."""

    t: datetime
    app: str
    prompt_version: str
    consumed: int
    sampled: int
    judged: int
    no_content: int = 0  # OpenTelemetry calls that arrived without their text: not scorable, not in `consumed`


@dataclass(frozen=True, slots=True)
class Example:
    """One judged event among the worst scored, with the judge's per-statement verdicts (empty for other judges)."""

    event_time: datetime
    event_id: str
    app: str
    prompt_version: str
    judge_id: str
    judge: str
    score: float
    raw_score: float | None
    question: str
    response: str
    reasoning: str
    statements: tuple[str, ...]
    verdicts: tuple[str, ...]
    verdict_reasons: tuple[str, ...]
    n_statements: int


@dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation among those whose turns the judge found least often relevant: its judged turns (ok rows),
    how many scored at least `LOW_SCORE_BELOW`, and its lowest-scoring turn (index, score, time, text as stored)."""

    app: str
    conversation_id: str
    judge_id: str
    judged_turns: int
    relevant_turns: int
    lowest_turn: int
    lowest_score: float
    lowest_event_time: datetime
    lowest_event_id: str
    question: str
    response: str
    first_event_time: datetime
    last_event_time: datetime

    @property
    def relevant_share(self) -> float:
        """The share of its judged turns that were relevant."""
        return self.relevant_turns / self.judged_turns


@dataclass(frozen=True, slots=True)
class Firing:
    """The latest episode of one alert rule for one segment that overlaps the range: pending from `pending_since`,
    firing from `fired_at` (None: it has not fired yet), resolved at `resolved_at` (None: not resolved). The
    segment is the rule's key, e.g. (("app", "support"), ("judge_id", "lexical-…"))."""

    rule: str
    severity: str
    segment: tuple[tuple[str, str], ...]
    state: str
    fired_at: datetime | None
    resolved_at: datetime | None
    value: float | None
    baseline: float | None
    note: str
    pending_since: datetime | None = None

    @property
    def started(self) -> datetime:
        """When the episode began: pending, or fired when it fired on its first round."""
        first = self.pending_since or self.fired_at
        assert first is not None, "an episode is pending or has fired"
        return first

    @property
    def fired(self) -> bool:
        """Whether the episode reached firing (a resolved one did)."""
        return self.fired_at is not None

    def get(self, key: str) -> str | None:
        """The segment's value for `key`, None when the rule does not key on it (it covers every value)."""
        return next((v for k, v in self.segment if k == key), None)


@dataclass(frozen=True, slots=True)
class FirstSeen:
    """A prompt version or model of an app first seen in the range (its first row in the whole table): a rollout."""

    t: datetime
    app: str
    kind: Literal["prompt_version", "model"]
    value: str

    @property
    def label(self) -> str:
        """`support-bot v13` or `support-bot model claude-x`."""
        return f"{self.app} {self.value}" if self.kind == "prompt_version" else f"{self.app} model {self.value}"


@dataclass(frozen=True, slots=True)
class ShadowPoint:
    """The shadow judge's and the primary judge's mean over the same events of one app in one time bucket."""

    t: datetime
    app: str
    shadow_judge_id: str
    events: int
    primary_mean: float
    shadow_mean: float


@dataclass(frozen=True, slots=True)
class Change:
    """The lead episode, every rule that fired for its segment, and since when: its rollout, else its start."""

    lead: Firing
    rules: tuple[str, ...]
    at: datetime
    rollout: FirstSeen | None


@dataclass(frozen=True, slots=True)
class Figures:
    """The lead segment's weighted mean since the change against its app's (same judge) before it."""

    judge_id: str
    current: float | None
    n_current: int
    baseline: float | None
    n_baseline: int


@dataclass(frozen=True, slots=True)
class Zoom:
    """The lead change's app over a shorter window in finer buckets: the chart that shows the change itself."""

    app: str
    since: datetime
    until: datetime
    bucket_s: int
    segments: tuple[SegmentBucket, ...]


@dataclass(frozen=True, slots=True)
class CanaryPoint:
    """One canary run (`canary_runs`): when, which judge on which labelled set, and its figures against the labels
    (ρ, κ and the mean shift None when undefined)."""

    t: datetime
    run_id: str
    judge_id: str
    judge: str
    labels: str
    pairs: int
    errors: int
    spearman: float | None
    kappa: float | None
    mean_shift: float | None
    cost_usd: float | None


@dataclass(frozen=True, slots=True)
class Replays:
    """Rows `relevancy-monitor replay` wrote in the range (`replay_run` not empty, read with FINAL) and its runs."""

    rows: int
    runs: int


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything the queries returned for one range, with where it came from."""

    store: str  # the store's URL without credentials
    table: str  # database.table of the scores
    since: datetime
    until: datetime
    generated_at: datetime
    bucket_s: int
    weighted: bool  # means weighted by 1/sample_rate (the table has the column)
    segments: tuple[SegmentBucket, ...]
    health: tuple[HealthBucket, ...]
    judges: tuple[JudgeTotals, ...]
    error_reasons: tuple[ErrorReason, ...]
    costs: tuple[CostDay, ...]
    traffic: tuple[TrafficBucket, ...]
    traffic_status: TableStatus
    examples: tuple[Example, ...]
    firings: tuple[Firing, ...]
    alert_status: TableStatus
    canaries: tuple[CanaryPoint, ...] = ()  # the runs in the range, oldest first
    first_seen: tuple[FirstSeen, ...] = ()  # rollouts in the range, oldest first
    shadow: tuple[ShadowPoint, ...] = ()
    default_range: bool = False  # the range is the store's data up to `DEFAULT_DAYS`, not asked for
    change: Change | None = None  # the episode the page leads with
    figures: Figures | None = None  # its segment's mean since the change against before it
    zoom: Zoom | None = None
    canary_status: TableStatus = "missing"
    replays: Replays | None = None  # None: the table predates replays (no replay_run column, migration 036)
    include_replays: bool = False  # the replayed rows are in every figure; otherwise the live consumer's rows only
    # The conversations with the lowest share of relevant turns (at least 2 judged); None: the table predates turns
    # (no `turn` column, migration 043).
    conversations: tuple[Conversation, ...] | None = None
    # How well each judge predicts users' thumbs and ratings over the feedback given in the range (always the live
    # consumer's primary rows); `feedback_status` missing: the schema predates the feedback table (migration 046).
    judge_users: tuple[JudgeUserAgreement, ...] = ()
    feedback_status: TableStatus = "missing"

    @property
    def judged_rows(self) -> int:
        """Rows of the scores table in the range (ok and error)."""
        return sum(b.rows for b in self.segments)
