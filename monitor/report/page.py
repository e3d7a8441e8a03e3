"""The report as one self-contained HTML page (pure): inline CSS and SVG, no script, no outside resource.

Every text from the store (app names, conversation text, verdicts, errors) goes through `html.escape`."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from monitor.report.attribution import Attribution, attribute, canary_split, shadow_split
from monitor.report.bands import THIN_EVENTS
from monitor.report.buckets import describe_width
from monitor.report.charts import MAX_APP_CHARTS, fired_apps
from monitor.report.examples import find_command
from monitor.report.focus import clock, fired_on_apps, headline, segment_name
from monitor.report.model import CanaryPoint, Example, Firing, ReportData
from monitor.report.queries import DEFAULT_DAYS
from monitor.report.totals import SegmentTotals, apps_in_order, overall_mean, ratio

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 24px 32px;
  color: #1d1d1f; max-width: 1280px; line-height: 1.4; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 32px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 4px; }
.meta { color: #555; margin: 2px 0; font-size: 13px; } .note { color: #555; font-size: 13px; margin: 4px 0 8px; }
.empty { background: #fff6e0; border: 1px solid #e8c66a; padding: 14px 18px; font-size: 17px; margin: 18px 0; }
.warn { background: #fff6e0; border-left: 4px solid #e8c66a; padding: 8px 12px; margin: 12px 0; }
.kpis { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; }
.kpi { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 120px; }
.kpi b { display: block; font-size: 20px; } .kpi span { color: #555; font-size: 12px; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 12px; }
th, td { border-bottom: 1px solid #e5e5e5; padding: 4px 10px 4px 0; text-align: left; vertical-align: top; }
th { color: #444; font-weight: 600; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 12px; background: #f4f4f4; padding: 0 3px; border-radius: 3px; }
.chart svg { width: 100%; height: auto; }
.text { max-width: 380px; max-height: 180px; overflow: auto; white-space: pre-wrap; word-break: break-word; }
.v { display: inline-block; min-width: 28px; text-align: center; border-radius: 3px; font-size: 11px;
  margin-right: 4px; color: #fff; }
.v-yes { background: #2e7d32; } .v-no { background: #c62828; } .v-idk { background: #757575; }
ol.statements { margin: 0; padding-left: 18px; max-width: 420px; } .reason { color: #8a1c1c; font-size: 12px; }
.firing { color: #c62828; font-weight: 600; }
.headline { font-size: 19px; font-weight: 600; margin: 14px 0 4px; padding: 10px 14px; border-left: 5px solid #c62828;
  background: #fdf1f1; } .headline.quiet { border-color: #2e7d32; background: #f1f8f2; }
.verdict { font-size: 14px; margin: 6px 0 10px; } .find { font-size: 11px; word-break: break-all; }
"""


@dataclass(frozen=True, slots=True)
class ChartView:
    """A drawn chart: its inline SVG and the series it left out."""

    svg: str
    omitted: tuple[str, ...] = ()
    clipped: int = 0  # points drawn at 100 % that were above it


def esc(value: object) -> str:
    """`value` as HTML text (quotes escaped too, so it is safe in attributes)."""
    return html.escape(str(value), quote=True)


def when(t: datetime | None) -> str:
    """`2026-11-02 09:15:00 UTC`, or an empty string."""
    return "" if t is None else t.strftime("%Y-%m-%d %H:%M:%S UTC")


def num(v: float | None, digits: int = 3) -> str:
    """`v` rounded to `digits` decimals; an empty cell when there is no value."""
    return "" if v is None else f"{v:,.{digits}f}"


def pct(share: float | None, digits: int = 1) -> str:
    """A share (0..1) as a percentage."""
    return "" if share is None else f"{100 * share:.{digits}f} %"


def usd(v: float) -> str:
    """Dollars: cents above a dollar, four decimals below (judge calls cost fractions of a cent)."""
    return f"${v:,.2f}" if abs(v) >= 1 else f"${v:.4f}"


def count(v: int) -> str:
    """An integer with thousands separators."""
    return f"{v:,}"


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: Iterable[int] = ()) -> str:
    """A table of already escaped cells; columns in `numeric` are right-aligned."""
    right = set(numeric)
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="n">{c}</td>' if i in right else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _segment_text(segment: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{k}={v}" for k, v in segment) or "all segments"


def render_page(
    data: ReportData, totals: Sequence[SegmentTotals], charts: dict[str, ChartView], marked: frozenset[Firing]
) -> str:
    """The whole page. `charts` maps a chart key (see `monitor.report.charts`) to its drawing; `marked` are
    the firings drawn on at least one chart."""
    parts = [_header(data)]
    if data.judged_rows == 0:
        parts.append(_empty(data))
    else:
        parts += [
            _changed(data, charts),
            _summary(data, totals),
            _relevancy(data, totals, charts),
            _canaries(data, charts),
            _alerts(data, marked),
            _coverage(data, charts),
            _health(data, charts),
            _cost(data, charts),
            _examples(data),
        ]
    parts.append(_method(data))
    title = f"Relevancy report · {when(data.since)} – {when(data.until)}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head>\n<body>\n" + "\n".join(parts) + "\n</body></html>\n"
    )


def _span_text(data: ReportData) -> str:
    hours = (data.until - data.since).total_seconds() / 3600
    length = f"{hours / 24:.1f} days" if hours >= 48 else f"{hours:.1f} h" if hours >= 1 else f"{hours * 60:.0f} min"
    how = (
        f"all the data in the store, up to {DEFAULT_DAYS} days (the default; --since and --until choose another)"
        if data.default_range
        else "as asked (--since, --until)"
    )
    return (
        f"Range {when(data.since)} – {when(data.until)} ({length}): {how} · buckets of {describe_width(data.bucket_s)}"
    )


def _header(data: ReportData) -> str:
    weighting = (
        "Means and shares are traffic-weighted: each row counts 1/sample_rate."
        if data.weighted
        else "Means and shares are unweighted: this table has no sample_rate column."
    )
    return (
        "<header><h1>Relevancy report</h1>"
        f'<p class="meta" id="range">{esc(_span_text(data))}</p>'
        f'<p class="meta">store <code>{esc(data.store)}</code> · table <code>{esc(data.table)}</code> · generated '
        f"{esc(when(data.generated_at))} · {esc(weighting)}</p>"
        f'<p class="meta" id="replays">{esc(replay_note(data))}</p></header>'
    )


def headline_of(data: ReportData) -> str:
    """The page's one-line headline: the lead change against its baseline and the rules that fired, or that
    nothing fired."""
    if data.judged_rows == 0:
        return "No judged events in this range."
    pending = [f for f in data.firings if f.fired_at is None]
    return headline(data.change, data.figures, pending)


def attribution_of(data: ReportData) -> Attribution:
    """Product or judge, for the lead change (see `monitor.report.attribution`)."""
    change, figures = data.change, data.figures
    judge = figures.judge_id if figures is not None else ""
    at = change.at if change is not None else data.since
    app = dict(change.lead.segment).get("app", "") if change is not None else ""
    canary = canary_split(data.canaries, judge, at) if judge else None
    shadow = shadow_split(data.shadow, app, at) if app else None
    return attribute(figures, change.at if change is not None else None, canary, shadow)


def _changed(data: ReportData, charts: dict[str, ChartView]) -> str:
    quiet = data.change is None
    parts = [
        '<section id="changed">',
        f'<p class="headline{" quiet" if quiet else ""}" id="headline">{esc(headline_of(data))}</p>',
    ]
    if data.change is not None:
        c = data.change
        rollout = (
            f"{c.rollout.label} first appeared at {clock(c.rollout.t)}"
            if c.rollout is not None
            else f"the episode began at {clock(c.at)} (no new prompt version or model of {segment_name(c.lead)} "
            "appeared before it)"
        )
        figures = data.figures
        n = (
            f" The current figure is the weighted mean of {count(figures.n_current)} judged rows since then, "
            f"the baseline the app's {count(figures.n_baseline)} rows before it in this range (judge "
            f"<code>{esc(figures.judge_id)}</code>)."
            if figures is not None
            else ""
        )
        parts.append(f'<p class="note">{esc(rollout)}.{n}</p>')
        parts.append(f'<p class="verdict" id="verdict">{esc(attribution_of(data).sentence)}</p>')
        parts.append(_chart(charts, "zoom"))
        if "attribution" in charts:
            parts.append(
                '<p class="note">Below: the live mean of that app as its judge scored it, the shadow judge on the same '
                "answers, and the judge's canary mean shift. The shadow moving with the live score is the product; "
                "the canary moving is the judge.</p>"
            )
            parts.append(_chart(charts, "attribution"))
    else:
        parts.append(f'<p class="verdict" id="verdict">{esc(attribution_of(data).sentence)}</p>')
    parts.append("</section>")
    return "".join(parts)


def replay_note(data: ReportData) -> str:
    """One line on the rows `relevancy-monitor replay` wrote in the range: left out (the default) or included."""
    r = data.replays
    if r is None:
        return "Replayed rows: none (this table has no replay_run column: it predates migration 036)."
    if r.rows == 0:
        return "Replayed rows: none in this range."
    runs = f"{count(r.runs)} replay run{'' if r.runs == 1 else 's'}"
    if data.include_replays:
        return f"Replayed rows: {count(r.rows)} from {runs} in this range, included (--include-replays)."
    return f"Replayed rows: {count(r.rows)} from {runs} in this range, left out (--include-replays includes them)."


def _empty(data: ReportData) -> str:
    consumed = sum(b.consumed for b in data.traffic)
    extra = (
        f" The traffic counts show {count(consumed)} events consumed in the range, none of them judged."
        if consumed
        else ""
    )
    message = f"No judged events between {when(data.since)} and {when(data.until)} in {data.table}.{extra}"
    return f'<section id="summary"><p class="empty">{esc(message)}</p>{_no_content(data)}</section>'


def _no_content(data: ReportData) -> str:
    """The OpenTelemetry calls that came without text: traffic that no score can stand for."""
    per_app: dict[str, int] = {}
    for b in data.traffic:
        if b.no_content:
            per_app[b.app] = per_app.get(b.app, 0) + b.no_content
    if not per_app:
        return ""
    apps = ", ".join(f"{app} {count(n)}" for app, n in sorted(per_app.items(), key=lambda kv: -kv[1]))
    return (
        f'<p class="warn" id="no-content">{count(sum(per_app.values()))} OpenTelemetry LLM calls arrived without '
        f"their text and were not scored ({esc(apps)}): their instrumentation captures no message content. The "
        "\u201cContent is off by default\u201d in docs/opentelemetry.md names the switch that turns it on.</p>"
    )


def _kpi(value: str, label: str) -> str:
    return f'<div class="kpi"><b>{value}</b><span>{esc(label)}</span></div>'


def _summary(data: ReportData, totals: Sequence[SegmentTotals]) -> str:
    rows = sum(t.rows for t in totals)
    errors = sum(t.errors for t in totals)
    ok_w = sum(t.w_ok for t in totals)
    low = ratio(sum(t.w_low for t in totals), ok_w)
    cost = sum(c.cost_usd for c in data.costs)
    kpis = "".join(
        (
            _kpi(count(rows), "judged rows"),
            _kpi(num(overall_mean(totals)), "mean score, all segments"),
            _kpi(pct(low), "scored < 0.5"),
            _kpi(pct(ratio(errors, rows)), f"error rows ({count(errors)})"),
            _kpi(usd(cost), "judge cost"),
            _kpi(count(len(totals)), "segments"),
            _kpi(count(len(data.judges)), "judges"),
        )
    )
    table = _table(
        [
            "app",
            "prompt version",
            "judge",
            "judge model",
            "judge_id",
            "rows",
            "ok",
            "errors",
            "mean score",
            "score < 0.5",
        ],
        (
            [
                esc(t.segment.app),
                esc(t.segment.prompt_version),
                esc(t.segment.judge),
                esc(t.segment.judge_model or "–"),
                f"<code>{esc(t.segment.judge_id)}</code>",
                count(t.rows),
                count(t.ok),
                count(t.errors),
                num(t.mean),
                pct(t.low_share),
            ]
            for t in totals
        ),
        numeric=range(5, 10),
    )
    return f'<section id="summary"><h2>Summary</h2><div class="kpis">{kpis}</div>{_no_content(data)}{table}</section>'


def _chart(charts: dict[str, ChartView], key: str) -> str:
    view = charts.get(key)
    if view is None:
        return ""
    left_out = (
        f'<p class="note">Not drawn, to keep the legend readable (see the tables): {esc(", ".join(view.omitted))}.</p>'
        if view.omitted
        else ""
    )
    return f'<div class="chart" id="chart-{esc(key)}">{view.svg}</div>{left_out}'


def _relevancy(data: ReportData, totals: Sequence[SegmentTotals], charts: dict[str, ChartView]) -> str:
    out = [
        '<section id="relevancy"><h2>Relevancy over time</h2>',
        '<p class="note">Per app, the apps with a fired alert first: one line per prompt version and judge '
        "(<code>judge_id</code>), the segments that fired in colour and the stable ones in grey behind them. The "
        "shaded band around each line is its 95 % confidence band, from the same effective number of events (each "
        f"row weighted 1/sample_rate) the alerts use; a hollow point stands for fewer than {THIN_EVENTS:.0f} "
        "effective events and is not joined to its neighbours. Dashed vertical lines mark a prompt version or model "
        "first seen; orange shading is an alert pending, red firing, pale red firing until it resolved (the "
        f"green line).{esc(_alert_status_note(data))}{esc(_canary_panel_note(data))}</p>",
    ]
    apps = apps_in_order(totals, fired_apps(totals, data.firings))
    for app in apps[:MAX_APP_CHARTS]:
        judges = sorted({t.segment.judge_id for t in totals if t.segment.app == app})
        out.append(f"<h3>app {esc(app or '(none)')}</h3>")
        out.append(f'<p class="note">judges: {", ".join(f"<code>{esc(j)}</code>" for j in judges)}</p>')
        out.append(_chart(charts, f"relevancy-{app}"))
    if len(apps) > MAX_APP_CHARTS:
        rest = ", ".join(apps[MAX_APP_CHARTS:])
        out.append(
            f'<p class="note">{len(apps) - MAX_APP_CHARTS} quieter apps have no chart (the summary lists them): '
            f"{esc(rest)}.</p>"
        )
    out.append("</section>")
    return "".join(out)


def _canary_panel_note(data: ReportData) -> str:
    if not data.canaries:
        return ""
    return (
        " The bottom panel is the judge's mean shift on the canary's labelled set (see Judge canaries): live scores "
        "falling"
        " while it holds is the product; falling with it is the judge."
    )


_CANARY_READING = (
    "The alert evaluator re-scores a fixed labelled set with the live judge (ALERTS_CANARY_INTERVAL). The set never "
    "changes, "
    "so these lines move only when the judge does: live relevancy falling while they hold is the product (or its "
    "traffic); "
    "the mean shift falling with it is the judge scoring lower (a provider model update, a prompt edit); ρ falling is "
    "the "
    "judge ranking answers differently; the mean shift rising is a lenient judge, which can hide a real regression."
)


def _canaries(data: ReportData, charts: dict[str, ChartView]) -> str:
    head = '<section id="canaries"><h2>Judge canaries</h2>'
    if data.canary_status == "missing":
        why = (
            "No canary table in this database (its schema predates migration 035): run <code>relevancy-monitor "
            "migrate</code>."
        )
        return f'{head}<p class="note">{why}</p></section>'
    if not data.canaries:
        return (
            f'{head}<p class="note">No canary run in this range: <code>relevancy-monitor alerts run</code> re-scores '
            "the labelled set "
            "every ALERTS_CANARY_INTERVAL (default 1h; off when it is 0).</p></section>"
        )
    groups: dict[tuple[str, str], list[CanaryPoint]] = {}
    for c in data.canaries:
        groups.setdefault((c.judge_id, c.labels), []).append(c)
    rows = []
    for (judge_id, labels), runs in groups.items():
        last = runs[-1]
        shifts = [r.mean_shift for r in runs if r.mean_shift is not None]
        pairs, errors = sum(r.pairs for r in runs), sum(r.errors for r in runs)
        costs = [r.cost_usd for r in runs]
        cost = (
            usd(sum(c for c in costs if c is not None)) if all(c is not None for c in costs) else "unknown (no price)"
        )
        rows.append(
            [
                f"<code>{esc(judge_id)}</code>",
                esc(last.judge),
                esc(labels),
                count(len(runs)),
                esc(when(last.t)),
                num(last.spearman),
                num(last.kappa),
                _signed(last.mean_shift),
                f"{_signed(min(shifts))} to {_signed(max(shifts))}" if shifts else "",
                pct(ratio(errors, pairs)),
                cost,
            ]
        )
    table = _table(
        [
            "judge_id",
            "judge",
            "labelled set",
            "runs",
            "latest run",
            "ρ",
            "κ",
            "mean shift",
            "mean shift, range",
            "pairs not scored",
            "cost",
        ],
        rows,
        numeric=range(3, 11),
    )
    note = (
        f'<p class="note">{esc(_CANARY_READING)} ρ, κ and the mean shift of the latest run; the range over the runs '
        "in the report's range.</p>"
    )
    return f"{head}{note}{_chart(charts, 'canary')}{table}</section>"


def _signed(v: float | None) -> str:
    return "" if v is None else f"{v:+.3f}"


def _alert_status_note(data: ReportData) -> str:
    if data.alert_status == "missing":
        return " There is no alert state table in this database, so the charts carry no alert marks."
    if data.alert_status == "empty":
        return " The alert state table is empty (no evaluator has run), so the charts carry no alert marks."
    if not data.firings:
        return " No alert fired in this range."
    return ""


def _alerts(data: ReportData, marked: frozenset[Firing]) -> str:
    head = '<section id="alerts"><h2>Alert firings</h2>'
    if data.alert_status != "present" or not data.firings:
        return f'{head}<p class="note">{esc(_alert_status_note(data).strip())}</p></section>'
    table = _table(
        [
            "rule",
            "severity",
            "segment",
            "state now",
            "fired at",
            "resolved at",
            "value",
            "baseline",
            "on a chart",
            "note",
        ],
        (
            [
                f'<span class="firing">{esc(f.rule)}</span>',
                esc(f.severity),
                esc(_segment_text(f.segment)),
                esc(f.state),
                esc(when(f.fired_at) or f"not yet (pending since {when(f.pending_since)})"),
                esc(when(f.resolved_at) or ("still firing" if f.fired else "")),
                num(f.value),
                num(f.baseline),
                "yes" if f in marked else "no (no such segment in range)",
                esc(f.note),
            ]
            for f in data.firings
        ),
        numeric=(6, 7),
    )
    caveat = (
        "The alert state keeps the latest episode of each rule and segment, so an earlier firing of the same segment "
        "is not shown; <code>relevancy-monitor alerts backtest</code> replays the rules over the whole history."
    )
    return f'{head}<p class="note">{caveat}</p>{table}</section>'


def _coverage(data: ReportData, charts: dict[str, ChartView]) -> str:
    head = '<section id="coverage"><h2>Volume and coverage</h2>'
    if data.traffic_status != "present":
        why = "no traffic table" if data.traffic_status == "missing" else "no traffic counts in this range"
        note = f"Judged events only: {why}, so the share of traffic judged is unknown."
    else:
        note = (
            "Consumed and sampled events come from the traffic counts (per minute of event time); judged events are "
            "distinct "
            "event ids in the scores table. Coverage is judged / consumed."
        )
    per: dict[tuple[str, str], list[int]] = {}
    for b in data.traffic:
        acc = per.setdefault((b.app, b.prompt_version), [0, 0, 0])
        acc[0] += b.consumed
        acc[1] += b.sampled
        acc[2] += b.judged
    over = sum(1 for c, _s, j in per.values() if c and j > c)
    table = _table(
        ["app", "prompt version", "consumed", "sampled", "judged", "coverage"],
        (
            [esc(app or "(not decoded: dead-lettered)"), esc(pv), count(c), count(s), count(j), _coverage_pct(j, c)]
            for (app, pv), (c, s, j) in sorted(per.items(), key=lambda kv: -kv[1][0])
        ),
        numeric=range(2, 6),
    )
    view = charts.get("coverage")
    clipped = (view.clipped if view is not None else 0, over)
    foot = (
        f'<p class="note" id="clipped">Clipped at 100 %: {count(clipped[0])} chart points and {count(clipped[1])} '
        "table rows counted more judged events than consumed ones (a judged event counts in the minute of its event "
        "time, which the traffic counts may not have flushed yet, or an event consumed twice after a rebalance); "
        "coverage cannot exceed 100 %, so they are shown at 100 %.</p>"
        if any(clipped)
        else ""
    )
    return f'{head}<p class="note">{esc(note)}</p>{_chart(charts, "coverage")}{table}{foot}</section>'


def _coverage_pct(judged: int, consumed: int) -> str:
    share = ratio(judged, consumed)
    return pct(None if share is None else min(share, 1.0))


def _health(data: ReportData, charts: dict[str, ChartView]) -> str:
    judges = _table(
        [
            "judge_id",
            "judge",
            "judge model",
            "rows",
            "error rows",
            "error rate",
            "rate limited (429)",
            "lag p50",
            "lag p90",
            "lag max",
        ],
        (
            [
                f"<code>{esc(j.judge_id)}</code>",
                esc(j.judge),
                esc(j.judge_model or "–"),
                count(j.rows),
                count(j.errors),
                pct(ratio(j.errors, j.rows)),
                count(j.rate_limited),
                _seconds(j.lag_p50_s),
                _seconds(j.lag_p90_s),
                _seconds(j.lag_max_s),
            ]
            for j in data.judges
        ),
        numeric=range(3, 10),
    )
    reasons = (
        _table(
            ["judge_id", "error", "rows"],
            ([f"<code>{esc(r.judge_id)}</code>", esc(r.reason), count(r.rows)] for r in data.error_reasons),
            numeric=(2,),
        )
        if data.error_reasons
        else '<p class="note">No error rows in this range.</p>'
    )
    note = (
        "Error rows have no score. A 429 shows here only when the provider kept refusing past the retries "
        "(<code>error</code> names <code>rate_limited</code>); most rate limiting makes events wait instead, which "
        "shows as lag "
        "and in the metric <code>relevancy_monitor_judge_rate_limited_total</code>."
    )
    chart = _chart(charts, "judge-health")
    return (
        f'<section id="judge-health"><h2>Judge health</h2><p class="note">{note}</p>{chart}{judges}<h3>Errors by '
        f"reason</h3>{reasons}</section>"
    )


def _seconds(v: float | None) -> str:
    return "" if v is None else f"{v:,.1f} s"


def _cost(data: ReportData, charts: dict[str, ChartView]) -> str:
    # A judge without a model (lexical) makes no API call; only a model's uncached rows should carry a cost.
    unpriced = sum(c.rows - c.priced - c.cached for c in data.costs if c.judge_model)
    note = "Per UTC day of event time. Cached verdicts cost nothing."
    if unpriced > 0:
        note += (
            f" {count(unpriced)} uncached rows of model judges carry no cost (cost_usd is NULL: no known price): the "
            "totals leave them out."
        )
    table = _table(
        ["day", "judge_id", "judge model", "rows", "cached", "priced", "cost"],
        (
            [
                esc(c.day.isoformat()),
                f"<code>{esc(c.judge_id)}</code>",
                esc(c.judge_model or "–"),
                count(c.rows),
                count(c.cached),
                count(c.priced),
                usd(c.cost_usd),
            ]
            for c in data.costs
        ),
        numeric=range(3, 7),
    )
    return (
        '<section id="cost"><h2>Judge cost per day</h2><p '
        f'class="note">{esc(note)}</p>{_chart(charts, "cost")}{table}</section>'
    )


def _statements(e: Example) -> str:
    if not e.statements:
        return '<span class="note">no statements (this judge gives none)</span>' if e.judge != "statements" else ""
    items = []
    for i, s in enumerate(e.statements):
        verdict = e.verdicts[i] if i < len(e.verdicts) else ""
        reason = e.verdict_reasons[i] if i < len(e.verdict_reasons) else ""
        cls = verdict if verdict in ("yes", "no", "idk") else "idk"
        why = f'<div class="reason">{esc(reason)}</div>' if reason else ""
        items.append(f'<li><span class="v v-{cls}">{esc(verdict or "?")}</span>{esc(s)}{why}</li>')
    more = (
        f'<div class="note">… {count(e.n_statements - len(e.statements))} more</div>'
        if e.n_statements > len(e.statements)
        else ""
    )
    return f'<ol class="statements">{"".join(items)}</ol>{more}'


def _text(s: str) -> str:
    return f'<div class="text">{esc(s)}</div>' if s else ""


def _example_source(data: ReportData) -> str:
    fired = fired_on_apps(data.firings)  # as `focus.example_sources` chooses them
    if fired:
        names = ", ".join(dict.fromkeys(f"{segment_name(f)} ({f.rule})" for f in fired))
        return f"from the segments that fired: {names}"
    return "from the lowest-scoring segments (nothing fired in this range)"


def _examples(data: ReportData) -> str:
    examples = data.examples
    head = '<section id="worst"><h2>Worst-scored examples</h2>'
    if not examples:
        return f'{head}<p class="note">No ok rows in this range.</p></section>'
    table = _table(
        [
            "score",
            "when",
            "app",
            "prompt version",
            "judge_id",
            "question",
            "response",
            "statements and verdicts",
            "reasoning",
        ],
        (
            [
                num(e.score),
                esc(when(e.event_time)),
                esc(e.app),
                esc(e.prompt_version),
                f"<code>{esc(e.judge_id)}</code>"
                f'<div class="find">find it: <code>{esc(find_command(e, data.store))}</code></div>',
                _text(e.question),
                _text(e.response),
                _statements(e),
                _text(e.reasoning),
            ]
            for e in examples
        ),
        numeric=(0,),
    )
    note = (
        f"The {len(examples)} lowest ok scores {esc(_example_source(data))}, lowest first, one per distinct answer "
        "(the same answer to another question is the same failure), with the line of "
        "<code>relevancy-monitor sql</code> that finds its row. Texts as stored: redacted upstream, cut after 1,200 "
        "characters."
    )
    return f'{head}<p class="note">{note}</p>{table}</section>'


def _method(data: ReportData) -> str:
    weight = "weighted by 1/sample_rate" if data.weighted else "unweighted (no sample_rate column)"
    which = (
        ""
        if data.include_replays or data.replays is None
        else ", written by the live consumer (<code>replay_run = ''</code>)"
    )
    return (
        '<footer><h2>How this was computed</h2><p class="note">'
        f"Rows read with <code>FINAL</code> from {esc(data.table)} where event_time is in [{esc(when(data.since))}, "
        f"{esc(when(data.until))}){which}; "
        f"means and low-score shares (score &lt; 0.5) over ok rows, {esc(weight)}; scoring lag is scored_at − "
        "event_time; "
        "each series stays within one judge_id, so a judge change starts a new line rather than looking like a "
        "regression.</p></footer>"
    )
