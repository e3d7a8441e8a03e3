"""`relevancy-monitor report`: one self-contained HTML file (inline CSS and SVG, nothing fetched) over a time range
of a store: relevancy per app, prompt version and judge with alert firings marked (and under it, each judge's canary
mean shift), the low-score share, the judge canaries, coverage against the traffic counts, judge health, cost per day
and the worst-scored examples.

Modules, bottom up:

- `model`: the typed rows the queries return (pure)
- `buckets`: the time grid of the charts (pure)
- `totals`: totals per segment over the range (pure)
- `charts`: chart specs: lines, bars and alert spans on the grid (pure)
- `svg`: a chart spec drawn as inline SVG with matplotlib
- `formats`: how numbers and times are written (the templates' filters)
- `environment`: the Jinja2 environment over `templates/` (autoescaped; the page, the shared partials and
  `base.css`, which a web page of the project can load too)
- `page`: what the page shows, rendered from `templates/report.html.j2` (pure)
- `queries`: the reads, through `ClickHouseStore.query` (scores FINAL, traffic counts, alert state, canary runs)
- `write`: `write_report`, the API the command line and the demo call

The command line is `monitor.cli.report` (`relevancy-monitor report ...`)."""

from monitor.report.write import ReportSummary, write_report

__all__ = ["ReportSummary", "write_report"]
