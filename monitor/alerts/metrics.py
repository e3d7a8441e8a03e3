"""Pure: a rule's metric value, baseline value, sample sizes and test p-values for one segment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monitor.alerts import stats
from monitor.alerts.queries import SegmentData, SegmentKey, TailCounts, WindowStats
from monitor.alerts.rules import Rule

# The test each metric uses when the rule says `test: auto` (change vs baseline / vs the absolute threshold).
TEST_NAMES: dict[str, str] = {
    "mean_score": "welch_t / one_sample_t",
    "low_score_share": "two_proportion_z / wilson_score",
    "error_rate": "two_proportion_z / wilson_score",
    "coverage": "two_proportion_z / wilson_score",
    "p10": "tail_share_z / wilson_score",
    "judged_volume": "poisson_exact",
    "no_data": "poisson_exact",
    "scoring_lag_p90": "",
    "cost_per_window": "",
}


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

    @property
    def p_value(self) -> float | None:
        """The most relevant p-value for people: the change test if there is one, else the threshold test."""
        return self.p_change if self.p_change is not None else self.p_threshold


def _alt(rule: Rule) -> stats.Alternative:
    return "less" if rule.bad_direction == "down" else "greater"


def _scaled(count: float, base: WindowStats | None, cur_seconds: float) -> float | None:
    if base is None or base.seconds <= 0:
        return None
    return count * cur_seconds / base.seconds


def _share(k_cur: int, n_cur: int, k_base: int, n_base: int, thr: Any, alt: stats.Alternative, testing: bool
           ) -> tuple[float | None, float | None, float | None, float | None]:
    """A share metric: (value, baseline, p of the change, p against the fire threshold)."""
    value = k_cur / n_cur if n_cur else None
    baseline = k_base / n_base if n_base else None
    p_change = p_thr = None
    if testing and value is not None:
        if baseline is not None:
            p_change = stats.two_proportion_z_test(k_cur, n_cur, k_base, n_base, alt)
        if thr is not None:
            p_thr = stats.one_proportion_score_test(k_cur, n_cur, thr.fire, alt)
    return value, baseline, p_change, p_thr


def observe(rule: Rule, segment: SegmentKey, data: SegmentData | None, tail: TailCounts | None = None) -> Observation:
    """The observation of `rule` for `segment`; `data` None means the segment had no rows in any window."""
    if data is None:
        return Observation(rule.name, segment, None, None, 0, 0, sufficient=False, note="no rows in the window or the baseline")
    cur, base, m = data.current, data.baseline, rule.metric
    testing = rule.test == "auto" and bool(TEST_NAMES.get(m))
    thr = rule.condition.threshold
    alt = _alt(rule)
    value: float | None
    baseline: float | None
    p_change = p_thr = None
    notes: list[str] = []

    if m in ("mean_score", "low_score_share", "p10"):
        n_cur, n_base = cur.ok, base.ok
        if m == "mean_score":
            value, baseline = cur.score_mean, base.score_mean
            if testing and value is not None:
                if baseline is not None:
                    p_change = stats.welch_t_test(value, cur.score_var or 0.0, cur.ok, baseline, base.score_var or 0.0, base.ok, alt)
                if thr is not None:
                    p_thr = stats.one_sample_t_test(value, cur.score_var or 0.0, cur.ok, thr.fire, alt)
        elif m == "low_score_share":
            value, baseline, p_change, p_thr = _share(cur.low, cur.ok, base.low, base.ok, thr, alt, testing)
        else:
            value, baseline = cur.p10, base.p10
            if testing and tail is not None and value is not None:
                # A lower p10 means more than the baseline's share of scores now sit below the baseline's p10.
                if baseline is not None:
                    p_change = stats.two_proportion_z_test(tail.current_below, cur.ok, tail.baseline_below, base.ok, "greater")
                if thr is not None:
                    p_thr = stats.one_proportion_score_test(tail.current_below_threshold, cur.ok, 0.1, "greater")
    elif m == "error_rate":
        n_cur, n_base = cur.rows, base.rows
        value, baseline, p_change, p_thr = _share(cur.errors, cur.rows, base.errors, base.rows, thr, alt, testing)
    elif m == "scoring_lag_p90":
        n_cur, n_base = cur.rows, base.rows
        value, baseline = cur.lag_p90, base.lag_p90
    elif m == "coverage":
        n_cur, n_base = cur.sampled or 0, base.sampled or 0
        judged_c, judged_b = min(cur.events, n_cur), min(base.events, n_base)
        value, baseline, p_change, p_thr = _share(judged_c, n_cur, judged_b, n_base, thr, alt, testing)
        if cur.sampled is None:
            notes.append("no traffic counts for this segment")
    elif m in ("judged_volume", "cost_per_window"):
        n_cur, n_base = cur.rows, base.rows
        if m == "judged_volume":
            value = float(cur.rows)
            baseline = _scaled(base.rows, base, cur.seconds) if rule.uses_baseline else None
            if testing:
                if rule.uses_baseline:
                    p_change = stats.poisson_rate_test(cur.rows, cur.seconds, base.rows, base.seconds, alt)
                if thr is not None:
                    p_thr = stats.poisson_test(cur.rows, thr.fire, alt)
        else:
            value = cur.cost
            baseline = _scaled(base.cost, base, cur.seconds) if rule.uses_baseline else None
    else:  # no_data
        current_count = (cur.consumed or 0) if rule.source == "traffic" else cur.rows
        base_count = (base.consumed or 0) if rule.source == "traffic" else base.rows
        n_cur, n_base = current_count, base_count
        value = float(current_count)
        baseline = _scaled(base_count, base, cur.seconds)
        if testing:
            p_change = stats.poisson_rate_test(current_count, cur.seconds, base_count, base.seconds, "less")

    sufficient = True
    if m == "no_data":
        if n_cur == 0 and n_base < rule.min_baseline_events:
            sufficient = False
            notes.append(f"silent, and the baseline has {n_base} < {rule.min_baseline_events} events")
    else:
        if m not in ("judged_volume",) and n_cur < rule.min_events:
            sufficient = False
            notes.append(f"{n_cur} < min_events {rule.min_events} in the window")
        if value is None:
            sufficient = False
            if not notes:
                notes.append("no value in the window")
        if rule.condition.uses_baseline and (n_base < rule.min_baseline_events or baseline is None):
            sufficient = False
            notes.append(f"{n_base} < min_baseline_events {rule.min_baseline_events} in the baseline")
    return Observation(
        rule=rule.name, segment=segment, value=value, baseline=baseline, n_current=n_cur, n_baseline=n_base,
        sufficient=sufficient, p_change=p_change, p_threshold=p_thr, test=TEST_NAMES[m] if testing else "",
        note="; ".join(notes), judge=data.judge,
    )
