"""The time of one engine round on a large deployment: 500 relevancy_drop segments with 6 h windows, against limits
measured in the same run on the same data (`python -m bench.round_time [--segments 500] [--hours 18]`).

The segments' minutes are simulated in memory (`bench.alert_quality`: 100 apps with five model and prompt-version
arms each, about 2 judged events a minute per segment) and fed to the engine's rounds (`evaluate_rules` over
`HistoryData`, what `alerts backtest` does at each step) with the shipped relevancy_drop rule alone. Timed, over
`--rounds` consecutive rounds 5 minutes apart (state carried, the first one apart: it fills the caches):

- `detector round`: the shipped rule, its detector reading each segment's minute buckets and histogram;
- `means-only round`: the same segments, windows and trailing baseline under a rule that reads only means (a
  fixed-window test of the mean against the baseline, no detector): what a round costs the engine when no
  statistic is accumulated over buckets. The ratio of the two is what the detector's statistic adds to a round;
- `numpy pass`: one vectorised pass over the same window's minute histograms of every segment (a log-likelihood
  ratio CUSUM against each segment's baseline histogram for four alternatives), the arithmetic floor of a
  likelihood-ratio round with nothing of the engine around it.

Ratios, not seconds, are what to compare between machines. `--segments 20 --hours 8` runs in seconds (CI)."""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench import alert_quality as aq
from bench.output import emit
from monitor.alerts.backtest import HistoryData
from monitor.alerts.engine import StateKey, evaluate_rules
from monitor.alerts.evaluator import AlertState
from monitor.alerts.history import SCORE_SUMS
from monitor.alerts.rules import Rule, RuleSet, load_rules
from monitor.alerts.windows import BIN_SUMS

DEFAULT_JSON = Path(".relevancy-monitor/bench/round_time.json")
ARMS = (("model-a", "v1"), ("model-a", "v2"), ("model-b", "v1"), ("model-b", "v2"), ("model-c", "v1"))


def deployment(segments: int, rate_per_segment: float = 2.0) -> list[aq.Stream]:
    """Apps of five arms each (the last app fewer) making `segments` segments, from GOOD and BASE alternately."""
    out = []
    for i in range(0, segments, len(ARMS)):
        arms = ARMS[: min(len(ARMS), segments - i)]
        mix = aq.GOOD if (i // len(ARMS)) % 2 else aq.BASE
        phase = aq.Phase(0, tuple((m, v, 1 / len(arms), mix) for m, v in arms))
        out.append(aq.Stream(f"app-{i // len(ARMS):03d}", rate_per_segment * len(arms), [phase], pre=mix, post=mix))
    return out


def means_only(rule: Rule) -> Rule:
    """`rule` without its detector: a fixed-window test of the mean against the same trailing baseline."""
    data = rule.model_dump(by_alias=True, exclude_unset=True)
    data.pop("detector", None)
    data |= {"name": f"{rule.name}_means_only", "condition": {"change": {"fire": 0.1}}, "min_events": 30}
    return Rule.model_validate(data)


def _rounds(rules: RuleSet, data: HistoryData, first: Any, rounds: int) -> tuple[float, list[float], int]:
    """Seconds of the first round and of each later one (state carried), and the segments of the last."""
    states: dict[StateKey, AlertState] = {}
    times, segments = [], 0
    for k in range(rounds + 1):
        started = time.perf_counter()
        ev = evaluate_rules(None, rules, first + timedelta(minutes=5 * k), states, data=data)
        times.append(time.perf_counter() - started)
        assert not ev.errors, ev.errors[0]
        states.update(ev.states())
        segments = len(ev.results)
    return times[0], times[1:], segments


def numpy_pass(minutes: aq.Minutes, first_minute: int, window_min: int, baseline_min: int) -> float:
    """Seconds of one vectorised LLR CUSUM pass over every segment's window histograms (see the module doc)."""
    names = list(SCORE_SUMS)
    cols = np.array([names.index(b) for b in BIN_SUMS])
    keys = sorted(minutes.sums)
    window = np.zeros((len(keys), window_min, len(cols)))
    base = np.zeros((len(keys), len(cols)))
    for i, key in enumerate(keys):
        for minute, row in minutes.sums[key].items():
            if first_minute <= minute < first_minute + window_min:
                window[i, minute - first_minute] = row[cols]
            elif first_minute - baseline_min <= minute < first_minute:
                base[i] += row[cols]
    started = time.perf_counter()
    pre = (base + 1 / len(cols)) / (base + 1 / len(cols)).sum(axis=1, keepdims=True)
    stats = []
    for strength in (0.1, 0.2, 0.4, 0.8):  # alternatives: that share of the mass above 0.5 moved to the bottom bin
        post = pre.copy()
        moved = post[:, len(cols) // 2 :] * strength
        post[:, len(cols) // 2 :] -= moved
        post[:, 0] += moved.sum(axis=1)
        z = np.einsum("smb,sb->sm", window, np.log(post / pre))
        sums = np.cumsum(z, axis=1)
        stats.append(sums[:, -1] - np.minimum(0.0, np.minimum.accumulate(sums, axis=1)[:, -1]))
    np.max(stats, axis=0)
    return time.perf_counter() - started


def measure(segments: int, hours: float, rounds: int, seed: int = 7) -> dict[str, Any]:
    """Simulate `hours` of the deployment, then time its rounds at the end (see the module doc)."""
    shipped = load_rules()
    rule = next(r for r in shipped.rules if r.name == aq.DETECTOR_RULE)
    detector = RuleSet(rules=[rule], false_alarms_per_week={rule.severity: shipped.budget(rule)})
    plain = RuleSet(rules=[means_only(rule)], false_alarms_per_week={rule.severity: shipped.budget(rule)})
    step = timedelta(minutes=5)
    started = time.perf_counter()
    minutes = aq.simulate(deployment(segments), hours, seed)
    first = aq.ORIGIN + timedelta(hours=hours) - step * (rounds + 1)
    until = aq.ORIGIN + timedelta(hours=hours)
    data = aq.histories(detector, minutes, aq.ORIGIN, first, until, step)
    plain_data = aq.histories(plain, minutes, aq.ORIGIN, first, until, step)
    setup_s = time.perf_counter() - started
    cold, warm, seen = _rounds(detector, data, first, rounds)
    plain_cold, plain_warm, _ = _rounds(plain, plain_data, first, rounds)
    window_min = int(rule.window / timedelta(minutes=1))
    end_min = int((first + step * rounds - aq.ORIGIN) / timedelta(minutes=1))
    floor_s = statistics.median(
        numpy_pass(minutes, end_min - window_min, window_min, end_min - window_min) for _ in range(3)
    )
    round_s, plain_s = statistics.median(warm), statistics.median(plain_warm)
    return {
        "segments": seen,
        "hours_simulated": hours,
        "window_h": rule.window / timedelta(hours=1),
        "rounds": rounds,
        "setup_s": setup_s,
        "detector_first_round_s": cold,
        "detector_round_s": round_s,
        "means_only_first_round_s": plain_cold,
        "means_only_round_s": plain_s,
        "numpy_pass_s": floor_s,
        "ratio_to_means_only": round_s / plain_s,
        "ratio_to_numpy_pass": round_s / floor_s,
        "per_segment_ms": 1000 * round_s / max(seen, 1),
    }


def report_lines(r: dict[str, Any]) -> list[str]:
    """The figures as a table for people."""
    return [
        f"one round of {aq.DETECTOR_RULE}: {r['segments']} segments, {r['window_h']:g} h windows, "
        f"{r['hours_simulated']:g} h simulated (set up in {r['setup_s']:.1f} s); median of {r['rounds']} rounds",
        f"{'measured in this run':<44}{'seconds':>10}{'detector round ÷ it':>22}",
        f"{'detector round (first: ' + format(r['detector_first_round_s'], '.2f') + ' s)':<44}"
        f"{r['detector_round_s']:>10.3f}{'1':>22}",
        f"{'means-only round, same segments':<44}{r['means_only_round_s']:>10.3f}{r['ratio_to_means_only']:>22.2f}",
        f"{'numpy LLR pass over the same buckets':<44}{r['numpy_pass_s']:>10.4f}{r['ratio_to_numpy_pass']:>22.0f}",
        f"per segment: {r['per_segment_ms']:.2f} ms a round",
    ]


def main(
    segments: int = 500, hours: float = 18.0, rounds: int = 5, json_path: Path | None = DEFAULT_JSON
) -> dict[str, Any]:
    """Measure, print and write JSON."""
    result = measure(segments, hours, rounds)
    emit(report_lines(result), result, json_path)
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--segments", type=int, default=500)
    p.add_argument("--hours", type=float, default=18.0, help="hours simulated before the timed rounds (default 18)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    a = p.parse_args()
    main(a.segments, a.hours, a.rounds, a.json)
