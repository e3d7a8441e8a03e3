"""A store filled through the real writers for the report tests: scored rows through `ClickHouseStore.insert_rows`,
traffic counts through `TrafficCounter` and the table the monitor writes them to, alert state through `StateStore`.

Times are explicit (a fixed day), so nothing depends on the clock."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from monitor.alerts.evaluator import AlertState
from monitor.alerts.state import StateStore
from monitor.judging.traffic_counts import COLUMNS as TRAFFIC_COLUMNS
from monitor.judging.traffic_counts import TrafficCounter
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.scored import ScoredRow

T0 = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(hours=24)
STATEMENTS_JUDGE = "statements-4be1c0ffee42"
LEXICAL_JUDGE = "lexical-9a8b7c6d5e4f"
HOSTILE = '<script>alert("x")</script><img src="https://evil.example/p.png">'


_FETCHING_TAGS = frozenset(
    {"script", "link", "img", "iframe", "frame", "object", "embed", "audio", "video", "source", "track", "image"}
)
_URL_ATTRS = frozenset(
    {"src", "href", "xlink:href", "action", "formaction", "poster", "srcset", "data", "background", "ping"}
)
_CSS_FETCH = re.compile(r"url\(\s*['\"]?\s*(?!#|data:)|@import", re.IGNORECASE)


class _References(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _FETCHING_TAGS:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            # Only a same-document fragment (#id: the SVG's glyphs and clip paths) loads nothing.
            if value and (
                (name in _URL_ATTRS and not value.startswith("#")) or (name == "style" and _CSS_FETCH.search(value))
            ):
                self.found.append(f"{tag} {name}={value}")
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        match = _CSS_FETCH.search(data) if self._in_style else None
        if match:
            self.found.append(f"<style> {data[match.start() : match.start() + 80]}")


def read_page(path: Path) -> str:
    """A written report's HTML as one line without whitespace between tags: what the tests look for does not depend
    on where the templates break their lines (whitespace the browser collapses or ignores)."""
    return re.sub(r">\s+<", "><", re.sub(r"\s+", " ", path.read_text(encoding="utf-8")))


def outside_references(html: str) -> list[str]:
    """Elements, attributes and CSS of `html` that would load something when the page is opened (text that merely
    mentions a URL is not one); an empty list for a self-contained page."""
    parser = _References()
    parser.feed(html)
    parser.close()
    return parser.found


@dataclass(frozen=True)
class Filled:
    """What `fill` wrote: the store, the distinct rows, the rate-limited rows, the firings that overlap the day."""

    store: ClickHouseStore
    rows: int
    rate_limited: int
    firings_in_range: int


def make_row(
    t: datetime,
    *,
    app: str,
    prompt_version: str,
    judge_id: str,
    score: float | None,
    error: str = "",
    sample_rate: float = 1.0,
    lag_s: float = 4.0,
    cost: float | None = 0.0004,
    question: str = "When did order A17 ship?",
    response: str = "Order A17 shipped on 3 March.",
    statements: tuple[tuple[str, str, str], ...] = (),
) -> ScoredRow:
    """One scored row at event time `t` (an error row when `score` is None)."""
    judge = judge_id.split("-")[0]
    return ScoredRow(
        event_id=uuid.uuid4().hex,
        conversation_id="c-" + uuid.uuid4().hex[:8],
        event_time=t,
        app=app,
        model="claude-haiku-4-5",
        prompt_version=prompt_version,
        judge=judge,
        judge_model="claude-haiku-4-5" if judge == "statements" else "",
        judge_id=judge_id,
        status="ok" if score is not None else "error",
        error=error,
        score=score,
        raw_score=score,
        reasoning="" if score is None else f"{len(statements)} statements judged",
        statements=[s for s, _, _ in statements],
        verdicts=[v for _, v, _ in statements],
        verdict_reasons=[r for _, _, r in statements],
        n_statements=len(statements),
        question=question,
        response=response,
        sample_rate=sample_rate,
        sample_rule="base",
        cost_usd=cost if judge == "statements" else None,
        input_tokens=800 if judge == "statements" else 0,
        output_tokens=120 if judge == "statements" else 0,
        scored_at=t + timedelta(seconds=lag_s),
        latency_ms=900,
    )


def _day_of_rows() -> tuple[list[ScoredRow], int]:
    """Every 10 minutes: `support` (v1 until noon, a worse v2 after, statements judge, sampled at 0.5) and `search`
    (v7, lexical judge, all judged); a few error rows, some of them rate limited; a handful of hostile texts."""
    rows: list[ScoredRow] = []
    limited = 0
    t = T0
    i = 0
    while t < T1:
        hour = (t - T0).total_seconds() / 3600
        wave = 0.05 * math.sin(i / 7)
        version = "v1" if hour < 12 else "v2"
        base = 0.86 if version == "v1" else (0.55 if 14 <= hour < 18 else 0.74)
        good = (("Order A17 shipped on 3 March.", "yes", ""),)
        padded = (*good, ("We also sell gift cards.", "no", "an upsell, not about the order"))
        rows.append(
            make_row(
                t,
                app="support",
                prompt_version=version,
                judge_id=STATEMENTS_JUDGE,
                score=round(min(1.0, base + wave), 3),
                sample_rate=0.5,
                statements=padded if version == "v2" else good,
            )
        )
        rows.append(
            make_row(
                t,
                app="search",
                prompt_version="v7",
                judge_id=LEXICAL_JUDGE,
                score=round(0.7 + wave, 3),
                lag_s=2.0 + (i % 5),
            )
        )
        if i % 24 == 5:
            rows.append(
                make_row(
                    t,
                    app="support",
                    prompt_version=version,
                    judge_id=STATEMENTS_JUDGE,
                    score=None,
                    error="invalid_reply: no verdicts",
                )
            )
        if i % 36 == 7:
            err = "unavailable: rate_limited: HTTP 429 rate_limit_error: slow down (after 3 attempts)"
            rows.append(
                make_row(
                    t,
                    app="support",
                    prompt_version=version,
                    judge_id=STATEMENTS_JUDGE,
                    score=None,
                    error=err,
                    cost=None,
                )
            )
            limited += 1
        if i % 48 == 11:
            rows.append(
                make_row(
                    t,
                    app="support",
                    prompt_version=version,
                    judge_id=STATEMENTS_JUDGE,
                    score=0.0,
                    question=f"Where is my parcel? {HOSTILE}",
                    response="Thanks for getting in touch! We also sell gift cards: see https://shop.example/gift & "
                    "more.",
                    statements=(
                        ("Thanks for getting in touch!", "no", "a greeting"),
                        ("We also sell gift cards.", "no", f"an upsell {HOSTILE}"),
                    ),
                )
            )
        t += timedelta(minutes=10)
        i += 1
    return rows, limited


def _traffic(rows: list[ScoredRow]) -> list[tuple[object, ...]]:
    """Traffic as the pipeline counts it: each judged event consumed and sampled; support also had as many events
    not sampled (its rate is 0.5), and a few records could not be decoded."""
    counter = TrafficCounter()
    for r in rows:
        at = r.event_time.timestamp()
        for field in ("consumed", "sampled"):
            counter.add(at, r.app, r.model, r.prompt_version, field)
        if r.app == "support":
            counter.add(at, r.app, r.model, r.prompt_version, "consumed")
            counter.add(at, r.app, r.model, r.prompt_version, "not_sampled")
    for k in range(5):
        at = (T0 + timedelta(hours=3 * k)).timestamp()
        counter.add(at, "", "", "", "consumed")
        counter.add(at, "", "", "", "dead_lettered")
    return counter.drain()


def _alert_states() -> list[AlertState]:
    """A resolved drop of support v2, a still-firing floor on every app, one of an app with no rows in the day, and one
    that resolved before the day began."""
    drop = (("app", "support"), ("prompt_version", "v2"), ("judge_id", STATEMENTS_JUDGE))
    return [
        AlertState(
            "relevancy_drop",
            drop,
            "resolved",
            since=T0 + timedelta(hours=14),
            fired_at=T0 + timedelta(hours=14, minutes=20),
            resolved_at=T0 + timedelta(hours=18, minutes=10),
            value=0.55,
            baseline=0.86,
            severity="page",
            note="welch t-test",
        ),
        AlertState(
            "judge_error_rate",
            (("judge_id", STATEMENTS_JUDGE),),
            "firing",
            since=T0 + timedelta(hours=21),
            fired_at=T0 + timedelta(hours=21, minutes=5),
            value=0.08,
            baseline=0.01,
            severity="ticket",
        ),
        AlertState(
            "relevancy_floor", (("app", "billing"),), "firing", fired_at=T0 + timedelta(hours=2), severity="page"
        ),
        AlertState(
            "relevancy_floor",
            (("app", "search"),),
            "resolved",
            fired_at=T0 - timedelta(hours=5),
            resolved_at=T0 - timedelta(hours=4),
            severity="page",
        ),
    ]


def fill(store: ClickHouseStore) -> Filled:
    """Write the day's rows (one batch twice, as a redelivery would, under another dedup token), traffic and alert
    state."""
    rows, limited = _day_of_rows()
    for i in range(0, len(rows), 200):
        store.insert_rows(rows[i : i + 200], uuid.uuid4().hex)
    store.insert_rows(rows[:50], uuid.uuid4().hex)  # the same events again: FINAL must count them once
    store.insert_table("traffic_counts", TRAFFIC_COLUMNS, _traffic(rows))
    StateStore(store, writer="test").save(_alert_states(), T1)
    return Filled(store, len(rows), limited, firings_in_range=3)


@pytest.fixture(scope="module")
def filled(chdb_dir: Path) -> Iterator[Filled]:
    """One store for the module's read-only tests (filling it once keeps them quick)."""
    store = ClickHouseStore(f"chdb://{chdb_dir}", f"r_{uuid.uuid4().hex[:12]}", "relevancy_scores")
    Migrations(store).ensure()
    yield fill(store)
    store.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
    store.close()


REPLAY_JUDGE = "rubric-0123456789ab"


def replayed_rows() -> list[ScoredRow]:
    """Two replays over the filled day, 13 rows in it and one after it: a new judge on support (one error row among its
    rows), the lexical judge on events of search the live consumer never scored; every ok row scored 0 with a question
    saying it was replayed."""
    rows = []
    for h in range(6):
        at = T0 + timedelta(hours=3 * h, minutes=5)
        new = make_row(
            at, app="support", prompt_version="v1", judge_id=REPLAY_JUDGE, score=0.0, question="REPLAYED by a new judge"
        )
        same = make_row(
            at,
            app="search",
            prompt_version="v7",
            judge_id=LEXICAL_JUDGE,
            score=0.0,
            question="REPLAYED by the live judge",
        )
        rows += [new.model_copy(update={"replay_run": "run-new"}), same.model_copy(update={"replay_run": "run-same"})]
    failed = make_row(
        T0 + timedelta(hours=2),
        app="support",
        prompt_version="v1",
        judge_id=REPLAY_JUDGE,
        score=None,
        error="replayed_failure: x",
    )
    late = make_row(T1 + timedelta(hours=1), app="search", prompt_version="v7", judge_id=LEXICAL_JUDGE, score=0.0)
    return [
        *rows,
        failed.model_copy(update={"replay_run": "run-new"}),
        late.model_copy(update={"replay_run": "run-same"}),
    ]
