"""Pure: a rule's metric value, baseline value, sample sizes and test p-values for one segment.

One `read_*` function per metric does the maths (its `MetricSpec` names it); `observe` adds what is the same
for every metric: whether the data suffices to decide, and which test ran."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
from numpy.typing import NDArray

from monitor.alerts import stats
from monitor.alerts.betting import p_below
from monitor.alerts.metric_specs import MetricName
from monitor.alerts.outcomes import Gap, Shortfall, describe_shortfalls
from monitor.alerts.sequential import BIN_VALUES
from monitor.alerts.windows import BaselineSource, SegmentData, SegmentKey, TailCounts, WeightedSums, WindowStats

if TYPE_CHECKING:
    from monitor.alerts.rules import Bound, Rule


MAX_SCORE_VARIANCE = 0.25  # the largest variance a score in [0, 1] can have


@dataclass(frozen=True, slots=True)
class Observation:
    """What one evaluation saw for one segment of one rule."""

    rule: str
    segment: SegmentKey
    value: float | None
    baseline: float | None
    n_current: int
    n_baseline: int
    sufficient: bool
    p_change: float | None = None  # one-sided p that the change vs the baseline is chance
    p_threshold: float | None = None  # one-sided p that the value is really on the good side of the fire threshold
    test: str = ""  # "" when the metric has no test or the rule disabled it
    note: str = ""  # why the data is insufficient, or other context
    judge: str = ""
    baseline_from: BaselineSource | None = None  # None: the segment's own history
    shortfalls: tuple[Shortfall, ...] = ()  # why it is insufficient, as data (the note says it in words)

    @property
    def p_value(self) -> float | None:
        """The most relevant p-value for people: the change test if there is one, else the threshold test."""
        return self.p_change if self.p_change is not None else self.p_threshold


@dataclass(frozen=True, slots=True)
class Reading:
    """One metric's value and baseline in one segment, the sample sizes behind them, and the test p-values."""

    value: float | None
    baseline: float | None
    n_current: int
    n_baseline: int
    p_change: float | None = None
    p_threshold: float | None = None
    gaps: tuple[Shortfall, ...] = ()  # what the metric found missing beyond the sample sizes


def observe(rule: Rule, segment: SegmentKey, data: SegmentData | None, tail: TailCounts | None = None) -> Observation:
    """The observation of `rule` for `segment`; `data` None means the segment had no rows in any window."""
    if data is None:
        gone = (Shortfall(Gap.NO_ROWS),)
        return Observation(
            rule.name,
            segment,
            None,
            None,
            0,
            0,
            sufficient=False,
            note=describe_shortfalls(gone, rule),
            shortfalls=gone,
        )
    spec = rule.spec
    testing = rule.test == "auto" and bool(spec.tests)
    r = READERS[spec.name](rule, data, tail, testing)
    shortfalls = _silence_shortfalls(rule, r) if spec.silence else _shortfalls(rule, r)
    return Observation(
        rule=rule.name,
        segment=segment,
        value=r.value,
        baseline=r.baseline,
        n_current=r.n_current,
        n_baseline=r.n_baseline,
        sufficient=not shortfalls,
        p_change=r.p_change,
        p_threshold=r.p_threshold,
        test=spec.test_label if testing else "",
        note=describe_shortfalls(shortfalls, rule),
        judge=data.judge,
        baseline_from=data.baseline_from,
        shortfalls=shortfalls,
    )


def _shortfalls(rule: Rule, r: Reading) -> tuple[Shortfall, ...]:
    """Why `r` does not rest on enough events to decide on; () when it does."""
    out = list(r.gaps)
    if rule.spec.min_events_apply and r.n_current < rule.min_events:
        out.append(Shortfall(Gap.FEW_EVENTS, r.n_current, rule.min_events))
    if r.value is None and not out:
        out.append(Shortfall(Gap.NO_VALUE))
    if (rule.condition.uses_baseline or rule.detector is not None) and (
        r.n_baseline < rule.min_baseline_events or r.baseline is None
    ):
        out.append(Shortfall(Gap.FEW_BASELINE_EVENTS, r.n_baseline, rule.min_baseline_events))
    return tuple(out)


def _silence_shortfalls(rule: Rule, r: Reading) -> tuple[Shortfall, ...]:
    """Silence is only evidence where the baseline had enough events to expect some now."""
    if r.n_current == 0 and r.n_baseline < rule.min_baseline_events:
        return (*r.gaps, Shortfall(Gap.SILENT_FEW_BASELINE, r.n_baseline, rule.min_baseline_events))
    return ()


# ---- one reading per metric (named by its MetricSpec) -----------------------------------------------------


def read_mean_score(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Traffic-weighted mean ok score (weights 1/sample_rate); Welch's t against the baseline, one-sample t
    against the threshold, both on the weighted variance and the effective sample size."""
    cur, base = data.current, data.baseline
    now, before = weighted_moments(cur.weighted), weighted_moments(base.weighted)
    thr, alt = rule.condition.threshold, _alt(rule)
    p_change = p_thr = None
    if testing and now is not None:
        if before is not None:
            p_change = stats.welch_t_test(
                now.mean, now.variance, now.n_eff, before.mean, before.variance, before.n_eff, alt
            )
        if thr is not None:
            p_thr = stats.one_sample_t_test(now.mean, now.variance, now.n_eff, thr.fire, alt)
    value = now.mean if now is not None else None
    baseline = before.mean if before is not None else None
    return Reading(value, baseline, cur.ok, base.ok, p_change, p_thr)


def read_rollout_mean_score(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """The newest version's traffic-weighted mean against the previous version's in the same window (the pair is
    chosen by `rollouts.pair_newest`), with an always-valid p-value (`betting.p_below`): a bet against the new
    version's scores at a lower confidence bound of the old version's mean, valid for any scores in [0, 1] without a
    variance and however often the rollout is looked at, so the new version is judged from its first events."""
    cur, base = data.current, data.baseline
    now, before = weighted_moments(cur.weighted), weighted_moments(base.weighted)
    if now is None or before is None:
        return read_mean_score(rule, data, tail, testing)
    p_change = None
    if testing:
        (values, counts), (old_values, old_counts) = score_histogram(cur.weighted), score_histogram(base.weighted)
        if rule.bad_direction == "up":  # worse is higher: the same test on the scores mirrored
            values, old_values = 1.0 - values, 1.0 - old_values
        p_change = p_below(values, counts, old_values, old_counts)
    return Reading(now.mean, before.mean, cur.ok, base.ok, p_change)


def score_histogram(w: WeightedSums) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The window's scores as values and effective counts: the weighted bins (`sequential.BIN_VALUES`) scaled to
    the effective sample size, so that equal weights give the event counts. Without bins (sums written before they
    were kept), the mean as a share of 0s and 1s: of all scores with that mean, the ones that give the least evidence
    either way (a bet's log-factor is concave in the score), so the test stays valid on them."""
    n_eff = effective_n(w)
    total = sum(w.bins)
    if total > 0:
        return BIN_VALUES, np.asarray(w.bins, dtype=np.float64) * (n_eff / total)
    mean = min(max(w.score / w.weight, 0.0), 1.0) if w.weight > 0 else 0.0
    return np.array([0.0, 1.0]), np.array([n_eff * (1.0 - mean), n_eff * mean])


def read_low_score_share(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Traffic-weighted share of ok scores below the rule's `low_score_below`; the share tests run on the
    effective sample sizes."""
    cur, base = data.current, data.baseline
    value, baseline = _low_share(cur.weighted), _low_share(base.weighted)
    n_cur, n_base = effective_n(cur.weighted), effective_n(base.weighted)
    thr, alt = rule.condition.threshold, _alt(rule)
    p_change = p_thr = None
    if testing and value is not None:
        if baseline is not None:
            p_change = stats.two_proportion_z_test(value * n_cur, n_cur, baseline * n_base, n_base, alt)
        if thr is not None:
            p_thr = stats.one_proportion_score_test(value * n_cur, n_cur, thr.fire, alt)
    return Reading(value, baseline, cur.ok, base.ok, p_change, p_thr)


def read_p10(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """10th percentile of ok scores; tested on the tail counts once they are read."""
    cur, base = data.current, data.baseline
    value, baseline = cur.p10, base.p10
    p_change = p_thr = None
    if testing and tail is not None and value is not None:
        # A lower p10 means more than the baseline's share of scores now sit below the baseline's p10.
        if baseline is not None:
            p_change = stats.two_proportion_z_test(tail.current_below, cur.ok, tail.baseline_below, base.ok, "greater")
        if rule.condition.threshold is not None:
            p_thr = stats.one_proportion_score_test(tail.current_below_threshold, cur.ok, 0.1, "greater")
    return Reading(value, baseline, cur.ok, base.ok, p_change, p_thr)


def read_error_rate(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Share of rows that are judge errors."""
    cur, base = data.current, data.baseline
    return _share(rule, testing, cur.errors, cur.rows, base.errors, base.rows)


def read_invalid_reply_rate(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Share of rows that are invalid judge replies (the server did not enforce the structured output)."""
    cur, base = data.current, data.baseline
    return _share(rule, testing, cur.invalid, cur.rows, base.invalid, base.rows)


def read_scoring_lag_p90(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """90th percentile of seconds from event time to scoring (no test: min_events guards it)."""
    cur, base = data.current, data.baseline
    return Reading(cur.lag_p90, base.lag_p90, cur.rows, base.rows)


def read_coverage(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Share of sampled events (traffic table) that got a row."""
    cur, base = data.current, data.baseline
    n_cur, n_base = cur.sampled or 0, base.sampled or 0
    r = _share(rule, testing, min(cur.events, n_cur), n_cur, min(base.events, n_base), n_base)
    return r if cur.sampled is not None else dataclasses.replace(r, gaps=(*r.gaps, Shortfall(Gap.NO_TRAFFIC_COUNTS)))


def read_judged_volume(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Rows judged in the window; the baseline scaled to the window's length. Poisson tests."""
    cur, base = data.current, data.baseline
    thr, alt = rule.condition.threshold, _alt(rule)
    baseline = _scaled(base.rows, base, cur.seconds) if rule.uses_baseline else None
    p_change = p_thr = None
    if testing:
        if rule.uses_baseline:
            p_change = stats.poisson_rate_test(cur.rows, cur.seconds, base.rows, base.seconds, alt)
        if thr is not None:
            p_thr = stats.poisson_test(cur.rows, thr.fire, alt)
    return Reading(float(cur.rows), baseline, cur.rows, base.rows, p_change, p_thr)


def read_cost_per_window(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Judge cost in the window; the baseline scaled to the window's length (no test)."""
    cur, base = data.current, data.baseline
    baseline = _scaled(base.cost, base, cur.seconds) if rule.uses_baseline else None
    return Reading(cur.cost, baseline, cur.rows, base.rows)


def read_cache_read_share(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Share of the prompt tokens of the window's judge calls that the API read from the prompt cache (no test);
    n counts the calls."""
    cur, base = data.current, data.baseline
    return Reading(
        _ratio(cur.cache_read, cur.prompt_tokens), _ratio(base.cache_read, base.prompt_tokens), cur.calls, base.calls
    )


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def read_no_data(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Rows (or consumed traffic) in the window against the rate of the baseline; a Poisson rate test."""
    cur, base = data.current, data.baseline
    current_count = (cur.consumed or 0) if rule.source == "traffic" else cur.rows
    base_count = (base.consumed or 0) if rule.source == "traffic" else base.rows
    p_change = (
        stats.poisson_rate_test(current_count, cur.seconds, base_count, base.seconds, "less") if testing else None
    )
    return Reading(float(current_count), _scaled(base_count, base, cur.seconds), current_count, base_count, p_change)


def read_canary_spearman(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Mean Spearman ρ of the canary runs in the window (against the labels) and in the baseline: the same judge's
    earlier runs on the same labelled set. n counts judged pairs."""
    cur, base = data.current, data.baseline
    return Reading(
        _per_run(cur.canary.rho, cur.canary.rho_runs), _per_run(base.canary.rho, base.canary.rho_runs), cur.ok, base.ok
    )


def read_canary_kappa(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Mean quadratic-weighted κ of the canary runs (the labels and the scores in the rubric's five buckets)."""
    cur, base = data.current, data.baseline
    return Reading(
        _per_run(cur.canary.kappa, cur.canary.kappa_runs),
        _per_run(base.canary.kappa, base.canary.kappa_runs),
        cur.ok,
        base.ok,
    )


def read_canary_mean_shift(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Mean of score − label/4 over the canary's judged pairs: below 0 the judge scores the set lower than the
    labels."""
    cur, base = data.current, data.baseline
    return Reading(_per_run(cur.canary.shift, cur.ok), _per_run(base.canary.shift, base.ok), cur.ok, base.ok)


def read_canary_error_rate(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Share of the canary's pairs the judge could not score (deadline, provider errors, invalid replies)."""
    cur, base = data.current, data.baseline
    return _share(rule, testing, cur.errors, cur.rows, base.errors, base.rows)


def read_shadow_spearman(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Spearman ρ between a shadow judge's scores and its primary's on the events both scored ok in the window (and
    in the baseline); n counts those shared events."""
    cur, base = data.current, data.baseline
    return Reading(cur.shadow.rho, base.shadow.rho, cur.ok, base.ok)


def read_shadow_mean_difference(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Mean of shadow − primary over the shared events: above 0 the shadow scores the same answers higher."""
    cur, base = data.current, data.baseline
    return Reading(_per_run(cur.shadow.difference, cur.ok), _per_run(base.shadow.difference, base.ok), cur.ok, base.ok)


def read_control_kappa(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Quadratic-weighted κ of the window's control labels against the judge's rubric levels of the same items; n
    counts the labels (no baseline: the rule compares with a floor)."""
    cur = data.current
    return Reading(cur.control_kappa, None, cur.ok, 0)


def read_feedback_negative_share(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Share of the segment's feedback that is negative (thumbs down, low ratings), from the rollup's counts (each
    feedback event weighs 1); the share tests as for the low-score share."""
    return read_low_score_share(rule, data, tail, testing)


def read_feedback_rate(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """Feedback events per consumed answer (`traffic_counts.consumed`) in the window and the baseline; the exact
    Poisson rate test with the consumed answers as exposure (conditional on the feedback of both: a binomial). n counts
    consumed answers."""
    cur, base = data.current, data.baseline
    c_answers, b_answers = cur.consumed or 0, base.consumed or 0
    value = cur.rows / c_answers if c_answers else None
    baseline = base.rows / b_answers if b_answers else None
    p_change = None
    if testing and value is not None and baseline is not None:
        p_change = stats.poisson_rate_test(cur.rows, c_answers, base.rows, b_answers, _alt(rule))
    gaps = (Shortfall(Gap.NO_TRAFFIC_COUNTS),) if cur.consumed is None else ()
    return Reading(value, baseline, c_answers, b_answers, p_change, gaps=gaps)


MIN_PER_CLASS = 10  # feedback_auc: disliked and liked answers each needed, beside min_events pairs in all


def read_feedback_auc(rule: Rule, data: SegmentData, tail: TailCounts | None, testing: bool) -> Reading:
    """The judge's AUC for predicting a thumbs-down over the window's feedback on answers it scored (no baseline: the
    rule compares with a floor); n counts the feedback events, and each class needs `MIN_PER_CLASS`."""
    cur = data.current
    fewer = min(cur.disliked, cur.liked)
    gaps = (Shortfall(Gap.FEW_OF_A_CLASS, fewer, MIN_PER_CLASS),) if fewer < MIN_PER_CLASS else ()
    return Reading(cur.feedback_auc, None, cur.ok, 0, gaps=gaps)


# ---- shared maths ----------------------------------------------------------------------------------------


def _per_run(total: float, n: int) -> float | None:
    return total / n if n > 0 else None


@dataclass(frozen=True, slots=True)
class WeightedMoments:
    """The traffic-weighted mean and variance of a window's scores, and the effective sample size behind them."""

    mean: float
    variance: float  # unbiased for reliability weights; 0.0 for a single effective row
    n_eff: float  # (sum w)^2 / sum w^2: equals the row count when every weight is the same


def effective_n(w: WeightedSums) -> float:
    """Kish's effective sample size (sum w)^2 / sum w^2 (0.0 for no rows)."""
    return w.weight * w.weight / w.weight_sq if w.weight_sq > 0 else 0.0


def weighted_moments(w: WeightedSums) -> WeightedMoments | None:
    """Weighted mean, variance and effective n of the scores summed in `w`; None when it holds no rows.

    The variance is sum w (x - mean)^2 / sum w, corrected by n_eff / (n_eff - 1): with equal weights that is the
    ordinary sample variance, and the standard error of the weighted mean is sqrt(variance / n_eff)."""
    if w.weight <= 0:
        return None
    mean = w.score / w.weight
    n_eff = effective_n(w)
    spread = max(w.score_sq / w.weight - mean * mean, 0.0)  # rounding can take an exact 0 below it
    variance = spread * n_eff / (n_eff - 1) if n_eff > 1 else 0.0
    return WeightedMoments(mean, variance, n_eff)


def _low_share(w: WeightedSums) -> float | None:
    return min(max(w.low / w.weight, 0.0), 1.0) if w.weight > 0 else None


def _alt(rule: Rule) -> stats.Alternative:
    return "less" if rule.bad_direction == "down" else "greater"


def _scaled(count: float, base: WindowStats | None, cur_seconds: float) -> float | None:
    if base is None or base.seconds <= 0:
        return None
    return count * cur_seconds / base.seconds


def _share(rule: Rule, testing: bool, k_cur: int, n_cur: int, k_base: int, n_base: int) -> Reading:
    """A share metric (k of n): two-proportion z against the baseline, a score test against the threshold."""
    value = k_cur / n_cur if n_cur else None
    baseline = k_base / n_base if n_base else None
    thr: Bound | None = rule.condition.threshold
    alt = _alt(rule)
    p_change = p_thr = None
    if testing and value is not None:
        if baseline is not None:
            p_change = stats.two_proportion_z_test(k_cur, n_cur, k_base, n_base, alt)
        if thr is not None:
            p_thr = stats.one_proportion_score_test(k_cur, n_cur, thr.fire, alt)
    return Reading(value, baseline, n_cur, n_base, p_change, p_thr)


# (rule, segment data, tail counts once read, whether to run the tests) -> the metric's reading. Kept here rather
# than in `MetricSpec`, so that the specs (which rules validate against) depend on no reading code.
ReadFunction: TypeAlias = Callable[["Rule", SegmentData, TailCounts | None, bool], Reading]
READERS: dict[MetricName, ReadFunction] = {
    "mean_score": read_mean_score,
    "low_score_share": read_low_score_share,
    "p10": read_p10,
    "error_rate": read_error_rate,
    "invalid_reply_rate": read_invalid_reply_rate,
    "judged_volume": read_judged_volume,
    "coverage": read_coverage,
    "scoring_lag_p90": read_scoring_lag_p90,
    "cost_per_window": read_cost_per_window,
    "cache_read_share": read_cache_read_share,
    "no_data": read_no_data,
    "rollout_mean_score": read_rollout_mean_score,
    "canary_spearman": read_canary_spearman,
    "canary_kappa": read_canary_kappa,
    "canary_mean_shift": read_canary_mean_shift,
    "canary_error_rate": read_canary_error_rate,
    "shadow_spearman": read_shadow_spearman,
    "shadow_mean_difference": read_shadow_mean_difference,
    "control_kappa": read_control_kappa,
    "feedback_negative_share": read_feedback_negative_share,
    "feedback_rate": read_feedback_rate,
    "feedback_auc": read_feedback_auc,
}
