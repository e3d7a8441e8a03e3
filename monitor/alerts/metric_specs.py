"""One `MetricSpec` per metric a rule can alert on: everything that differs between metrics, in one place.

Rules, observations, SQL, the evaluator and the engine look a metric up in `SPECS` (or through `Rule.spec`)
instead of branching on its name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricName = Literal[
    "mean_score",
    "low_score_share",
    "p10",
    "error_rate",
    "invalid_reply_rate",
    "judged_volume",
    "coverage",
    "scoring_lag_p90",
    "cost_per_window",
    "cache_read_share",
    "no_data",
    "rollout_mean_score",
    "canary_spearman",
    "canary_kappa",
    "canary_mean_shift",
    "canary_error_rate",
    "shadow_spearman",
    "shadow_mean_difference",
    "control_kappa",
    "feedback_negative_share",
    "feedback_rate",
    "feedback_auc",
]
Direction = Literal["down", "up"]
Table = Literal["scores", "canary", "shadow", "labels", "feedback", "feedback_scores"]

_OK_ROWS = "status = 'ok'"
_WORST_SCORES_FIRST = "score ASC, event_time DESC"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """How one metric is read, tested, keyed and explained."""

    name: MetricName
    bad_direction: Direction  # which way is bad, unless the rule says otherwise
    tests: tuple[str, ...] = ()  # the tests run with `test: auto` (vs the baseline, vs the threshold); () for none
    time_column: str = "event_time"  # the time a row belongs to a window by
    needs_traffic: bool = False  # joins the traffic table's sampled counts to the scores
    # Score metrics key by judge_id too, so a judge or judge-prompt change starts a new baseline instead of
    # looking like a product regression.
    judge_keyed: bool = False
    examples_filter: str | None = _OK_ROWS  # which rows the "worst examples" query lists
    examples_order: str = _WORST_SCORES_FIRST  # and worst first by what
    silence: bool = False  # fires when a segment with traffic goes quiet; takes no condition
    min_events_apply: bool = True  # the window needs `min_events` events to decide on
    tail_counts: bool = False  # its tests need counts below the baseline's value, read in a second query
    # A segment with too little history of its own (a new prompt version or model) may borrow its nearest
    # parent's baseline: the metric is made of counts and sums, which pool by adding segments up.
    poolable: bool = False
    # Rollout rules: the baseline is the version before the newest one, in the same window (rule.rollout).
    compares_versions: bool = False
    retired_note: str = "segment retired: no rows in the window or the baseline"  # why a vanished segment resolves
    # Canary metrics read the canary table (one row per run and labelled pair, `monitor.canary`) instead of the
    # scores, keyed by the labelled set as well as the judge: a new set is a new history, never judge drift. Shadow
    # metrics read the scores table's shared events (a shadow row joined to its primary's), keyed by both judge_ids.
    # Label metrics read the reviewers' labels (`labels`, monitor.review) joined to every judge's score of the item.
    table: Table = "scores"
    extra_keys: tuple[str, ...] = ()  # key fields after judge_id
    # Traffic metrics (not keyed by judge) count the primary's rows only: a shadow judge's second row of an event
    # (`sample_rule` 'shadow:...') is no extra traffic, and a primary row lost behind a shadow row is not coverage.
    primary_only: bool = False
    unit: str = "events"  # what min_events counts, in words

    @property
    def share_detector(self) -> bool:
        """Whether a detector on this metric watches a share (two values: a bad event or not) rather than the score
        histogram."""
        return self.name in SHARE_DETECTORS

    @property
    def test_label(self) -> str:
        """The tests as shown to people (`welch_t / one_sample_t`); "" when the metric has none."""
        return " / ".join(self.tests)


# Detector metrics whose CUSUM adds up a two-valued event (a low score, a negative feedback): the likelihood ratio of a
# rise of the share, calibrated by the exact bootstrap (`sequential.calibrate`).
SHARE_DETECTORS = ("low_score_share", "feedback_negative_share")
_SHARE_TESTS = ("two_proportion_z", "wilson_score")
_MEAN_TESTS = ("welch_t", "one_sample_t")


def _canary(
    name: MetricName,
    direction: Direction,
    tests: tuple[str, ...] = (),
    *,
    examples_filter: str = _OK_ROWS,
    examples_order: str = "abs(score - label_unit) DESC, run_at DESC, pair_id",  # the largest disagreements first
    unit: str = "judged canary pairs",
) -> MetricSpec:
    return MetricSpec(
        name,
        direction,
        tests,
        time_column="run_at",
        judge_keyed=True,
        examples_filter=examples_filter,
        examples_order=examples_order,
        retired_note="no canary run of this judge and labelled set in the window or the baseline any more",
        table="canary",
        extra_keys=("labels",),
        unit=unit,
    )


def _shadow(name: MetricName, direction: Direction) -> MetricSpec:
    return MetricSpec(
        name,
        direction,
        judge_keyed=True,
        examples_filter=None,
        examples_order="abs(shadow_score - primary_score) DESC, event_time DESC",  # the largest disagreements first
        retired_note="no event scored ok by both this shadow judge and its primary in the window or the baseline any "
        "more",
        table="shadow",
        extra_keys=("primary_judge_id",),
        unit="shared events",
    )


SPECS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec("mean_score", "down", _MEAN_TESTS, judge_keyed=True, poolable=True),
        MetricSpec("low_score_share", "up", _SHARE_TESTS, judge_keyed=True, poolable=True),
        MetricSpec("p10", "down", ("tail_share_z", "wilson_score"), judge_keyed=True, tail_counts=True),
        MetricSpec(
            "error_rate",
            "up",
            _SHARE_TESTS,
            judge_keyed=True,
            poolable=True,
            examples_filter="status = 'error'",
            examples_order="event_time DESC",
        ),
        MetricSpec(
            "invalid_reply_rate",
            "up",
            _SHARE_TESTS,
            judge_keyed=True,
            poolable=True,
            examples_filter="status = 'error' AND startsWith(error, 'invalid_reply')",
            examples_order="event_time DESC",
        ),
        MetricSpec(
            "judged_volume",
            "down",
            ("poisson_exact",),
            min_events_apply=False,
            primary_only=True,
        ),
        MetricSpec("coverage", "down", _SHARE_TESTS, needs_traffic=True, primary_only=True),
        # Scoring lag is about rows written lately, so its windows go by scored_at.
        MetricSpec(
            "scoring_lag_p90",
            "up",
            time_column="scored_at",
            judge_keyed=True,
            examples_filter=None,
            examples_order="lag_s DESC",
        ),
        MetricSpec(
            "cost_per_window",
            "up",
            judge_keyed=True,
            examples_filter=None,
            examples_order="cost_usd DESC NULLS LAST",
        ),
        # The share of a judge's prompt tokens the API read from the prompt cache: sum(cache_read_tokens) over
        # sum(input_tokens + cache_read_tokens + cache_write_tokens), the three disjoint parts of a prompt as the
        # API bills it (input_tokens counts only what was neither read nor written). Rows with no prompt tokens (no
        # call: a heuristic judge, a reused verdict, an empty response) add nothing; `min_events` counts calls.
        # Unweighted, like cost: it is about what was sent, not the traffic it stands for. No test: the value is a
        # ratio of token sums, and min_events calls guard it.
        MetricSpec(
            "cache_read_share",
            "down",
            judge_keyed=True,
            examples_filter="input_tokens + cache_read_tokens + cache_write_tokens > 0",
            examples_order="cache_read_tokens ASC, event_time DESC",
            unit="judge calls",
        ),
        MetricSpec(
            "no_data",
            "down",
            ("poisson_exact",),
            silence=True,
            min_events_apply=False,
            primary_only=True,
        ),
        # The newest version is its own segment (its examples, its fingerprint); when it stops being the newest,
        # or the version before it leaves the window, there is no rollout left to judge.
        MetricSpec(
            "rollout_mean_score",
            "down",
            ("betting",),
            judge_keyed=True,
            compares_versions=True,
            retired_note="rollout over: not the newest version any more, or no earlier one left in the window",
        ),
        # Canaries: per run figures of the judge against fixed labels. No significance test: the pairs are the same
        # in every run, so what varies is the judge alone, and the size of the change (against the same judge's
        # runs, or a floor) decides; min_events keeps a run that mostly failed from deciding on agreement.
        _canary("canary_spearman", "down"),
        _canary("canary_kappa", "down"),
        _canary("canary_mean_shift", "down"),
        _canary(
            "canary_error_rate",
            "up",
            _SHARE_TESTS,
            examples_filter="status = 'error'",
            examples_order="run_at DESC, pair_id",
            unit="canary pairs",
        ),
        # Shadow agreement: the shadow judge against the primary on the events both scored ok, keyed by the shadow's
        # judge_id and the primary's (a new primary or shadow judge is a new pair with its own history). No
        # significance test: min_events shared events keep a small sample from deciding, and the thresholds are far
        # beyond the sampling noise of a few hundred pairs.
        _shadow("shadow_spearman", "down"),
        _shadow("shadow_mean_difference", "up"),
        # A judge against the reviewers: quadratic-weighted κ between the labels of the queue's uniform random control
        # slice (route 'control', so the sample is unbiased) and the judge's rubric level of the same items, per judge
        # that scored them. Windows go by the time of labelling. No significance test: min_events labels keep a
        # handful from deciding, and the floor is far below a working judge's κ (docs/alerting.md).
        MetricSpec(
            "control_kappa",
            "down",
            time_column="labelled_at",
            judge_keyed=True,
            examples_filter=None,
            examples_order="gap DESC, labelled_at DESC",  # the largest disagreements first
            retired_note="no control label of an item this judge scored in the window any more",
            table="labels",
            unit="labels on the control slice",
        ),
        # Users' feedback (`monitor.feedback`): the share of negative feedback (thumbs down, low ratings) per segment,
        # from the per-minute rollup by the feedback's minute; every event weighs 1 (feedback is not sampled).
        # Unresolved feedback (app '': its answer's segment was found nowhere) is never a segment. Poolable: a new
        # prompt version or model borrows its app's earlier feedback, as the score detectors do.
        MetricSpec(
            "feedback_negative_share",
            "up",
            _SHARE_TESTS,
            time_column="minute",
            poolable=True,
            examples_filter="negative",
            examples_order="feedback_time DESC",
            retired_note="segment retired: no feedback in the window or the baseline",
            table="feedback",
            unit="feedback events",
        ),
        # Feedback per consumed answer (the rollup over `traffic_counts.consumed`): a collapse is a broken feedback
        # widget or pipeline, which would otherwise read as silence (no complaints). Exact Poisson rate test with the
        # consumed answers as exposure.
        MetricSpec(
            "feedback_rate",
            "down",
            ("poisson_exact",),
            time_column="minute",
            needs_traffic=True,
            examples_filter=None,
            examples_order="feedback_time DESC",
            retired_note="segment retired: no feedback or traffic in the window or the baseline",
            table="feedback",
            unit="consumed answers",
        ),
        # The judge against users: per judge, the AUC of its score for predicting a thumbs-down (negative feedback)
        # over the feedback of the window joined to its primary live ok rows (never the feedback-triggered ones, which
        # are picked for being disliked). No test, like control_kappa: min_events pairs (and `MIN_PER_CLASS` of each
        # class) keep a handful from deciding.
        MetricSpec(
            "feedback_auc",
            "down",
            time_column="feedback_time",
            judge_keyed=True,
            examples_filter="negative",
            examples_order="score DESC, feedback_time DESC",  # the disliked answers the judge liked most first
            retired_note="no feedback on an answer this judge scored in the window any more",
            table="feedback_scores",
            unit="feedback events on judged answers",
        ),
    )
}
