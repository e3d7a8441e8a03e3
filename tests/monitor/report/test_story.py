"""The pure parts that tell the report's story: bands and thin buckets, distinct tick labels, the lead episode and
its headline, where the examples come from, product or judge, and the command that finds an example."""

from __future__ import annotations

import shlex
from dataclasses import replace
from datetime import timedelta

import pytest

from monitor.alerts.windows import WeightedSums
from monitor.report.attribution import BeforeAfter, attribute, canary_split, shadow_split
from monitor.report.bands import mean_estimate, share_estimate
from monitor.report.charts import Chart, Line, Panel, Span
from monitor.report.examples import find_command
from monitor.report.focus import change_of, example_sources, focus_window, headline, lead_episode
from monitor.report.model import CanaryPoint, Example, Figures, Firing, FirstSeen, Segment, ShadowPoint
from monitor.report.svg import _legend_lines, _wrap, tick_decimals
from monitor.report.totals import SegmentTotals
from tests.monitor.report.conftest import T0

SEGMENT = (("app", "support-bot"), ("model", "assistant-large"), ("prompt_version", "v13"))


def _sums(scores: list[float], weights: list[float] | None = None) -> WeightedSums:
    w = weights or [1.0] * len(scores)
    return WeightedSums(
        sum(w),
        sum(x * x for x in w),
        sum(a * b for a, b in zip(w, scores, strict=True)),
        sum(a * b * b for a, b in zip(w, scores, strict=True)),
        sum(a for a, b in zip(w, scores, strict=True) if b < 0.5),
    )


def _firing(rule: str = "relevancy_drop", *, hours: float = 14.75, severity: str = "page", **kw: object) -> Firing:
    base = Firing(rule, severity, SEGMENT, "firing", T0 + timedelta(hours=hours), None, 0.48, 0.88, "")
    return replace(base, **kw)  # type: ignore[arg-type]


def test_a_lone_event_is_drawn_as_a_guess_not_a_collapse() -> None:
    """One score of 0 gets the widest band (0 to about 1) and counts as thin; 100 of them around 0.8 a narrow one."""
    lone = mean_estimate(_sums([0.0]))
    assert lone is not None and lone.thin and lone.value == 0.0 and lone.low == 0.0 and lone.high > 0.95
    many = mean_estimate(_sums([0.7, 0.9] * 50))
    assert many is not None and not many.thin and 0.77 < many.low < 0.8 < many.high < 0.83
    low = share_estimate(_sums([0.9, 0.8]))  # no low score among two: not "0 %, certainly"
    assert low is not None and low.thin and low.value == 0.0 and low.high > 60


def test_the_band_uses_the_effective_n_of_the_weights() -> None:
    """Ten rows, one of them weighing 100 (sampled at 1 %), are about one effective event: thin, a wide band."""
    skewed = mean_estimate(_sums([0.9] * 9 + [0.1], [1.0] * 9 + [100.0]))
    even = mean_estimate(_sums([0.9] * 9 + [0.1]))
    assert skewed is not None and even is not None
    assert skewed.n_eff < 1.2 and skewed.thin and even.n_eff == pytest.approx(10) and not even.thin
    assert skewed.high - skewed.low > even.high - even.low


@pytest.mark.parametrize(
    ("ticks", "decimals"),
    [([0, 0.25, 0.5, 0.75, 1.0], 2), ([0, 20, 40, 60], 0), ([0.0, 0.2, 0.4], 1), ([0, 0.001, 0.002], 3), ([1 / 3], 4)],
)
def test_tick_labels_get_the_decimals_that_tell_them_apart(ticks: list[float], decimals: int) -> None:
    """The error-rate axis reads 0.25 %, 0.50 %, not 0 %, 0 %, 1 %: the fewest decimals that print each tick as it
    is, so the labels differ."""
    assert tick_decimals(ticks) == decimals


def test_a_long_legend_entry_wraps_and_the_panel_grows_for_it() -> None:
    """A legend entry longer than its column wraps onto more lines with nothing cut, and the panel's height counts
    those lines."""
    label = "firing: relevancy_drop · assistant-large · v13 · lexical-ac3551ac96b4"
    wrapped = _wrap(label)
    assert "\n" in wrapped and "…" not in wrapped and wrapped.replace("\n", " ") == label
    lines = tuple(Line(f"checkout-flow-rewrite-candidate-{i} · statements-4be1c0ffee42", (0.9,)) for i in range(8))
    chart = Chart("k", "t", (T0,), 60, (T0, T0 + timedelta(minutes=1)), (Panel("s", lines),))
    spans = tuple(Span(f"rule_{i} · {'x' * 40}", T0, T0) for i in range(4))
    assert _legend_lines(replace(chart, spans=spans))[0] > _legend_lines(chart)[0] >= 8


def test_the_lead_episode_is_the_page_still_firing() -> None:
    """A firing page leads a resolved page and a firing ticket; among equals, the earliest to fire."""
    resolved = _firing(hours=1, resolved_at=T0 + timedelta(hours=2), state="resolved")
    ticket = _firing("low_score_share_rise", hours=3, severity="ticket")
    later, first = _firing(hours=9), _firing(hours=5)
    assert lead_episode([resolved, ticket, later, first]) == first
    assert lead_episode([resolved, ticket]) == ticket
    assert lead_episode([replace(first, fired_at=None, state="pending")]) is None


def test_a_page_on_the_judges_scores_leads_one_on_users_feedback_that_fired_first() -> None:
    """The headline quotes relevancy: users' thumbs-down paging first (no judge_id in its key) does not lead while a
    page on the judge's scores fires; alone, it leads."""
    scores = _firing(hours=6, segment=(*SEGMENT, ("judge_id", "lexical-ac3551ac96b4")))
    users = _firing("feedback_negative_rise", hours=5)
    assert lead_episode([users, scores]) == scores
    assert lead_episode([users]) == users


def test_the_change_dates_from_the_rollout_and_names_every_rule() -> None:
    """The change begins where its version first appeared (not when the rule fired), and names every rule that fired
    for the segment, the lead's first."""
    rollout = FirstSeen(T0 + timedelta(hours=14, minutes=32), "support-bot", "prompt_version", "v13")
    elsewhere = FirstSeen(T0 + timedelta(hours=13), "travel-agent", "prompt_version", "v13")
    firings = [_firing("low_score_share_rise", severity="ticket"), _firing()]
    change = change_of(firings, [elsewhere, rollout])
    assert change is not None and change.at == rollout.t and change.rollout == rollout
    assert change.rules == ("relevancy_drop", "low_score_share_rise")
    no_rollout = change_of([replace(_firing(), pending_since=T0 + timedelta(hours=14))], [elsewhere])
    assert no_rollout is not None and no_rollout.at == T0 + timedelta(hours=14) and no_rollout.rollout is None


def test_the_headline_says_what_changed_how_much_and_since_when() -> None:
    """The issue's headline; with nothing fired, that (and a pending episode); without a baseline, no percentage."""
    rollout = FirstSeen(T0 + timedelta(hours=14, minutes=32), "support-bot", "prompt_version", "v13")
    change = change_of([_firing()], [rollout])
    figures = Figures("lexical-1", 0.50, 120, 0.88, 900)
    assert headline(change, figures) == (
        "support-bot v13: relevancy 0.50 against 0.88 since 2026-11-02 14:32 UTC (-43 %), firing relevancy_drop."
    )
    assert headline(None, None) == "Nothing fired in this range."
    pending = replace(_firing(), fired_at=None, state="pending", pending_since=T0 + timedelta(hours=3))
    assert headline(None, None, [pending]) == (
        "Nothing fired in this range (relevancy_drop pending for support-bot v13 since 2026-11-02 03:00 UTC)."
    )
    alone = headline(change, Figures("lexical-1", 0.5, 120, None, 0))
    assert "no earlier rows to compare" in alone and "%" not in alone


def test_the_zoom_starts_well_before_the_change() -> None:
    """At least 30 minutes before the change, twice as long as since it when that is longer, never before the range."""
    at, until = T0 + timedelta(hours=10), T0 + timedelta(hours=10, minutes=2)
    assert focus_window(at, T0, until) == (at - timedelta(minutes=30), until)
    assert focus_window(at, T0, at + timedelta(hours=1)) == (at - timedelta(hours=2), at + timedelta(hours=1))
    assert focus_window(at, at - timedelta(minutes=5), until)[0] == at - timedelta(minutes=5)


def test_examples_come_from_the_app_segments_that_fired_else_the_lowest_scoring() -> None:
    """A fired app segment is the source (a rule on a judge alone is not); with nothing fired, the three lowest
    scoring segments."""
    judge_only = replace(_firing("judge_error_rate"), segment=(("judge_id", "statements-1"),))
    assert example_sources([_firing(), judge_only], []) == (SEGMENT,)

    def total(app: str, mean: float) -> SegmentTotals:
        return SegmentTotals(Segment(app, "v1", "j"), 10, 10, 0, 10.0, 10 * mean, 0.0)

    totals = [total("a", 0.9), total("b", 0.4), total("c", 0.6), total("d", 0.5)]
    sources = example_sources([judge_only], totals)
    assert [dict(s)["app"] for s in sources] == ["b", "d", "c"]


def test_a_canary_that_held_while_live_fell_is_the_product() -> None:
    """Live down 0.40 with the canary steady is the product; with the canary down as much, the judge; with neither
    a canary nor a shadow, it cannot tell and says how to find out."""
    figures, at = Figures("j", 0.48, 100, 0.88, 900), T0 + timedelta(hours=12)
    held = attribute(figures, at, BeforeAfter(-0.07, -0.08), None)
    assert held.verdict == "product" and held.sentence.startswith("The product changed, not the judge")
    moved = attribute(figures, at, BeforeAfter(-0.07, -0.40), None)
    assert moved.verdict == "judge" and "canary moved too" in moved.sentence
    shadow_flat = attribute(figures, at, None, BeforeAfter(0.85, 0.84))
    assert shadow_flat.verdict == "judge" and "shadow judge" in shadow_flat.sentence
    shadow_agrees = attribute(figures, at, None, BeforeAfter(0.85, 0.50))
    assert shadow_agrees.verdict == "product"
    unknown = attribute(figures, at, None, None)
    assert unknown.verdict == "unknown" and "ALERTS_CANARY_INTERVAL" in unknown.sentence
    one_side = attribute(figures, at, BeforeAfter(-0.07, None), None)
    assert one_side.verdict == "unknown" and "both sides" in one_side.sentence


def test_canary_and_shadow_split_at_the_change() -> None:
    """The judge's canary runs and the app's shadow pairs are averaged on each side of the change (by events)."""
    at = T0 + timedelta(hours=2)

    def run(h: float, shift: float, judge: str = "j") -> CanaryPoint:
        return CanaryPoint(T0 + timedelta(hours=h), "r", judge, "lexical", "golden", 10, 0, 0.8, 0.7, shift, None)

    runs = [run(0, -0.1), run(1, -0.3), run(3, -0.2), run(3, 0.9, judge="other")]
    assert canary_split(runs, "j", at) == BeforeAfter(pytest.approx(-0.2), pytest.approx(-0.2))
    assert canary_split(runs, "nobody", at) is None
    pairs = [ShadowPoint(T0, "a", "s", 1, 0.9, 0.9), ShadowPoint(T0 + timedelta(hours=3), "a", "s", 3, 0.5, 0.4)]
    assert shadow_split(pairs, "a", at) == BeforeAfter(0.9, pytest.approx(0.4))


def test_the_find_command_is_one_shell_word_per_argument() -> None:
    """The sql line splits back into the command, the embedded store and the query, even for an id with quotes."""
    example = Example(T0, "ev-1", "a", "v1", "j-1", "lexical", 0.0, 0.0, "q", "r", "", (), (), (), 0)
    line = find_command(example, "chdb:///tmp/store")
    assert line.startswith('relevancy-monitor sql --clickhouse-url chdb:///tmp/store "SELECT ')
    words = shlex.split(line)
    assert words[:4] == ["relevancy-monitor", "sql", "--clickhouse-url", "chdb:///tmp/store"]
    assert "WHERE event_id = 'ev-1' AND judge_id = 'j-1'" in words[4] and words[5:] == ["--format", "json"]
    odd = shlex.split(find_command(replace(example, event_id='it\'s "$x"'), "https://ch.example:8443"))
    assert odd[2].endswith("event_id = 'it\\'s \"$x\"' AND judge_id = 'j-1'") and "--clickhouse-url" not in odd
