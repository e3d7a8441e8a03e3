"""The shipped detector and rollout rules on scored rows in chDB, and the detector's decisions on one segment: a
release pages within the hour and stays firing, a rollback and a fix resolve, stable apps never page, a frozen
reference outlives a baseline that took the regression in, a stalled judge resolves nothing, and `accept`."""

from __future__ import annotations

import dataclasses
import math
import random
from datetime import datetime, timedelta

import numpy as np
import pytest

from monitor.alerts.accept import accept, parse_segment
from monitor.alerts.backtest import run_backtest
from monitor.alerts.detectability import detectability, expected_by_rule, expected_per_week
from monitor.alerts.detection import Beside, Budget, Detection, detect, rollout_recovered
from monitor.alerts.engine import Evaluation, SegmentResult, evaluate_rules
from monitor.alerts.evaluator import AlertState, Frozen, step
from monitor.alerts.rules import Rule, RuleSet, load_rules
from monitor.alerts.sequential import BIN_VALUES, LOW_SHARE_VALUES, Buckets, Reference, calibrate, cusum, dropped
from monitor.alerts.sources import StoreData
from monitor.alerts.state import StateStore, frozen_from_json, frozen_to_json
from monitor.alerts.windows import SegmentData, WeightedSums, WindowStats
from monitor.store.connection import ClickHouseStore
from schemas.errors import UsageError
from tests.monitor.alerts.conftest import T0, default_rules, insert, make_row

LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)
GOOD = (0.03, 0.05, 0.10, 0.27, 0.55)  # mean 0.815
BAD = (0.28, 0.05, 0.10, 0.27, 0.30)  # 0.25 lower: probability moved from the top level to the bottom
CHANGE = T0 + timedelta(hours=26)
ROLLBACK = CHANGE + timedelta(hours=3)
FIX = CHANGE + timedelta(hours=4)
END = T0 + timedelta(hours=36)


def _version_and_mix(app: str, t: datetime) -> tuple[str, tuple[float, ...]]:
    after = t >= CHANGE
    if app == "release":  # a bad v2 for everyone, for good
        return ("v2", BAD) if after else ("v1", GOOD)
    if app == "rollback":  # a bad v2, rolled back after 3 h
        return ("v2", BAD) if CHANGE <= t < ROLLBACK else ("v1", GOOD)
    if app == "fixed":  # a regression in place, fixed after 4 h
        return "v1", BAD if CHANGE <= t < FIX else GOOD
    return ("v2" if after else "v1"), GOOD  # stable: an equally good v2


def _rows(seed: int = 11) -> list:
    rng = random.Random(seed)
    rows = []
    for minute in range(int((END - T0) / timedelta(minutes=1))):
        for app in ("stable", "release", "rollback", "fixed"):
            for _ in range(2):  # 2 judged events a minute each
                t = T0 + timedelta(minutes=minute, seconds=rng.uniform(0, 60))
                version, mix = _version_and_mix(app, t)
                rows.append(make_row(t, app=app, prompt_version=version, score=rng.choices(LEVELS, weights=mix)[0]))
    return rows


def test_release_pages_rollback_and_fix_resolve_and_stable_apps_never_page(store: ClickHouseStore) -> None:
    """Shipped rules, 2 judged/min: the bad release pages within the hour and is still firing at the end, the rollback
    resolves within 15 min as "no more traffic", the fix resolves once the scores are back, a stable app never pages."""
    insert(store, _rows())
    rules = default_rules("relevancy_drop", "prompt_rollout_regression")
    report = run_backtest(store, rules, T0 + timedelta(hours=25), END, timedelta(minutes=5))
    assert not report.errors
    pages = {(e.rule, dict(e.segment)["app"], dict(e.segment).get("prompt_version")): e for e in report.fired()}
    assert not [k for k in pages if k[1] == "stable"], pages

    release = pages[("relevancy_drop", "release", "v2")]
    assert release.fired_at is not None and release.fired_at - CHANGE <= timedelta(minutes=60), release
    assert release.resolved_at is None  # 10 h on, never absorbed

    rolled = pages[("relevancy_drop", "rollback", "v2")]
    assert rolled.resolved_at is not None and rolled.resolved_at - ROLLBACK <= timedelta(minutes=15), rolled
    rollout = pages[("prompt_rollout_regression", "rollback", "v2")]
    assert rollout.resolved_at is not None and rollout.resolved_at - ROLLBACK <= timedelta(minutes=15), rollout

    fixed = pages[("relevancy_drop", "fixed", "v1")]
    assert fixed.fired_at is not None and fixed.fired_at - CHANGE <= timedelta(minutes=60), fixed
    assert fixed.resolved_at is not None and FIX < fixed.resolved_at <= FIX + timedelta(hours=2), fixed
    assert len([k for k in pages if k[1] == "fixed"]) == 1  # one episode, not a flapping series

    assert report.last is not None
    expected = expected_per_week(report.last, rules)
    # Every relevancy_drop segment can page, so the detector spends its whole share (6 of the page budget's 12); the
    # rollout rule spends its level per rollout, derived from its share (1 of 12) over the rollouts of the week.
    drops = [r for r in report.last.results if r.rule.name == "relevancy_drop"]
    rollouts = [r for r in report.last.results if r.rule.name == "prompt_rollout_regression"]
    refs = [r.detection.reference for r in drops if r.detection is not None]
    assert drops and len(refs) == len(drops) and all(ref is not None and ref.watchable for ref in refs)
    level = rollouts[0].level
    assert level is not None and level.looks_per_week == len(rollouts) >= 3 and level.alpha == pytest.approx(1 / 12 / 3)
    assert expected["page"] == pytest.approx(6 / 12 + 1 / 12)
    shown = [d for r in report.last.results if (d := detectability(r)) is not None]
    assert shown and all(1.5 <= d.events_per_min <= 2.5 for d in shown), shown


def test_accept_makes_the_new_level_the_reference_and_records_who(store: ClickHouseStore) -> None:
    """`accept` resolves a firing detector segment with the level since its episode began; the next rounds, 105 min
    of that level, do not page again on it, and the state says who accepted it and when."""
    insert(store, [r for r in _rows() if r.app == "fixed" and r.event_time < FIX])
    rules = default_rules("relevancy_drop")
    data = StoreData(store)
    states: dict[tuple[str, str], AlertState] = {}
    now = CHANGE + timedelta(hours=2)
    for k in range(24, -1, -1):
        states.update(evaluate_rules(store, rules, now - timedelta(minutes=5 * k), states, data=data).states())
    firing = [s for s in states.values() if s.state == "firing"]
    assert len(firing) == 1 and firing[0].frozen is not None
    done = accept(data, rules.rules[0], states, parse_segment("app=fixed"), "oncall@example.com", now)
    assert done.state == "resolved" and done.frozen is not None and done.frozen.accepted_by == "oncall@example.com"
    assert done.frozen.reference.mean < firing[0].frozen.reference.mean - 0.15  # the regressed level, not the old one
    StateStore(store).save([done], now)
    loaded = StateStore(store).load()
    assert loaded[done.key].frozen == done.frozen
    # The regression goes on until FIX: long enough that the old reference would page again (in ~15 min).
    states = dict(loaded)
    for k in range(1, 8):
        later = evaluate_rules(store, rules, now + timedelta(minutes=15 * k), states, data=data)
        assert [r.state.state for r in later.results] == ["resolved"], (k, [r.state.note for r in later.results])
        states.update(later.states())


def test_accept_refuses_what_it_cannot_accept(store: ClickHouseStore) -> None:
    """Accept names the problem in one line: no detector, no such segment, no open episode, a malformed segment."""
    rules = load_rules()
    by_name = {r.name: r for r in rules.rules}
    data = StoreData(store)
    for rule, segment, needle in (
        (by_name["relevancy_floor"], "app=a", "no detector"),
        (by_name["relevancy_drop"], "app=nobody", "no stored segment"),
    ):
        try:
            accept(data, rule, {}, parse_segment(segment), "me", T0)
        except UsageError as e:
            assert needle in str(e), e
        else:
            raise AssertionError(f"{segment} was accepted")
    for bad in ("app", "=x", ""):
        try:
            parse_segment(bad)
        except UsageError:
            continue
        raise AssertionError(f"{bad!r} parsed")


# ---- one segment's decision (pure) ----------------------------------------------------------------------------

RULE = next(r for r in load_rules().rules if r.name == "relevancy_drop")
SEGMENT = (("app", "a"), ("model", "m1"), ("prompt_version", "v1"), ("judge_id", "j1"))
START, END_W = T0, T0 + timedelta(hours=6)


def _baseline(mean_mix: tuple[float, ...], n: int) -> WindowStats:
    counts = [p * n for p in mean_mix]
    total = sum(c * v for c, v in zip(counts, LEVELS, strict=True))
    sq = sum(c * v * v for c, v in zip(counts, LEVELS, strict=True))
    bins = [0.0] * 21
    for c, v in zip(counts, LEVELS, strict=True):
        bins[round(v * 20)] = c
    return WindowStats(7 * 86400.0, rows=n, ok=n, weighted=WeightedSums(n, n, total, sq, 0.0, tuple(bins)))


def _histogram(mean: float) -> np.ndarray:
    """Scores of GOOD's levels with the mean `mean`: GOOD with mass moved from its top to its bottom (below GOOD's
    mean), or towards all perfect (above it)."""
    good = np.zeros(len(BIN_VALUES))
    for p, v in zip(GOOD, LEVELS, strict=True):
        good[round(v * 20)] = p
    top = float(good @ BIN_VALUES)
    if mean <= top:
        return dropped(good, BIN_VALUES, top - mean)
    share = (mean - top) / (1.0 - top)
    return (1 - share) * good + share * np.eye(len(BIN_VALUES))[-1]


def _buckets(starts: np.ndarray, per_bucket: np.ndarray, histograms: np.ndarray) -> Buckets:
    """Buckets of `per_bucket` events each, scored as the rows of `histograms` (shares of each score bin)."""
    bins = histograms * per_bucket[:, None]
    return Buckets(starts, per_bucket.astype(float), per_bucket.astype(float), bins @ BIN_VALUES, bins)


def _minutes(mean: float, minutes: int, per_minute: float = 2, *, start: datetime = START) -> Buckets:
    starts = np.array([(start + timedelta(minutes=m)).timestamp() * 1000 for m in range(minutes)], dtype=np.int64)
    n = np.full(minutes, float(per_minute))
    return _buckets(starts, n, np.tile(_histogram(mean), (minutes, 1)))


def _last_ms(b: Buckets) -> int:
    return int(b.start_ms[-1])


def test_a_frozen_reference_keeps_a_regression_firing_after_the_baseline_took_it_in() -> None:
    """The baseline has become the regressed level (0.56): without the frozen reference nothing fires; with the
    reference frozen when the episode began (0.81), the segment stays firing."""
    regressed = _minutes(0.56, 360)
    seg = SegmentData(WindowStats(21600.0), _baseline(BAD, 20_000))
    fresh = detect(RULE, SEGMENT, seg, regressed, None, (START, END_W), Budget(1.0, 10))
    assert not fresh.verdict.fire
    frozen = Frozen(Reference(0.81, 0.05, 8.0), END_W + timedelta(days=7))
    prev = AlertState(RULE.name, SEGMENT, "firing", since=START, fired_at=START, frozen=frozen)
    held = detect(RULE, SEGMENT, seg, regressed, prev, (START, END_W), Budget(1.0, 10), Beside((), _last_ms(regressed)))
    assert (
        held.verdict.bad and held.verdict.sufficient and held.frozen is not None and held.frozen.reference.mean == 0.81
    )


def test_silence_resolves_only_while_other_segments_are_still_judged() -> None:
    """A firing version silent for 20 min while the old version took its traffic resolves as "no more traffic"; the
    same silence with nothing judged anywhere since (a stalled judge) holds it."""
    quiet = _minutes(0.56, 340)
    seg = SegmentData(WindowStats(21600.0), _baseline(GOOD, 20_000))
    frozen = Frozen(Reference(0.81, 0.05, 8.0), END_W + timedelta(days=7))
    prev = AlertState(RULE.name, SEGMENT, "firing", since=START, fired_at=START, frozen=frozen)
    old = _minutes(0.81, 20, start=START + timedelta(minutes=340))
    gone = detect(RULE, SEGMENT, seg, quiet, prev, (START, END_W), Budget(1.0, 10), Beside((old,), _last_ms(old)))
    assert not gone.verdict.bad and "no more traffic on model m1, prompt_version v1" in gone.verdict.reason
    stalled = detect(RULE, SEGMENT, seg, quiet, prev, (START, END_W), Budget(1.0, 10), Beside((), _last_ms(quiet)))
    assert stalled.verdict.bad


def test_more_segments_sharing_the_budget_raise_each_threshold() -> None:
    """The deployment's budget is shared: 100 segments each get a higher threshold than 1 segment alone."""
    seg = SegmentData(WindowStats(21600.0), _baseline(GOOD, 20_000))
    b = _minutes(0.81, 360)
    alone = detect(RULE, SEGMENT, seg, b, None, (START, END_W), Budget(1.0, 1)).reference
    shared = detect(RULE, SEGMENT, seg, b, None, (START, END_W), Budget(1.0, 100)).reference
    assert alone is not None and shared is not None and shared.threshold > alone.threshold


def test_a_firing_rollout_resolves_once_the_new_version_scores_like_the_old_one_again() -> None:
    """A rollout page resolves on the new version's scores since the page: regressed ones keep it, recovered ones clear
    it."""
    rollout = next(r for r in load_rules().rules if r.name == "prompt_rollout_regression")
    old = SegmentData(WindowStats(86400.0), _baseline(GOOD, 2_000))
    prev = AlertState(rollout.name, SEGMENT, "firing", since=START, fired_at=START)
    assert rollout_recovered(rollout, old, _minutes(0.56, 240), prev) is None
    back = rollout_recovered(rollout, old, _minutes(0.82, 240), prev)  # 4 h at 2 a minute: ~3 h of it needed
    assert back is not None and not back.bad and "scores like the one before it again" in back.reason
    assert rollout_recovered(rollout, old, None, prev) is None


def test_a_frozen_reference_round_trips_through_its_column_and_a_bad_one_is_recalibrated() -> None:
    """The `detector` column keeps reference, threshold, until and who accepted; '' and unreadable text mean none."""
    frozen = Frozen(Reference(0.81, 0.05, 8.5), END_W, "oncall", START)
    assert frozen_from_json(frozen_to_json(frozen)) == frozen
    assert frozen_to_json(None) == "" and frozen_from_json("") is None
    assert frozen_from_json('{"mean": "x"}') is None and frozen_from_json("{not json") is None


def _rounds(rule: Rule, seg: SegmentData, mean: float, rounds: int, budget: Budget = Budget(1.0, 1)) -> list[Detection]:
    """`rounds` rounds 5 min apart over a 6 h window of 2 events a minute at `mean`, each state fed to the next."""
    prev: AlertState | None = None
    out = []
    for k in range(rounds):
        end = END_W + timedelta(minutes=5 * k)
        b = _minutes(mean, 360, start=end - timedelta(hours=6))
        d = detect(rule, SEGMENT, seg, b, prev, (end - timedelta(hours=6), end), budget, Beside((), _last_ms(b)))
        prev = dataclasses.replace(step(rule, prev, d.observation, d.verdict, end), frozen=d.frozen)
        out.append(d)
    return out


def test_a_segment_flat_at_the_bottom_of_the_scale_never_pages_and_says_it_cannot_be_watched() -> None:
    """All-zero scores (all-low for the low-score share) cannot drop by the shift: no round pages, and detectability
    says the segment cannot be watched instead of a detectable drop."""
    low_rule = next(r for r in load_rules().rules if r.name == "low_score_share_rise")
    zeros = _baseline((1.0, 0.0, 0.0, 0.0, 0.0), 20_000)
    all_low = dataclasses.replace(zeros, weighted=dataclasses.replace(zeros.weighted, low=20_000.0))
    for rule, base in ((RULE, zeros), (low_rule, all_low)):
        rounds = _rounds(rule, SegmentData(WindowStats(21600.0), base), 0.0, 6)
        assert not [d for d in rounds if d.verdict.fire], [d.verdict.reason for d in rounds]
        assert all(d.reference is not None and not d.reference.watchable for d in rounds)
        assert "cannot page" in rounds[-1].observation.note
        shown = detectability(_result(rule, rounds[-1]))
        assert shown is not None and not shown.protected and shown.describe().startswith("cannot be watched"), shown
        # It spends none of the budget: beside one segment that can page, the rule expects half its false alarms.
        good = SegmentData(WindowStats(21600.0), _baseline(GOOD, 20_000))
        fine = detect(rule, SEGMENT, good, _minutes(0.81, 360), None, (START, END_W), Budget(1.0, 2))
        evaluation = Evaluation(END_W, [_result(rule, rounds[-1]), _result(rule, fine)], [])
        alone = RuleSet(rules=[rule])
        assert expected_by_rule(evaluation, alone)[rule.name] == pytest.approx(alone.budget(rule) / 2)
    # 95 % low scores leave no room for 10 more points of them; 80 % does.
    assert not calibrate((950.0, 50.0), 0.05, 0.0475, 1000, 0.1, 1e5, LOW_SHARE_VALUES).watchable
    assert calibrate((800.0, 200.0), 0.2, 0.16, 1000, 0.1, 1e5, LOW_SHARE_VALUES).watchable


def _drawn(mix: tuple[float, ...], minutes: int, seed: int, per_minute: int = 2) -> Buckets:
    """`minutes` minute buckets from START of `per_minute` scores drawn from `mix`."""
    rng = np.random.default_rng(seed)
    xs = rng.choice(LEVELS, size=(minutes, per_minute), p=mix)
    starts = np.array([(START + timedelta(minutes=m)).timestamp() * 1000 for m in range(minutes)], dtype=np.int64)
    n = np.full(minutes, float(per_minute))
    counts = np.array([np.bincount(np.round(row * 20).astype(int), minlength=len(BIN_VALUES)) for row in xs])
    return _buckets(starts, n, counts / per_minute)


def test_a_fixed_regression_resolves_on_a_thin_baseline_and_one_that_stays_does_not() -> None:
    """Baselines of 60 to 140 events (margin above the slack): 6 h of the baseline's own mix since the page resolve
    it, 6 h of the regressed mix do not; the same for a rollout against an old version of 60 events."""
    for n in (60, 100, 140):
        seg = SegmentData(WindowStats(21600.0), _baseline(GOOD, n))
        ref = detect(RULE, SEGMENT, seg, _minutes(0.81, 360), None, (START, END_W), Budget(1.0, 1)).reference
        assert ref is not None and (ref.margin > ref.slack or n == 140), ref
        prev = AlertState(
            RULE.name, SEGMENT, "firing", since=START, fired_at=START, frozen=Frozen(ref, END_W + timedelta(days=8))
        )
        for mix, resolves in ((GOOD, True), (BAD, False)):
            b = _drawn(mix, 360, seed=n)
            d = detect(RULE, SEGMENT, seg, b, prev, (START, END_W), Budget(1.0, 1), Beside((), _last_ms(b)))
            assert d.verdict.bad is not resolves, (n, mix, d.verdict.reason)
    rollout = next(r for r in load_rules().rules if r.name == "prompt_rollout_regression")
    old = SegmentData(WindowStats(86400.0), _baseline(GOOD, 60))
    prev = AlertState(rollout.name, SEGMENT, "firing", since=START, fired_at=START)
    assert rollout_recovered(rollout, old, _drawn(GOOD, 720, seed=3), prev) is not None
    assert rollout_recovered(rollout, old, _drawn(BAD, 720, seed=3), prev) is None


def _result(rule: Rule, d: Detection) -> SegmentResult:
    """A segment result around one detection (what `detectability` reads)."""
    return SegmentResult(rule, d.observation, d.verdict, None, None, None, d)  # type: ignore[arg-type]


def test_detectability_counts_the_margin_a_short_baseline_puts_below_its_mean() -> None:
    """The drop reported as paging within 15 min does reach the threshold in 15 min (and a slightly smaller one does
    not), and at min_per_minute a drop of 0.2 pages within the hour, on baselines short enough for a wide margin."""
    for n in (60, 200, 20_000):
        seg = SegmentData(WindowStats(21600.0), _baseline(GOOD, n))
        d = detect(RULE, SEGMENT, seg, _minutes(0.81, 360), None, (START, END_W), Budget(1.0, 1))
        shown, ref = detectability(_result(RULE, d)), d.reference
        assert shown is not None and ref is not None and shown.protected
        assert ref.bank is not None
        for drop, pages in ((shown.drop_in_15_min, True), (shown.drop_in_15_min - 0.01, False)):
            # The regression the detectability is computed for: the baseline's top moved to its bottom.
            b = _minutes(0.0, 15)
            after = _buckets(b.start_ms, b.weight, np.tile(dropped(ref.bank.probs, BIN_VALUES, drop), (15, 1)))
            assert (cusum(after, ref) >= ref.threshold - 1e-9) is pages, (n, drop, ref)
        per_minute = math.ceil(shown.min_per_minute * 1000) / 1000
        b = _minutes(0.0, 60, per_minute=per_minute)
        hour = _buckets(b.start_ms, b.weight, np.tile(dropped(ref.bank.probs, BIN_VALUES, 0.2), (60, 1)))
        assert cusum(hour, ref) >= ref.threshold - 1e-9, (n, shown)


def test_one_bad_answer_never_pages_a_segment_whose_baseline_was_all_perfect() -> None:
    """20,000 perfect baseline scores: one zero among 720 perfect answers pages neither rule, at any budget share or
    rate; a sustained drop (one answer in ten a zero) still pages within the hour."""
    low_rule = next(r for r in load_rules().rules if r.name == "low_score_share_rise")
    perfect = SegmentData(WindowStats(21600.0), _baseline((0.0, 0.0, 0.0, 0.0, 1.0), 20_000))
    for rule in (RULE, low_rule):
        for per_minute, segments in ((2, 1), (2, 20), (1, 1)):
            b = _minutes(1.0, 360, per_minute)
            last = np.eye(len(BIN_VALUES))[-1] * (per_minute - 1) / per_minute + np.eye(len(BIN_VALUES))[0] / per_minute
            shares = np.vstack((np.tile(np.eye(len(BIN_VALUES))[-1], (len(b.weight) - 1, 1)), last))
            one = _buckets(b.start_ms, b.weight, shares)
            around = Beside((), _last_ms(b))
            d = detect(rule, SEGMENT, perfect, one, None, (START, END_W), Budget(1.0, segments), around)
            assert d.reference is not None and not d.verdict.fire, (rule.name, per_minute, segments, d.verdict.reason)
        b = _minutes(1.0, 300)
        bad = np.eye(len(BIN_VALUES))[-1] * 0.9 + np.eye(len(BIN_VALUES))[0] * 0.1
        shares = np.array([bad if m >= 250 else np.eye(len(BIN_VALUES))[-1] for m in range(300)])
        tenth = _buckets(b.start_ms, b.weight, shares)
        sustained = detect(rule, SEGMENT, perfect, tenth, None, (START, END_W), Budget(1.0, 1), Beside((), _last_ms(b)))
        assert sustained.verdict.fire, (rule.name, sustained.observation.note)
