"""The web UI's pages on a large store: 10 million scored rows over 30 days and 50 segments (`python -m
bench.ui_pages [--rows N] [--quick]`), each page timed in-process against a query measured in the same run.

The store (embedded, in a temporary directory) is filled server-side: one `INSERT INTO relevancy_scores SELECT ...
FROM numbers(N)`, so the rollups' materialized views fill as they do for the monitor's own inserts. 5 apps × 10
(model, prompt version); one row in 20 is a shadow judge's row of the event before it, one in 200 an error; short
texts and two statements a row. The last two days of four segments score lower, and `alert_state` holds their
firing `relevancy_drop` episodes beside resolved and inactive ones of the rest; a few hundred labels by three
reviewers sit in `labels`.

Each page is requested through the app itself (`monitor.ui.app.create_app`, over `httpx2.ASGITransport`: no socket,
no server), once to warm up, then five times (`--repeats`); the median is reported, against the issue's 1 s and as a
multiple of the reference measured in the same run: a full scan of the minute rollup summing every segment's counts
and scores (what an overview must read at least once), timed before and after the pages. The fill's merges are waited
out first. Ratios are what to compare between machines.

`--quick` (200,000 rows) checks that it still works in seconds."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx2

from bench.output import emit
from monitor.alerts.evaluator import AlertState, segment_key_json
from monitor.alerts.links import alert_path, answer_path
from monitor.alerts.state import StateStore
from monitor.judges.lexical import LexicalJudge
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations

DEFAULT_JSON = Path(".relevancy-monitor/bench/ui_pages.json")
DATABASE = "relevancy"
TABLE = "relevancy_scores"
DAYS = 30
APPS = 5
ARMS = 10  # (model, prompt version) per app: 2 models × 5 prompt versions
PRIMARY = LexicalJudge().info.judge_id
SHADOW = "rubric-5ad0c0ffee01"
DROPPED = (3, 17, 28, 44)  # segments whose last two days score lower: their relevancy_drop is firing
LABELS = 300
TARGET_S = 1.0
REPEATS = 5
REVIEWER = "bench"
# What each page shows when it did its work (an item drawn, answers listed, segments read), not only HTTP 200.
SHOWS = {
    "overview": 'class="segment"',
    "alert": 'class="answer-link"',
    "explore, first page": 'class="answer-link"',
    "explore, filtered": 'class="answer-link"',
    "review, next item": 'id="why"',
    "agreement": "kappa-all",
}
REVIEWER_HEADER = "X-Reviewer"  # the bench names a new reviewer per request through the trusted-header path

# Row n: segment n % 50, event time spread evenly over the 30 days; row n with n % 20 = 19 is the shadow judge's row
# of event n - 1 (same id, app and time). {start} is the first event's epoch seconds, {step} the seconds between rows.
_FILL = """
INSERT INTO {database}.{table}
    (event_id, conversation_id, event_time, app, model, prompt_version, judge, judge_model, judge_id, status, error,
     score, raw_score, reasoning, statements, verdicts, verdict_reasons, n_statements, question, response,
     sample_rate, sample_rule, latency_ms, kafka_topic, kafka_partition, kafka_offset, scored_at, version)
SELECT
    concat('e', toString(event)) AS event_id,
    concat('c', toString(intDiv(event, 3))) AS conversation_id,
    toDateTime64({start} + event * {step}, 3, 'UTC') AS t,
    concat('app-', toString(intDiv(segment, 10))) AS app,
    ['model-a', 'model-b'][arm % 2 + 1] AS model,
    concat('v', toString(intDiv(arm, 2) + 1)) AS prompt_version,
    if(shadow, 'rubric', 'lexical') AS judge,
    if(shadow, 'claude-haiku-4-5', 'heuristic') AS judge_model,
    if(shadow, '{shadow}', '{primary}') AS judge_id,
    if(failed, 'error', 'ok') AS status,
    if(failed, 'unavailable: timeout', '') AS error,
    if(failed, NULL, round(greatest(0., least(1., 0.55 + 0.4 * u - if(dropped, 0.3, 0.) + if(shadow, 0.1, 0.))), 3))
        AS score,
    score AS raw_score,
    if(failed, '', 'heuristic: 1 of 2 sentences share a content word with the question') AS reasoning,
    if(failed, [], ['Order A17 shipped on 3 March.', 'We also sell gift cards.']) AS statements,
    if(failed, [], ['yes', if(ifNull(score, 1) < 0.5, 'no', 'yes')]) AS verdicts,
    if(failed, [], ['shares: order', '']) AS verdict_reasons,
    length(statements) AS n_statements,
    concat('When did order A', toString(event % 1000), ' ship?') AS question,
    'Order A17 shipped on 3 March. We also sell gift cards.' AS response,
    1.0 AS sample_rate,
    if(shadow, 'shadow:base', 'base') AS sample_rule,
    if(shadow, 900, 2) AS latency_ms,
    'conversations' AS kafka_topic,
    toInt32(event % 3) AS kafka_partition,
    toInt64(event) AS kafka_offset,
    t + toIntervalSecond(3) AS scored_at,
    toUInt64(1) AS version
FROM (
    SELECT
        number - (number % 20 = 19) AS event,
        number % 20 = 19 AS shadow,
        event % 50 AS segment,
        segment % 10 AS arm,
        number % 200 = 7 AS failed,
        (cityHash64(number) % 10000) / 10000. AS u,
        has([{dropped}], segment) AND event * {step} > {last_two_days} AS dropped
    FROM numbers({rows})
)
"""

# A few hundred labels on primary rows of the last 14 days, by three reviewers, near the judge's level.
_LABELS = """
INSERT INTO {database}.labels
    (event_id, app, model, prompt_version, turn, judge_id, judge_score, reviewer, label, comment, route,
     inclusion_probability, event_time, labelled_at)
SELECT event_id, app, model, prompt_version, turn, judge_id, score,
    ['bench-a', 'bench-b', 'bench-c'][kafka_offset % 3 + 1], toUInt8(least(4, round(score * 4) + kafka_offset % 2)),
    '', if(kafka_offset % 5 = 0, 'control', 'borderline'), if(kafka_offset % 5 = 0, 0.2, 0.8), event_time,
    event_time + toIntervalHour(1)
FROM {database}.{table}
WHERE judge_id = '{primary}' AND status = 'ok' AND event_time > {since} AND kafka_offset % {every} = 0
LIMIT {labels}
"""

# The reference: every minute of every segment, summed (a full scan of the minute rollup).
_REFERENCE = """
SELECT app, model, prompt_version, judge_id, sum(n_ok), sum(score_sum), sum(n_rows)
FROM {database}.relevancy_rollup_1m
GROUP BY app, model, prompt_version, judge_id
"""


def segment(index: int) -> tuple[tuple[str, str], ...]:
    """The alert segment (app, model, prompt version, judge) of segment `index`, as the fill names it."""
    arm = index % ARMS
    return (
        ("app", f"app-{index // ARMS}"),
        ("model", ("model-a", "model-b")[arm % 2]),
        ("prompt_version", f"v{arm // 2 + 1}"),
        ("judge_id", PRIMARY),
    )


def alert_states(now: datetime) -> list[AlertState]:
    """`relevancy_drop` on every segment: firing on the dropped ones, resolved on every seventh, inactive elsewhere;
    plus a firing `judge_error_rate` on one app."""
    states = []
    for i in range(APPS * ARMS):
        if i in DROPPED:
            since, fired = now - timedelta(days=2), now - timedelta(days=2) + timedelta(minutes=40)
            states.append(
                AlertState(
                    "relevancy_drop",
                    segment(i),
                    "firing",
                    since=since,
                    fired_at=fired,
                    last_eval_at=now,
                    value=0.45,
                    baseline=0.75,
                    severity="page",
                )
            )
        elif i % 7 == 0:
            states.append(
                AlertState(
                    "relevancy_drop",
                    segment(i),
                    "resolved",
                    since=now - timedelta(days=9),
                    fired_at=now - timedelta(days=9, minutes=-30),
                    resolved_at=now - timedelta(days=8),
                    last_eval_at=now,
                    severity="page",
                )
            )
        else:
            states.append(AlertState("relevancy_drop", segment(i), "inactive", last_eval_at=now, severity="page"))
    states.append(
        AlertState(
            "judge_error_rate",
            (("app", "app-1"),),
            "firing",
            since=now - timedelta(hours=1),
            fired_at=now - timedelta(minutes=45),
            last_eval_at=now,
            value=0.02,
            baseline=0.005,
            severity="ticket",
        )
    )
    return states


def fill(store: ClickHouseStore, rows: int, now: datetime) -> dict[str, float]:
    """Migrate and fill the store; seconds of each step."""
    took: dict[str, float] = {}
    started = time.perf_counter()
    Migrations(store).ensure(migrate=True)
    took["migrate_s"] = time.perf_counter() - started
    start = now - timedelta(days=DAYS)
    step = DAYS * 86400 / rows
    started = time.perf_counter()
    store.command(
        _FILL.format(
            database=DATABASE,
            table=TABLE,
            start=start.timestamp(),
            step=step,
            rows=rows,
            primary=PRIMARY,
            shadow=SHADOW,
            dropped=", ".join(map(str, DROPPED)),
            last_two_days=(DAYS - 2) * 86400,
        )
    )
    took["fill_s"] = time.perf_counter() - started
    started = time.perf_counter()
    StateStore(store, writer="bench").save(alert_states(now), now)
    since = int((now - timedelta(days=14)).timestamp())
    every = max(1, rows // (4 * LABELS)) | 1  # odd and off the multiples of 5: the labels spread over segments
    every += 2 if every % 5 == 0 else 0
    store.command(
        _LABELS.format(database=DATABASE, table=TABLE, primary=PRIMARY, since=since, every=every, labels=LABELS)
    )
    took["alerts_and_labels_s"] = time.perf_counter() - started
    return took


def pages(store: ClickHouseStore, now: datetime) -> dict[str, str]:
    """The pages timed, by name, and their paths (the firing alert, a real answer, filters that match rows)."""
    firing = segment(DROPPED[0])
    event = store.query(
        f"SELECT event_id FROM {DATABASE}.{TABLE} WHERE judge_id = {{j:String}} AND app = {{a:String}} "
        "ORDER BY event_time DESC LIMIT 1",
        {"j": PRIMARY, "a": firing[0][1]},
    ).rows[0][0]
    filtered = {
        "since": (now - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M"),
        "until": now.strftime("%Y-%m-%dT%H:%M"),
        "app": firing[0][1],
        "model": firing[1][1],
        "prompt_version": firing[2][1],
        "judge_id": PRIMARY,
        "score_max": "0.3",
    }
    return {
        "overview": "/",
        "alert": alert_path("relevancy_drop", segment_key_json(firing)),
        "explore, first page": "/explore",
        "explore, filtered": "/explore?" + urlencode(filtered),
        "answer": answer_path(str(event)),
        "review, next item": "/review",
        "agreement": "/agreement",
    }


def _times_s(run: Callable[[], Any], repeats: int = REPEATS) -> list[float]:
    run()  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return times


def settle(store: ClickHouseStore, limit_s: float = 600.0) -> float:
    """Wait until no merge of the database is running (three quiet polls in a row): a store that has been live for
    30 days is mostly merged, and merges left by the fill would compete with the timed requests. Seconds waited."""
    started = time.perf_counter()
    quiet = 0
    while quiet < 3 and time.perf_counter() - started < limit_s:
        running = store.query("SELECT count() FROM system.merges WHERE database = {d:String}", {"d": DATABASE})
        quiet = quiet + 1 if running.rows[0][0] == 0 else 0
        time.sleep(0.5)  # the polling interval of the condition above
    return time.perf_counter() - started


async def _time_pages(app: Any, paths: dict[str, str], repeats: int = REPEATS) -> dict[str, dict[str, Any]]:
    timed: dict[str, dict[str, Any]] = {}
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        for name, path in paths.items():
            statuses = []
            times = []
            for k in range(repeats + 1):
                started = time.perf_counter()
                # A new reviewer each time: the queue serves a reviewer the item it holds already (one cheap check),
                # so one name would time that, not the draw of a new item.
                answer = await client.get(path, headers={REVIEWER_HEADER: f"{REVIEWER}-{k}"})
                if k:  # the first is the warm-up
                    times.append(time.perf_counter() - started)
                statuses.append(answer.status_code)
                bytes_ = len(answer.content)
            if set(statuses) != {200}:  # a page that fails is not timed: its figure would mean nothing
                raise RuntimeError(f"{name} ({path}): HTTP {statuses}")
            marker = SHOWS.get(name)
            if marker is not None and marker not in answer.text:  # a 200 that drew nothing would time nothing
                raise RuntimeError(f"{name} ({path}): the page lacks {marker!r}")
            timed[name] = {"path": path, "s": statistics.median(times), "status": statuses[-1], "bytes": bytes_}
    return timed


def build_app(url: str) -> Any:
    """The UI's ASGI app on the store at `url`, the reviewer named by each request's `REVIEWER_HEADER`."""
    from monitor.ui.app import create_app
    from monitor.ui.settings import UiSettings

    return create_app(url=url, database=DATABASE, settings=UiSettings(user_header=REVIEWER_HEADER))


def measure(rows: int, directory: Path, repeats: int = REPEATS) -> dict[str, Any]:
    """Fill a store of `rows` rows in `directory` and time each page and the reference, each `repeats` times after
    its warm-up (see the module doc)."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    url = f"chdb://{directory}"
    store = ClickHouseStore(url, DATABASE, TABLE)
    took = fill(store, rows, now)
    counts = store.query(
        f"SELECT (SELECT count() FROM {DATABASE}.{TABLE}), (SELECT count() FROM {DATABASE}.relevancy_rollup_1m), "
        f"(SELECT count() FROM {DATABASE}.labels)"
    ).rows[0]
    took["settle_s"] = settle(store)
    reference = _times_s(lambda: store.query(_REFERENCE.format(database=DATABASE)), repeats)
    paths = pages(store, now)
    timed = asyncio.run(_time_pages(build_app(url), paths, repeats))
    # before and after the pages
    reference += _times_s(lambda: store.query(_REFERENCE.format(database=DATABASE)), repeats)
    reference_s = statistics.median(reference)
    for page in timed.values():
        page["ratio_to_target"] = page["s"] / TARGET_S
        page["ratio_to_reference"] = page["s"] / reference_s
    return {
        "rows": int(counts[0]),
        "rollup_1m_rows": int(counts[1]),
        "labels": int(counts[2]),
        "segments": APPS * ARMS,
        "days": DAYS,
        **took,
        "reference_s": reference_s,
        "target_s": TARGET_S,
        "repeats": repeats,
        "pages": timed,
    }


def report_lines(r: dict[str, Any]) -> list[str]:
    """The figures as a table for people."""
    lines = [
        f"{r['rows']:,} scored rows over {r['days']} days, {r['segments']} segments ({r['rollup_1m_rows']:,} minute "
        f"rollup rows, {r['labels']} labels); filled in {r['fill_s']:.1f} s (+ {r['migrate_s']:.1f} s migrations, "
        f"{r['alerts_and_labels_s']:.1f} s alert state and labels; merges settled {r['settle_s']:.1f} s later)",
        f"reference, a full scan of the minute rollup: {1000 * r['reference_s']:.0f} ms (median of {r['repeats']} "
        f"before and {r['repeats']} after the pages); each page: median of {r['repeats']} after a warm-up",
        f"{'page':<22}{'status':>7}{'ms':>9}{'÷ 1 s':>8}{'÷ reference':>13}",
    ]
    for name, page in r["pages"].items():
        lines.append(
            f"{name:<22}{page['status']:>7}{1000 * page['s']:>9.0f}{page['ratio_to_target']:>8.2f}"
            f"{page['ratio_to_reference']:>13.1f}"
        )
    return lines


def main(rows: int = 10_000_000, json_path: Path | None = DEFAULT_JSON, repeats: int = REPEATS) -> dict[str, Any]:
    """Measure, print and write JSON."""
    with tempfile.TemporaryDirectory(prefix="ui-pages-") as directory:
        result = measure(rows, Path(directory), repeats)
    emit(report_lines(result), result, json_path)
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--quick", action="store_true", help="200,000 rows: checks that it works, in seconds")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    p.add_argument(
        "--repeats", type=int, default=REPEATS, help=f"timed requests per page after its warm-up (default {REPEATS})"
    )
    a = p.parse_args()
    main(200_000 if a.quick else a.rows, a.json, a.repeats)
