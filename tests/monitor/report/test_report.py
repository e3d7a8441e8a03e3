"""`write_report` against the real embedded store: what the page shows, read with FINAL, weighted by 1/sample_rate,
with alert firings from the alert state, coverage from the traffic counts, judge health, cost and the worst examples."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from monitor.report import ReportSummary, write_report
from monitor.report.model import ReportData, Segment
from monitor.report.queries import fetch_report_data
from monitor.report.write import charts_of
from monitor.store.connection import ClickHouseStore
from schemas.errors import UsageError
from tests.monitor.report.conftest import (
    HOSTILE,
    LEXICAL_JUDGE,
    REPLAY_JUDGE,
    STATEMENTS_JUDGE,
    T0,
    T1,
    Filled,
    fill,
    make_row,
    outside_references,
    read_page,
    replayed_rows,
)


@pytest.fixture(scope="module")
def page(filled: Filled, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ReportSummary]:
    """The report of the filled day, written once for the module: (its HTML, its summary)."""
    path = tmp_path_factory.mktemp("report") / "day.html"
    summary = write_report(filled.store, T0, T1, path)
    return read_page(path), summary


def _section(html: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}">(.*?)</section>', html, re.DOTALL)
    assert match, f"no section {section_id}"
    return match.group(1)


def test_summary_names_every_segment_and_counts_each_event_once(filled: Filled, tmp_path: Path) -> None:
    """The summary lists each (app, prompt version, judge_id) and counts a redelivered batch once (FINAL)."""
    summary = write_report(filled.store, T0, T1, tmp_path / "r.html")
    assert summary.path == tmp_path / "r.html" and summary.path.is_file()
    assert summary.judged_rows == filled.rows
    assert {(s.app, s.prompt_version, s.judge_id) for s in summary.segments} == {
        ("support", "v1", STATEMENTS_JUDGE),
        ("support", "v2", STATEMENTS_JUDGE),
        ("search", "v7", LEXICAL_JUDGE),
    }
    assert Segment("support", "v1", STATEMENTS_JUDGE, "statements", "claude-haiku-4-5") in summary.segments
    assert summary.weighted and summary.alert_state == "present"


def test_title_names_the_store_the_table_and_the_range(page: tuple[str, ReportSummary], filled: Filled) -> None:
    """The header shows the store, database.table, the range in UTC and the weighting."""
    html, _ = page
    header = html.split("</header>")[0]
    assert filled.store.url in header and f"{filled.store.database}.relevancy_scores" in header
    assert "2026-11-02 00:00:00 UTC – 2026-11-03 00:00:00 UTC" in header
    assert "traffic-weighted: each row counts 1/sample_rate" in header


def test_each_app_has_a_relevancy_chart_with_its_judges(page: tuple[str, ReportSummary]) -> None:
    """Relevancy over time has one chart (inline SVG) per app, naming the judge ids charted."""
    html, _ = page
    section = _section(html, "relevancy")
    for app, judge in (("support", STATEMENTS_JUDGE), ("search", LEXICAL_JUDGE)):
        chart = re.search(
            rf'<h3>app {app}</h3><p class="note">judges: <code>{judge}</code></p><div class="chart" id="chart-relevanc'
            rf'y-{app}"><svg',
            section,
        )
        assert chart, app


def test_firings_are_marked_on_the_charts_of_the_segments_they_concern(
    filled: Filled, page: tuple[str, ReportSummary]
) -> None:
    """A firing marks only the charts of segments it keys on, one without such a segment is only listed, an old one is
    left out."""
    _, summary = page
    assert summary.firings_marked == 2
    data = fetch_report_data(filled.store, T0, T1, 900)
    assert [(f.rule, f.get("app")) for f in data.firings] == [
        ("relevancy_floor", "billing"),
        ("relevancy_drop", "support"),
        ("judge_error_rate", None),
    ]
    charts = {c.key: c for c in charts_of(data)[0]}
    support = charts["relevancy-support"].spans
    drop, error_rate = f"relevancy_drop · v2 · {STATEMENTS_JUDGE}", f"judge_error_rate · {STATEMENTS_JUDGE}"
    assert [(s.label, s.state) for s in support] == [
        (drop, "pending"),
        (drop, "resolved"),
        (error_rate, "pending"),
        (error_rate, "firing"),
    ]
    assert (support[0].start, support[0].end) == (T0 + timedelta(hours=14), T0 + timedelta(hours=14, minutes=20))
    assert support[1].start == T0 + timedelta(hours=14, minutes=20) and support[1].end == T0 + timedelta(
        hours=18, minutes=10
    )
    assert not support[1].open_end and support[3].end == T1 and support[3].open_end
    assert charts["relevancy-search"].spans == ()
    table = _section(page[0], "alerts")
    assert "app=billing" in table and "no (no such segment in range)" in table and "still firing" in table


def test_means_are_weighted_by_one_over_the_sample_rate(store: ClickHouseStore, tmp_path: Path) -> None:
    """A score of 1 sampled at 0.25 weighs four times a score of 0 sampled at 1: the mean shown is 0.8, not 0.5."""
    rows = [
        make_row(
            T0 + timedelta(minutes=5), app="a", prompt_version="p", judge_id=LEXICAL_JUDGE, score=1.0, sample_rate=0.25
        ),
        make_row(
            T0 + timedelta(minutes=6), app="a", prompt_version="p", judge_id=LEXICAL_JUDGE, score=0.0, sample_rate=1.0
        ),
    ]
    store.insert_rows(rows, uuid.uuid4().hex)
    summary = write_report(store, T0, T0 + timedelta(hours=1), tmp_path / "w.html")
    html = read_page(tmp_path / "w.html")
    assert summary.weighted
    assert '<td class="n">0.800</td><td class="n">20.0 %</td>' in _section(html, "summary")


def test_a_table_without_sample_rate_gives_unweighted_means_and_says_so(store: ClickHouseStore, tmp_path: Path) -> None:
    """Without a sample_rate column every row counts once, and the page says the means are unweighted."""
    rows = [
        make_row(
            T0 + timedelta(minutes=5), app="a", prompt_version="p", judge_id=LEXICAL_JUDGE, score=1.0, sample_rate=0.25
        ),
        make_row(
            T0 + timedelta(minutes=6), app="a", prompt_version="p", judge_id=LEXICAL_JUDGE, score=0.0, sample_rate=1.0
        ),
    ]
    store.insert_rows(rows, uuid.uuid4().hex)
    db = store.database
    store.command(
        f"CREATE TABLE {db}.legacy_scores ENGINE = ReplacingMergeTree(version) ORDER BY (app, judge_id, event_id)"
        f" AS SELECT * EXCEPT (sample_rate) FROM {db}.relevancy_scores"
    )
    legacy = ClickHouseStore(store.url, db, "legacy_scores")
    legacy.open_for_reads()
    summary = write_report(legacy, T0, T0 + timedelta(hours=1), tmp_path / "u.html")
    html = read_page(tmp_path / "u.html")
    assert not summary.weighted and "unweighted: this table has no sample_rate column" in html
    assert '<td class="n">0.500</td><td class="n">50.0 %</td>' in _section(html, "summary")


@pytest.mark.parametrize(
    ("change", "status", "says"),
    [("DROP TABLE", "missing", "no alert state table"), ("TRUNCATE TABLE", "empty", "alert state table is empty")],
)
def test_without_alert_state_the_charts_carry_no_marks_and_the_page_says_so(
    store: ClickHouseStore, tmp_path: Path, change: str, status: str, says: str
) -> None:
    """A missing or empty alert state table marks nothing, and both the relevancy and the alert sections say why."""
    fill(store)
    store.command(f"{change} {store.database}.alert_state")
    summary = write_report(store, T0, T1, tmp_path / "a.html")
    html = read_page(tmp_path / "a.html")
    assert summary.alert_state == status and summary.firings_marked == 0 and summary.judged_rows > 0
    assert says in _section(html, "relevancy") and says in _section(html, "alerts")
    assert "firing:" not in html


def test_coverage_sets_judged_events_against_the_traffic_counts(page: tuple[str, ReportSummary]) -> None:
    """Coverage per app and prompt version is judged events over consumed ones from the traffic counts."""
    section = _section(page[0], "coverage")
    assert (
        '<tr><td>support</td><td>v1</td><td class="n">158</td><td class="n">79</td><td class="n">79</td><td '
        'class="n">50.0 %</td></tr>' in section
    )
    assert (
        '<tr><td>search</td><td>v7</td><td class="n">144</td><td class="n">144</td><td class="n">144</td><td '
        'class="n">100.0 %</td></tr>' in section
    )
    assert "(not decoded: dead-lettered)" in section and 'id="chart-coverage"' in section


def test_coverage_without_a_traffic_table_shows_judged_events_only(store: ClickHouseStore, tmp_path: Path) -> None:
    """Without the traffic table the page charts judged events and says coverage is unknown, rather than failing."""
    fill(store)
    store.command(f"DROP TABLE {store.database}.traffic_counts")
    write_report(store, T0, T1, tmp_path / "t.html")
    section = _section(read_page(tmp_path / "t.html"), "coverage")
    assert "no traffic table, so the share of traffic judged is unknown" in section and 'id="chart-coverage"' in section


def test_judge_health_counts_errors_rate_limits_and_lag_per_judge(
    filled: Filled, page: tuple[str, ReportSummary]
) -> None:
    """Per judge: error rows, rate-limited (429) error rows by their error text, error reasons and lag quantiles."""
    data = fetch_report_data(filled.store, T0, T1, 900)
    judges = {j.judge_id: j for j in data.judges}
    assert judges[STATEMENTS_JUDGE].rate_limited == filled.rate_limited == 4
    assert judges[STATEMENTS_JUDGE].errors == 10 and judges[LEXICAL_JUDGE].errors == 0
    assert judges[LEXICAL_JUDGE].lag_max_s == 6.0 and judges[STATEMENTS_JUDGE].lag_p90_s == 4.0
    assert {(r.reason, r.rows) for r in data.error_reasons} == {("invalid_reply", 6), ("rate limited (429)", 4)}
    section = _section(page[0], "judge-health")
    assert "rate limited (429)" in section and 'id="chart-judge-health"' in section and "6.4 %" in section


def test_cost_is_summed_per_day_and_judge(page: tuple[str, ReportSummary]) -> None:
    """Cost per UTC day and judge: the priced rows' cost_usd, with the rows that carry none counted."""
    section = _section(page[0], "cost")
    assert f"<td>2026-11-02</td><td><code>{STATEMENTS_JUDGE}</code></td><td>claude-haiku-4-5</td>" in section
    assert "$0.0612" in section and "4 uncached rows of model judges carry no cost" in section


def test_worst_examples_show_statements_and_verdicts_with_text_escaped(page: tuple[str, ReportSummary]) -> None:
    """The worst rows of the segment that fired come lowest first, one per distinct answer, with each statement's
    verdict and reason and the sql line that finds them, and a script in a conversation stays text."""
    html, _ = page
    section = _section(html, "worst")
    scores = [float(s) for s in re.findall(r'<tr><td class="n">([0-9.]+)</td>', section)]
    # support v2 fired; its rows give two answers (the padded one, the hostile one), each shown once.
    assert scores == [0.0, 0.523]
    assert "from the segments that fired: billing (relevancy_floor), support v2 (relevancy_drop)," in section
    assert section.count("<td>support</td><td>v2</td>") == 2 and "<td>search</td>" not in section
    assert section.count("find it: <code>relevancy-monitor sql") == 2 and "WHERE event_id = &#39;" in section
    assert (
        '<span class="v v-no">no</span>We also sell gift cards.' in section
        and '<div class="reason">a greeting</div>' in section
    )
    assert '<span class="v v-yes">yes</span>Order A17 shipped on 3 March.' in section
    assert HOSTILE not in html and "<script" not in html and "<img" not in html
    assert (
        "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=&#34;https://evil.example/p.png&#34;&gt;" in section
    )


def test_the_page_references_no_outside_resource(page: tuple[str, ReportSummary]) -> None:
    """No script, stylesheet link, image, frame, import or url() anywhere: the file needs no network when opened."""
    html, _ = page
    assert outside_references(html) == []
    assert "https://evil.example/p.png" in html  # the conversation's URL is there, as text
    assert "xmlns" not in html  # the SVG's namespace URLs are dropped too: the HTML parser knows them


def test_the_reference_check_finds_what_would_load() -> None:
    """The check above is not vacuous: it finds a script, a stylesheet link, a CSS url(), a CSS import and an SVG
    image."""
    html = (
        '<script src="https://cdn.example/x.js"></script><link rel="stylesheet" href="s.css"><p style="background: '
        'url(//h/x.png)">'
        '<style>@import "https://fonts.example/f.css";</style><svg><image xlink:href="https://h/i.png"/><use '
        'xlink:href="#g1"/></svg>'
    )
    found = outside_references(html)
    for needle in ("cdn.example/x.js", "href=s.css", "url(//h/x.png)", "@import", "h/i.png"):
        assert any(needle in f for f in found), (needle, found)
    assert not any("#g1" in f for f in found), found


def test_an_empty_range_gives_a_clear_report(filled: Filled, tmp_path: Path) -> None:
    """A range without rows writes a page saying there were no judged events between the two times."""
    since = T0 - timedelta(days=10)
    summary = write_report(filled.store, since, since + timedelta(days=1), tmp_path / "e.html")
    html = read_page(tmp_path / "e.html")
    assert summary.judged_rows == 0 and summary.segments == () and summary.firings_marked == 0
    assert (
        f"No judged events between 2026-10-23 00:00:00 UTC and 2026-10-24 00:00:00 UTC in "
        f"{filled.store.database}.relevancy_scores." in html
    )
    assert "<svg" not in html


def test_an_inverted_range_is_a_usage_error(filled: Filled, tmp_path: Path) -> None:
    """Since at or after until is a one-line `UsageError`, and nothing is written."""
    with pytest.raises(UsageError, match="must be before") as err:
        write_report(filled.store, T1, T0, tmp_path / "x.html")
    assert "\n" not in str(err.value) and not (tmp_path / "x.html").exists()


def test_an_unwritable_path_is_a_usage_error_naming_it(filled: Filled, tmp_path: Path) -> None:
    """A path in a missing directory is a one-line `UsageError` naming the path, with no temporary file left."""
    target = tmp_path / "missing" / "r.html"
    with pytest.raises(UsageError, match=re.escape(str(target))):
        write_report(filled.store, T0, T1, target)
    assert list(tmp_path.iterdir()) == []


def test_a_chart_draws_the_busiest_eight_series_and_names_the_rest(store: ClickHouseStore, tmp_path: Path) -> None:
    """Of ten prompt versions a chart draws the busiest eight and names the other two; the summary lists all ten."""
    rows = [
        make_row(T0 + timedelta(minutes=m), app="a", prompt_version=f"p{v}", judge_id=LEXICAL_JUDGE, score=0.5)
        for v in range(10)
        for m in range(20 - v)  # p0 busiest, p9 quietest
    ]
    store.insert_rows(rows, uuid.uuid4().hex)
    summary = write_report(store, T0, T0 + timedelta(hours=1), tmp_path / "m.html")
    html = read_page(tmp_path / "m.html")
    assert len(summary.segments) == 10
    assert (
        f"Not drawn, to keep the legend readable (see the tables): p8 · {LEXICAL_JUDGE}, p9 · {LEXICAL_JUDGE}."
        in _section(html, "relevancy")
    )
    assert html.count(f"<td><code>{LEXICAL_JUDGE}</code></td>") >= 10


def _figures(data: ReportData) -> tuple[object, ...]:
    """The counts behind every section of the page (floats left out: the same rows may be summed in another order)."""
    return (
        [(b.t, b.segment, b.rows, b.ok, b.errors) for b in data.segments],
        [(h.t, h.judge_id, h.rows, h.errors, h.rate_limited) for h in data.health],
        [(j.judge_id, j.rows, j.errors, j.rate_limited, j.priced) for j in data.judges],
        data.error_reasons,
        [(c.day, c.judge_id, c.rows, c.priced, c.cached) for c in data.costs],
        data.traffic,
        [e.event_id for e in data.examples],
    )


def test_replayed_rows_are_left_out_and_counted_unless_included(store: ClickHouseStore, tmp_path: Path) -> None:
    """By default every section reads the live rows only and the header says in one line how many replayed rows of the
    range it left out; with include_replays every section has them and the line says they are included."""
    filled = fill(store)
    live_only = _figures(fetch_report_data(store, T0, T1, 900))
    store.insert_rows(replayed_rows(), uuid.uuid4().hex)
    assert _figures(fetch_report_data(store, T0, T1, 900)) == live_only
    live = write_report(store, T0, T1, tmp_path / "live.html")
    html = read_page(tmp_path / "live.html")
    assert (live.judged_rows, live.replayed_rows) == (filled.rows, 13)
    assert (
        '<p class="meta" id="replays">Replayed rows: 13 from 2 replay runs in this range, left out (--include-replays '
        "includes them).</p>" in html
    )
    assert "REPLAYED" not in html and REPLAY_JUDGE not in html and "written by the live consumer" in html
    both = write_report(store, T0, T1, tmp_path / "both.html", include_replays=True)
    html = read_page(tmp_path / "both.html")
    assert (both.judged_rows, both.replayed_rows) == (filled.rows + 13, 13)
    assert (
        '<p class="meta" id="replays">Replayed rows: 13 from 2 replay runs in this range, included '
        "(--include-replays).</p>" in html
    )
    assert REPLAY_JUDGE in _section(html, "summary") and "replayed_failure" in _section(html, "judge-health")
    assert "written by the live consumer" not in html
    judged = sum(b.judged for b in fetch_report_data(store, T0, T1, 900, include_replays=True).traffic)
    assert (
        judged == sum(b.judged for b in fetch_report_data(store, T0, T1, 900).traffic) + 13
    )  # each replayed row is an event of its own here


def test_a_range_without_replays_says_so(page: tuple[str, ReportSummary]) -> None:
    """A store without replayed rows in the range says so in the header, so nobody wonders."""
    assert '<p class="meta" id="replays">Replayed rows: none in this range.</p>' in page[0].split("</header>")[0]


def test_a_table_from_before_replays_is_read_whole_and_says_so(store: ClickHouseStore, tmp_path: Path) -> None:
    """A scores table without the replay_run column (before migration 036) is read as before, and the header says why
    there are no replayed rows."""
    store.insert_rows(
        [make_row(T0 + timedelta(minutes=5), app="a", prompt_version="p", judge_id=LEXICAL_JUDGE, score=0.5)],
        uuid.uuid4().hex,
    )
    db = store.database
    store.command(
        f"CREATE TABLE {db}.legacy_scores ENGINE = ReplacingMergeTree(version) ORDER BY (app, judge_id, event_id)"
        f" AS SELECT * EXCEPT (replay_run) FROM {db}.relevancy_scores"
    )
    legacy = ClickHouseStore(store.url, db, "legacy_scores")
    legacy.open_for_reads()
    summary = write_report(legacy, T0, T0 + timedelta(hours=1), tmp_path / "old.html")
    html = read_page(tmp_path / "old.html")
    assert (summary.judged_rows, summary.replayed_rows) == (1, 0)
    assert "Replayed rows: none (this table has no replay_run column: it predates migration 036)." in html


def test_coverage_counts_the_same_minutes_on_both_sides_of_a_range_starting_mid_minute(store: ClickHouseStore) -> None:
    """A range starting at :15 of a minute leaves that minute's traffic out, and its judged events too: every event
    judged and consumed once reads 100 %, not more (the demo's report once said 100.4 %)."""
    from monitor.judging.traffic_counts import COLUMNS, TrafficCounter

    start = T0 + timedelta(minutes=10)
    rows = [
        make_row(
            start + timedelta(seconds=10 * i), app="support", prompt_version="v1", judge_id=LEXICAL_JUDGE, score=0.8
        )
        for i in range(24)
    ]
    store.insert_rows(rows, dedup_token="mid-minute")
    counter = TrafficCounter()
    for r in rows:
        counter.add(r.event_time.timestamp(), r.app, r.model, r.prompt_version, "consumed")
    store.insert_table("traffic_counts", COLUMNS, counter.drain())
    traffic = fetch_report_data(store, start + timedelta(seconds=15), start + timedelta(minutes=5), 60).traffic
    consumed, judged = sum(b.consumed for b in traffic), sum(b.judged for b in traffic)
    assert (consumed, judged) == (18, 18)  # minutes 11, 12 and 13, six events each


def test_calls_without_content_are_named_beside_the_scores_and_on_an_empty_page(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    """OpenTelemetry calls counted as `no_content` are told per app, so "no scores" never reads as "no traffic":
    on a page with scores and on one without."""
    from monitor.judging.traffic_counts import COLUMNS, TrafficCounter

    counter = TrafficCounter()
    for i in range(7):
        counter.add((T0 + timedelta(minutes=5 + i)).timestamp(), "support-bot", "claude", "", "no_content")
    store.insert_table("traffic_counts", COLUMNS, counter.drain())
    write_report(store, T0, T1, tmp_path / "empty.html")
    empty = _section(read_page(tmp_path / "empty.html"), "summary")
    assert "7 OpenTelemetry LLM calls arrived without their text and were not scored (support-bot 7)" in empty
    fill(store)
    write_report(store, T0, T1, tmp_path / "full.html")
    assert 'id="no-content"' in _section(read_page(tmp_path / "full.html"), "summary")
